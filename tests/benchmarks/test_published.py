"""benchmarks/published.py: the rows' model shapes against what their sources count, and ``--set``."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import published  # noqa: E402
from flowherd.workload.models import ModelShape  # noqa: E402


def _row(label: str) -> published.Row:
    return next(r for r in published.ROWS if r.label.startswith(label))


def test_mpt_rows_carry_a_learned_position_table_of_their_sequence():
    # llm-foundry@061f2c7 scripts/train/benchmarking/README.md, NumParams of the H100 MPT-30b rows:
    # 29,975,214,080 at 2,048 tokens and 30,019,254,272 at 8,192 (learned_pos_emb: max_seq_len x d_model)
    short, long = _row("MPT-30b s=2048 8xH100"), _row("MPT-30b s=8192 8xH100")
    grown = ModelShape(**long.model).num_params() - ModelShape(**short.model).num_params()
    assert grown == 30_019_254_272 - 29_975_214_080
    assert not ModelShape(**short.model).rotary  # MPTConfig: no rotary, no ALiBi, learned positions


def test_set_parses_each_value_as_its_row_field_type():
    got = published.settings(["micro_batch=4", "recompute=full", "tp_comm_overlap=false", "fsdp_shard=none"])
    assert got == {"micro_batch": 4, "recompute": "full", "tp_comm_overlap": False, "fsdp_shard": None}


@pytest.mark.parametrize("pair", ["micro_batch", "bogus=1", "published=100", "label=x"])
def test_set_refuses_what_is_not_a_run_setting(pair):
    with pytest.raises(SystemExit, match="--set"):
        published.settings([pair])


def test_large_scale_rows_count_their_tables_parameters_and_run_as_the_sweep_states():
    # llm-foundry@5e85bd62d scripts/train/benchmarking/README.md, "H100 80GB BF16 (Large Scale)", NumParams;
    # sweep.py: attn_impl flash (flash-attn 2.4.2) for 7b and 70b, triton for 13b and 30b
    counts = {"7b": 6_658_859_008, "13b": 12_853_954_560, "30b": 29_975_214_080, "70b": 64_862_437_376}
    kernel = {"7b": "flash2", "13b": "triton", "30b": "triton", "70b": "flash2"}
    rows = [r for r in published.ROWS if r.source.startswith("LLM Foundry MPT benchmarks, large scale")]
    assert sorted({r.gpus for r in rows}) == [128, 256, 512] and len(rows) == 12
    for r in rows:
        size = r.model["name"].split("-")[1]
        m = ModelShape(**r.model)
        # the shape counts the matrices and embeddings only: the table also counts, per layer, the
        # linear biases (QKV 3h, output h, MLP 4h + h) and two LayerNorm weights, and the final norm's
        assert counts[size] - m.num_params() == (11 * m.layers + 1) * m.hidden, r.label
        assert r.attention == kernel[size] and r.fsdp and r.held_out and r.series
