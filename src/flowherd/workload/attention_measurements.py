"""Measured attention-kernel speeds the compute model is fitted to (`flowherd.workload.compute`).

Kept apart from the model so the tables and their sources read in one place; the fits, the
constants and the kernel selection are described in `flowherd.workload.compute`'s docstring.
"""

from __future__ import annotations

__all__ = ["FA2_MEASURED_TFLOPS", "FA2_SEQ_LENS", "FA3_MEASURED_TFLOPS", "TRITON_BWD_SLOWDOWN",
           "TRITON_FWD_SLOWDOWN", "causal_backward_ratio"]

# FlashAttention-2 forward + backward, causal, head dim 128, TFLOP/s at 512, 1k, 2k, 4k, 8k, 16k tokens
# (Dao, ICLR 2024, figures 4d (A100 80GB SXM4) and 7d (H100 80GB SXM5); FLOPs as its benchmark counts
# them, forward 4 b s^2 a d / 2 with the causal mask, backward 2.5x the forward): what the FA2
# constants of `KERNEL_MODELS` were fitted to (tests/workload/test_compute.py reproduces them)
FA2_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
FA2_MEASURED_TFLOPS = {"a100": (99, 133, 155, 173, 182, 189), "h100": (163, 221, 265, 294, 308, 328)}

# FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608), H100 80GB SXM5, BF16, head dim 128, at
# FA2_SEQ_LENS: figure 5 forward (causal panel) and figure 6 backward (no mask), TFLOP/s as labelled on
# the bars (FLOPs counted as FlashAttention-2's benchmark: backward 2.5x forward); kernel -> (forward,
# backward), "flash2" its FlashAttention-2 bars. Transcribed from the figures (subtext.edge.nugit.net
# renderings 4ec66909... and f60142e2...).
FA3_MEASURED_TFLOPS = {"flash": ((292, 423, 521, 579, 602, 616), (316, 424, 501, 542, 559, 561)),
                       "cudnn": ((315, 410, 484, 518, 529, 539), (305, 408, 465, 499, 518, 516)),
                       "flash2": ((191, 260, 298, 319, 333, 335), (214, 260, 291, 310, 318, 322))}


def causal_backward_ratio() -> tuple[float, ...]:
    """FlashAttention-2's causal over unmasked backward speed on H100 at `FA2_SEQ_LENS`
    (`flowherd.workload.compute` docstring): its causal backward from its figure 7d forward +
    backward and FlashAttention-3's figure 5 causal forward, over figure 6's unmasked backward;
    at most 1."""
    fwd, bwd = FA3_MEASURED_TFLOPS["flash2"]
    return tuple(min(1.0, 2.5 / (3.5 / c - 1.0 / f) / b)
                 for c, f, b in zip(FA2_MEASURED_TFLOPS["h100"], fwd, bwd, strict=True))


# FlashAttention in Triton (the kernel of MosaicML's MPT ``attn_impl: triton``) against
# FlashAttention-2: "around 1.3-1.5x faster than FlashAttention in Triton in the forward pass and
# around 2x faster in the backward pass" (Dao 2023, arXiv:2307.08691, section 4.1)
TRITON_FWD_SLOWDOWN = 1.4
TRITON_BWD_SLOWDOWN = 2.0
