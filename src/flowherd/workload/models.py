"""Model catalog: transformer shapes, parameter counts and FLOPs derived from the shape.

A `ModelShape` is all a workload model needs to know about an LLM: the parameter count (which sets
gradient and ZeRO traffic), the per-token FLOPs (which set compute time) and the activation shape
(which sets tensor-, pipeline-, expert- and context-parallel traffic).

Parameter count of one layer (weights only, norms included, rotary embeddings have none):

* attention, grouped-query: ``h * heads * d`` (Q) + ``2 * h * kv_heads * d`` (K, V) + ``heads * d * h`` (O);
  multi-head latent attention (DeepSeek-V2/V3, ``kv_lora_rank > 0``) uses its low-rank projections;
* MLP: ``2 * h * ffn`` (GELU, GPT) or ``3 * h * ffn`` (SwiGLU, Llama: gate, up, down);
* MoE layer: ``experts`` routed experts and ``shared_experts`` of ``moe_ffn_hidden`` each, plus the
  router ``h * experts``; a token passes ``top_k`` routed experts and all shared ones.

FLOPs follow Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC'21, Appendix (eq. 3): a forward pass costs 2 FLOPs per multiply-accumulate
of every weight matrix per token, plus ``4 * s * h`` per token per layer for the attention scores
and their product with V (no causal halving, as in the paper), plus ``2 * h * V`` per token for the
logits; backward costs twice the forward. For GPT shapes this reproduces the paper's
``72 * B * s * l * h^2 * (1 + s / (6h) + V / (12 l h))`` per iteration without recomputation.

>>> round(MODELS["llama3-70b"].num_params() / 1e9, 1)
70.6
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from flowherd.errors import ConfigError
from flowherd.registry import Registry


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """The shape of a decoder-only transformer.

    Attributes:
        name: Catalog key or a user label.
        layers: Transformer layers.
        hidden: Model width ``h``.
        heads: Attention (query) heads.
        kv_heads: Key/value heads (grouped-query attention); defaults to ``heads``.
        head_dim: Per-head width of Q and K (without MLA's rotary part); defaults to ``hidden // heads``.
        ffn_hidden: Width of the dense MLP.
        vocab: Vocabulary size ``V``.
        gated_mlp: SwiGLU-style MLP with three matrices (Llama); False for GELU with two (GPT).
        tied_embeddings: Output head shares the input embedding matrix.
        biases: Linear layers carry biases (GPT-3); counted in parameters, not in FLOPs.
        learned_positions: Length of a learned position-embedding table (0 for rotary).
        rotary: Rotary position embeddings on Q and K (their elementwise kernels); None: when there
            is no learned table. False for ALiBi models (MPT, BLOOM), whose bias lives in the
            attention kernel.
        experts: Routed experts per MoE layer (0: dense model).
        top_k: Routed experts per token.
        moe_ffn_hidden: Width of one expert; defaults to ``ffn_hidden``.
        shared_experts: Always-active experts per MoE layer (DeepSeek).
        first_dense_layers: Leading layers that stay dense (DeepSeek-V3: 3).
        moe_every: After those, every ``moe_every``-th layer is MoE (1: all; GShard/Switch: 2).
        q_lora_rank: MLA query compression rank (0: none).
        kv_lora_rank: MLA key/value compression rank (0: standard attention).
        rope_head_dim: MLA decoupled rotary dimension per head.
        v_head_dim: Per-head width of V; defaults to ``head_dim``.
        source: Citation of the shape.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    kv_heads: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True
    tied_embeddings: bool = False
    biases: bool = False
    learned_positions: int = 0
    rotary: bool | None = None
    experts: int = 0
    top_k: int = 0
    moe_ffn_hidden: int | None = None
    shared_experts: int = 0
    first_dense_layers: int = 0
    moe_every: int = 1
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        where = f"model {self.name!r}"
        for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab"):
            _check_int(getattr(self, f), f, where, minimum=1)
        for f in ("learned_positions", "experts", "top_k", "shared_experts", "first_dense_layers",
                  "q_lora_rank", "kv_lora_rank", "rope_head_dim"):
            _check_int(getattr(self, f), f, where, minimum=0)
        _check_int(self.moe_every, "moe_every", where, minimum=1)
        if self.rotary is None:
            object.__setattr__(self, "rotary", self.learned_positions == 0)
        if not isinstance(self.rotary, bool):
            raise ConfigError(f"{where}: rotary must be true or false, got {self.rotary!r} (rotary)")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _check_int(self.kv_heads, "kv_heads", where, minimum=1)
        if self.heads % self.kv_heads:
            raise ConfigError(
                f"{where}: kv_heads must divide heads={self.heads}, got {self.kv_heads} (kv_heads)"
            )
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ConfigError(
                    f"{where}: heads must divide hidden={self.hidden} when head_dim is not given, "
                    f"got {self.heads} (heads)"
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        _check_int(self.head_dim, "head_dim", where, minimum=1)
        if self.v_head_dim is None:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        _check_int(self.v_head_dim, "v_head_dim", where, minimum=1)
        if self.moe_ffn_hidden is None:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        _check_int(self.moe_ffn_hidden, "moe_ffn_hidden", where, minimum=1)
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise ConfigError(
                f"{where}: top_k must be in 1..experts={self.experts}, got {self.top_k} (top_k)"
            )
        if not self.experts and (self.top_k or self.shared_experts):
            raise ConfigError(f"{where}: top_k/shared_experts need experts > 0, got experts=0 (experts)")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, field: str = "model") -> ModelShape:
        """Build a shape from a mapping (e.g. parsed YAML); unknown keys get the closest match.

        >>> ModelShape.from_mapping({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4,
        ...                          "ffn_hidden": 256, "vocab": 1000}).head_dim
        16
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"a model shape must be a mapping, got {type(data).__name__} ({field})")
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown model field {key!r}{hint} ({field}.{key})")
        missing = [k for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab") if k not in data]
        if missing:
            raise ConfigError(f"model shape lacks required field(s) {', '.join(missing)} ({field})")
        values = dict(data)
        values.setdefault("name", "custom")
        return cls(**values)

    # ---- structure -------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def layer_is_moe(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has an MoE block instead of a dense MLP."""
        if not self.experts or layer < self.first_dense_layers:
            return False
        return (layer - self.first_dense_layers) % self.moe_every == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.layer_is_moe(i) for i in range(self.layers))

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    # ---- parameters ------------------------------------------------------------------------
    def attention_params(self) -> int:
        """Weights of one attention block (matrices only)."""
        h, n, d, dv = self.hidden, self.heads, self.head_dim, self.v_head_dim
        if self.kv_lora_rank:  # MLA, DeepSeek-V2 (arXiv:2405.04434) section 2.1
            r = self.rope_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * n * (d + r) if self.q_lora_rank else h * n * (d + r)
            kv = h * (self.kv_lora_rank + r) + self.kv_lora_rank * n * (d + dv)
            return q + kv + n * dv * h
        return h * n * d + h * self.kv_heads * (d + dv) + n * dv * h

    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn_hidden

    def expert_params(self) -> int:
        """Weights of one expert."""
        return self.mlp_matrices * self.hidden * self.moe_ffn_hidden

    def _bias_and_norm_params(self, moe: bool) -> int:
        h = self.hidden
        norms = 2 * h * (2 if self.biases else 1)
        if not self.biases:
            return norms
        n, d, dv, kv = self.heads, self.head_dim, self.v_head_dim, self.kv_heads
        attn_b = n * d + kv * (d + dv) + h
        mlp_b = 0 if moe else self.ffn_hidden * (self.mlp_matrices - 1) + h
        return norms + attn_b + mlp_b

    def layer_params(self, layer: int) -> int:
        """All weights of layer ``layer`` (all experts included)."""
        moe = self.layer_is_moe(layer)
        return self.layer_dense_params(layer) + (self.experts * self.expert_params() if moe else 0)

    def layer_dense_params(self, layer: int) -> int:
        """Weights of layer ``layer`` that are not routed experts (replicated across EP ranks)."""
        moe = self.layer_is_moe(layer)
        mlp = (self.shared_experts * self.expert_params() + self.hidden * self.experts
               if moe else self.dense_mlp_params())
        return self.attention_params() + mlp + self._bias_and_norm_params(moe)

    def layer_expert_params(self, layer: int) -> int:
        """Weights of the routed experts of layer ``layer`` (0 for a dense layer)."""
        return self.experts * self.expert_params() if self.layer_is_moe(layer) else 0

    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.learned_positions * self.hidden

    def head_params(self) -> int:
        """Output projection plus the final norm (the projection is absent when tied)."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.hidden

    def num_params(self) -> int:
        """Total parameter count."""
        return (sum(self.layer_params(i) for i in range(self.layers)) + self.embedding_params()
                + self.head_params())

    def num_active_params(self) -> int:
        """Parameters a token passes through (``top_k`` routed experts per MoE layer)."""
        inactive = sum((self.experts - self.top_k) * self.expert_params()
                       for i in range(self.layers) if self.layer_is_moe(i))
        return self.num_params() - inactive

    # ---- FLOPs (forward, per token) ----------------------------------------------------------
    def attention_matmul_flops(self) -> float:
        """Forward FLOPs per token of the attention projections of one layer."""
        return 2.0 * self.attention_params()

    def attention_score_flops(self, seq_len: int) -> float:
        """Forward FLOPs per token of ``Q K^T`` and ``softmax V`` at context ``seq_len`` (one layer)."""
        qk = self.head_dim + (self.rope_head_dim if self.kv_lora_rank else 0)
        return 2.0 * seq_len * self.heads * (qk + self.v_head_dim)

    def mlp_flops(self, layer: int) -> float:
        """Forward FLOPs per token of the MLP or MoE block of one layer (routed top-k + shared + router)."""
        if self.layer_is_moe(layer):
            active = (self.top_k + self.shared_experts) * self.expert_params() + self.hidden * self.experts
            return 2.0 * active
        return 2.0 * self.dense_mlp_params()

    def logit_flops(self) -> float:
        return 2.0 * self.hidden * self.vocab

    def forward_flops_per_token(self, seq_len: int) -> float:
        """Forward FLOPs per token of the whole model at context ``seq_len``."""
        per_layer = sum(self.attention_matmul_flops() + self.attention_score_flops(seq_len)
                        + self.mlp_flops(i) for i in range(self.layers))
        return per_layer + self.logit_flops()

    # ---- sizes -----------------------------------------------------------------------------
    def kv_cache_bytes_per_token(self, dtype_bytes: int = 2) -> float:
        """KV-cache bytes per token: ``2 * layers * kv_heads * head_dim * bytes`` (K and V).

        MLA caches the compressed latent and the rotary key instead:
        ``layers * (kv_lora_rank + rope_head_dim) * bytes`` (DeepSeek-V2, section 2.1.2).
        """
        if self.kv_lora_rank:
            return float(self.layers * (self.kv_lora_rank + self.rope_head_dim) * dtype_bytes)
        return float(2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes)


def _check_int(value: Any, field: str, where: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: {field} must be an integer >= {minimum}, got {value!r} ({field})")


MODELS: Registry[ModelShape] = Registry("model")

# Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1: n_layers 96, d_model 12288,
# n_heads 96, d_head 128, d_ff = 4 d_model, context 2048; GPT-2 BPE vocabulary of 50,257 tokens,
# learned positions, tied input/output embeddings, biases.
MODELS.add("gpt3-175b", ModelShape(
    name="gpt3-175b", layers=96, hidden=12288, heads=96, ffn_hidden=4 * 12288, vocab=50257,
    gated_mlp=False, tied_embeddings=True, biases=True, learned_positions=2048,
    source="Brown et al. 2020, Table 2.1",
))
# Meta Llama 3 config.json (meta-llama/Meta-Llama-3-8B, -70B) and "The Llama 3 Herd of Models",
# arXiv:2407.21783, Table 3: 8B 32 layers, 4096 model, 14336 FFN, 32 heads, 8 KV heads;
# 70B 80 / 8192 / 28672 / 64 / 8; 405B 126 / 16384 / 53248 / 128 / 8; vocabulary 128,256; SwiGLU,
# untied embeddings.
MODELS.add("llama3-8b", ModelShape(
    name="llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256,
    source="Llama 3 Herd of Models, Table 3; Meta-Llama-3-8B config.json",
))
MODELS.add("llama3-70b", ModelShape(
    name="llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256,
    source="Llama 3 Herd of Models, Table 3; Meta-Llama-3-70B config.json",
))
MODELS.add("llama3-405b", ModelShape(
    name="llama3-405b", layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248,
    vocab=128256, source="Llama 3 Herd of Models, Table 3; Llama-3.1-405B config.json",
))
# Jiang et al., "Mixtral of Experts", arXiv:2401.04088, Table 1: dim 4096, 32 layers, head_dim 128,
# 32 heads, 8 KV heads, hidden_dim 14336, vocab 32000, 8 experts, top-2 (46.7B total, 12.9B active).
MODELS.add("mixtral-8x7b", ModelShape(
    name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
    experts=8, top_k=2, source="Mixtral of Experts, Table 1",
))
# DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, section 4.2 and config.json:
# 61 layers, hidden 7168, 128 heads, MLA with q_lora_rank 1536, kv_lora_rank 512, qk_nope 128,
# qk_rope 64, v_head 128; first 3 layers dense (FFN 18432), then MoE: 1 shared + 256 routed experts
# of 2048, 8 active; vocabulary 129,280 (671B total, 37B active; the MTP module is left out).
MODELS.add("deepseek-v3", ModelShape(
    name="deepseek-v3", layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128,
    ffn_hidden=18432, vocab=129280, experts=256, top_k=8, moe_ffn_hidden=2048, shared_experts=1,
    first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512, rope_head_dim=64, v_head_dim=128,
    source="DeepSeek-V3 Technical Report, section 4.2; config.json",
))


def get_model(model: str | ModelShape | Mapping[str, Any]) -> ModelShape:
    """Return a catalog shape by name, a `ModelShape` as is, or build one from a mapping."""
    if isinstance(model, ModelShape):
        return model
    if isinstance(model, Mapping):
        return ModelShape.from_mapping(model)
    if not isinstance(model, str):
        raise ConfigError(f"model must be a catalog name, ModelShape or mapping, got {model!r} (model)")
    return MODELS[model.lower()]


__all__ = ["MODELS", "ModelShape", "get_model"]
