"""GPU and model catalogs: datasheet figures, parameter counts, FLOP closed forms."""

from __future__ import annotations

import pytest

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.units import GB, TFLOPS, GBps, Gbps
from flowherd.workload import GPUS, MODELS, ModelShape, get_gpu, get_model


def test_gpu_catalog_holds_the_required_parts_with_positive_figures():
    for name in ("a100", "h100", "h200", "b200", "mi300x"):
        g = GPUS[name]
        assert g.peak_bf16_flops > 100 * TFLOPS
        assert g.memory_bytes >= 80 * GB
        assert g.scaleup_bytes_per_s >= 300 * GBps
        assert g.nic_bytes_per_s >= 200 * Gbps


def test_gpu_figures_match_datasheets():
    # NVIDIA H100 SXM datasheet: 1,979 TFLOPS BF16 with sparsity (989 dense), NVLink 900 GB/s bidirectional.
    assert get_gpu("H100").peak_bf16_flops == pytest.approx(989 * TFLOPS)
    assert GPUS["h100"].scaleup_bytes_per_s == pytest.approx(450 * GBps)
    # NVIDIA A100 datasheet: 312 TFLOPS BF16 dense; AMD MI300X datasheet: 1,307.4 TFLOPS BF16 dense, 192 GB.
    assert GPUS["a100"].peak_bf16_flops == pytest.approx(312 * TFLOPS)
    assert GPUS["mi300x"].peak_bf16_flops == pytest.approx(1307.4 * TFLOPS)
    assert GPUS["mi300x"].memory_bytes == 192 * GB
    # H200 keeps H100's compute and raises memory to 141 GB.
    assert GPUS["h200"].peak_bf16_flops == GPUS["h100"].peak_bf16_flops
    assert GPUS["h200"].memory_bytes == 141 * GB


def test_unknown_gpu_names_the_closest_entry():
    with pytest.raises(UnknownNameError, match="did you mean 'h100'"):
        get_gpu("h10")


@pytest.mark.parametrize(
    ("name", "expected", "rel"),
    [
        ("llama3-70b", 70.6e9, 0.01),  # Meta model card: 70.6B
        ("llama3-8b", 8.03e9, 0.01),  # Meta model card: 8.03B
        ("llama3-405b", 405.8e9, 0.01),  # Llama 3 Herd of Models: 405B (HF: 405.85B)
        ("gpt3-175b", 175e9, 0.01),  # Brown et al. 2020, Table 2.1
        ("mixtral-8x7b", 46.7e9, 0.01),  # Mixtral of Experts: 46.7B total
        ("deepseek-v3", 671e9, 0.01),  # DeepSeek-V3 report: 671B total (MTP excluded)
    ],
)
def test_parameter_count_matches_published_total(name, expected, rel):
    assert MODELS[name].num_params() == pytest.approx(expected, rel=rel)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("mixtral-8x7b", 12.9e9), ("deepseek-v3", 37e9)],  # Mixtral paper: 12.9B active; DeepSeek-V3: 37B
)
def test_active_parameters_of_moe_match_published(name, expected):
    assert MODELS[name].num_active_params() == pytest.approx(expected, rel=0.02)


def test_dense_model_has_all_parameters_active():
    m = MODELS["llama3-70b"]
    assert m.num_active_params() == m.num_params()
    assert m.num_moe_layers == 0


def test_gpt3_training_flops_equal_narayanan_closed_form():
    # Narayanan et al. SC'21, appendix: without recomputation an iteration costs
    # 72 B s l h^2 (1 + s/(6h) + V/(12 l h)); the model ignores biases and norms in FLOPs as the paper does.
    m = MODELS["gpt3-175b"]
    B, s, L, h, V = 8, 2048, 96, 12288, 50257
    closed = 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))
    assert 3 * m.forward_flops_per_token(s) * B * s == pytest.approx(closed, rel=1e-12)


def test_moe_layer_pattern_follows_first_dense_and_interval():
    ds = MODELS["deepseek-v3"]
    assert [ds.layer_is_moe(i) for i in range(5)] == [False, False, False, True, True]
    assert ds.num_moe_layers == 58
    every2 = ModelShape(name="x", layers=8, hidden=64, heads=4, ffn_hidden=128, vocab=100, experts=4, top_k=1,
                        moe_every=2)
    assert [every2.layer_is_moe(i) for i in range(4)] == [True, False, True, False]


def test_kv_cache_bytes_per_token_closed_form():
    # 2 (K and V) * layers * kv_heads * head_dim * bytes: Llama-3 70B, 2 * 80 * 8 * 128 * 2 = 327,680 B.
    assert MODELS["llama3-70b"].kv_cache_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2
    # MLA caches (kv_lora_rank + rope_dim) per layer: DeepSeek-V2 section 2.1.2.
    assert MODELS["deepseek-v3"].kv_cache_bytes_per_token(2) == 61 * (512 + 64) * 2


def test_model_from_mapping_builds_a_custom_shape():
    m = get_model({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100,
                   "gated_mlp": False, "tied_embeddings": True})
    # per layer 4h^2 (attention) + 2*h*ffn (MLP) + 2h (norms), plus the embedding and the final norm
    assert m.num_params() == 2 * (4 * 64 * 64 + 2 * 64 * 256 + 2 * 64) + 100 * 64 + 64


def test_model_mapping_with_misspelled_field_names_it():
    with pytest.raises(ConfigError, match=r"did you mean 'hidden'.*model\.hiden"):
        ModelShape.from_mapping({"layers": 2, "hiden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100})


def test_model_mapping_missing_field_is_named():
    with pytest.raises(ConfigError, match="vocab"):
        ModelShape.from_mapping({"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256})


@pytest.mark.parametrize(
    ("override", "field"),
    [({"layers": 0}, "layers"), ({"kv_heads": 3}, "kv_heads"), ({"heads": 5}, "heads"),
     ({"experts": 4, "top_k": 5}, "top_k"), ({"top_k": 2}, "experts"), ({"hidden": 64.5}, "hidden")],
)
def test_invalid_shape_names_the_field(override, field):
    base = {"name": "t", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100}
    with pytest.raises(ConfigError, match=rf"\({field}\)"):
        ModelShape(**{**base, **override})


def test_unknown_model_names_the_closest_entry():
    with pytest.raises(UnknownNameError, match="did you mean 'llama3-70b'"):
        get_model("llama3-70")
