"""Context-parallel attention as Transformer Engine runs it: the per-step merges of the ring.

Megatron-Core's context parallelism is Transformer Engine's ``AttnFuncWithCPAndKVP2P``
(``transformer_engine/pytorch/attention.py``, NVIDIA/TransformerEngine commit 001b736048c5, the
``cp_comm_type="p2p"`` default). Each sequence is cut into ``2 cp`` chunks and rank ``r`` holds
chunks ``r`` and ``2 cp - 1 - r`` (load balance under the causal mask), so a rank holds
``t = b s / cp`` query and key/value rows. The K/V chunks travel around the ring in ``cp`` steps;
step ``i`` runs one flash-attention kernel:

* ``i = 0``: the local queries against the local keys, causal;
* ``0 < i <= r``: all local queries against the first half of the received keys, unmasked;
* ``i > r``: the second half of the local queries against all received keys, unmasked.

Every step's partial output is merged into the result by its log-sum-exp,
``flash_attn_fwd_out_correction`` (``out.add_(out_per_step * exp(lse_per_step - lse))``: the step's
output read, the result read and written, one fused kernel per step, in the activation dtype), and
in the backward each step's kernel writes partial ``dq`` and ``dk, dv`` that are added into the
gradients the same way (``dq.add_``, ``dkv.add_``: read, read, write). The FLOPs are the model's
(equal work per step: ``2 c^2`` score pairs with ``c = s / (2 cp)``), so only these merges and
the ``cp - 1`` extra kernel launches are added to the unsplit attention.

The ranks move in lock-step (each step waits for the ring's K/V), so the slowest rank sets the
pace: ``r = cp - 1``, whose every step covers all ``t`` query rows and whose key/value rows are
``t`` at step 0 and ``t / 2`` after. A deliberate shortcut: the step kernels run at the unsplit
kernel's rate. The causal step is shorter (``s / cp`` tokens: slower, FlashAttention-3 figure 5
causal panel, 518 vs 529 TFLOP/s for cuDNN at 4k vs 8k) and the other steps are unmasked (faster
per FLOP: the non-causal panel, cuDNN 609-617 vs causal 484-518 TFLOP/s at 2k-4k); the forward of
the split would run ~4% faster, and no backward figure separates the masks.
"""

from __future__ import annotations

__all__ = ["merge_elements"]


def merge_elements(*, tokens: float, cp: int, heads: float, kv_heads: float, qk_dim: int,
                   v_dim: int) -> tuple[float, float, int, int]:
    """Elements the ring's merges touch on the slowest rank, per layer and micro-batch (module
    docstring): ``(forward, backward, forward kernels, backward kernels)``, each element read twice
    and written once; ``tokens`` the rank's rows, ``heads`` / ``kv_heads`` its (``1 / tp``) heads.
    Zeros without context parallelism."""
    if cp < 2:
        return 0.0, 0.0, 0, 0
    fwd = cp * tokens * heads * v_dim  # out corrections, every step over all query rows
    kv_rows = tokens + (cp - 1) * tokens / 2
    bwd = cp * tokens * heads * qk_dim + kv_rows * kv_heads * (qk_dim + v_dim)  # dq and dk, dv adds
    return fwd, bwd, cp, 2 * cp
