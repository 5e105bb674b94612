"""`flowherd.engine.pages.small_pages`: numpy's huge-page request is off inside, as before after."""

import numpy as np
import pytest

from flowherd.engine.pages import small_pages

setp = pytest.importorskip("numpy._core.multiarray")._set_madvise_hugepage


@pytest.mark.parametrize("before", [True, False])
def test_huge_pages_off_inside_and_restored_after(before):
    setp(before)
    with small_pages():
        inside = setp(False)  # returns the setting it replaces
    assert inside is False
    assert setp(True) is before


def test_restored_when_the_block_raises():
    setp(True)
    with pytest.raises(RuntimeError), small_pages():
        raise RuntimeError
    assert setp(True) is True


def test_a_collective_run_leaves_the_setting_as_it_was():
    from flowherd.cluster.collective import simulate_collective
    from flowherd.collectives.ops import Collective, Op
    from flowherd.fabric.builder import FabricBuilder
    from flowherd.fabric.core import LinkKind, NodeKind

    b = FabricBuilder("switch-4")
    gpus = b.add_gpus(servers=np.arange(4), gpu_type=["h100"] * 4)
    sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
    b.connect(gpus, np.repeat(sw, 4), 50 * 2**30, 1e-6, LinkKind.NETWORK)
    setp(True)
    r = simulate_collective(b.build(), Collective(op=Op.ALLREDUCE, size_bytes=2**20, gpus=(0, 1, 2, 3)),
                            algorithm="ring", router="shortest")
    assert r.time_s > 0
    assert setp(True) is True
