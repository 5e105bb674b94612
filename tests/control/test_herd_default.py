"""flowherd's default buffering: the shift where learnt periods agree, the gate where they differ."""

from flowherd.control.herd import HerdController, HerdParams


def test_the_default_buffering_chooses_per_collective_from_the_learnt_periods():
    # on the mixed-period family the shift throughout is slower than no control and auto is not
    # (docs/control-buffering.md): the default must be auto, and the controller built by name too
    assert HerdParams().buffering == "auto"
    assert HerdController().params.buffering == "auto"
