"""Whether any config of a rung's grid can fail a launch limit, found from the grid's corners (the engine's
limit scans, Episode._over_limit, ask it before asking the launch model of every config).

A config fails a limit scan's class (sim._launch_failure; the grid's slip knobs are 0) only where its launch
asks for more shared memory than the rung's cap (class smem), or for a block of more than 1024 threads or one
the SM cannot hold (class resources: blocks_per_sm 0, by its threads, its registers x threads or its shared
memory). In a launch model the shared memory and the threads of a block are non-decreasing in each of a rung's
own parameters, along the order its values are listed in (bigger tiles, more stages, warps, rows a block), and
the generic knobs (knobs.KNOBS) move neither (they change registers, traffic and the loop's issue). So the
grid's largest demand is that of its corner: each parameter at its last value, each knob at its first. MIXED
names the parameters of which that is not true (a Triton reduction's scratch shrinks as its tile grows past the
warps' layout, a pipelined loop keeps fewer stages than asked): each of their values makes a corner of its own.
No corner is needed for registers: ptxas fits a block's registers into the SM's file where the block declares
its size (sim.cap_registers), so a block of t threads holds at most min(REGS_PER_BLOCK, 255 t) registers on an
NVIDIA GPU and 512 t on an AMD one (the cap a lane), which bounds it by the corner's threads.

At 2,000 default episodes 826 of 848 whole-grid scans found nothing; a corner that fits proves it with a few
launches instead of hundreds to thousands. tests/test_grid_limits.py checks every rung's monotonicity on every
bundled profile's tasks of a sample and that no grid found clear has a config that fails.
"""
from __future__ import annotations

import itertools
import math

from . import knobs
from .sim import REGS_PER_BLOCK, smem_cap

MAX_THREADS = 1024        # threads a block may have on every GPU of the catalog (sim._launch_failure)
# {(module, rung): parameters} along whose values the rung's shared memory or threads fall somewhere (a Triton
# norm's or softmax's reduction scratch as BLOCK, warps or unroll change its layout; a pipelined attention's stages
# on the MI300X; a register-blocked GEMM's threads as TM grows): found over every task of the bundled profiles
# (scripts/grid_monotone.py, 2026-12-07; tests/test_grid_limits.py keeps it true)
MIXED = {
    ("add_rmsnorm_triton", "two_kernels"): ("BLOCK", "loop_unroll", "num_warps"),
    ("chunked_prefill_triton", "causal_block_skip"): ("BLOCK_N",),
    ("chunked_prefill_triton", "online_softmax"): ("BLOCK_N",),
    ("cross_attention_triton", "blocked_online_softmax"): ("BLOCK_N",),
    ("cross_attention_triton", "pipelined_tiles"): ("BLOCK_M", "num_stages"),
    ("cross_attention_triton", "split_kv"): ("num_stages",),
    ("cross_attention_triton", "tail_peel_exp2"): ("BLOCK_N",),
    ("cross_entropy_bwd_triton", "persistent_evict_first"): ("BLOCK", "programs_per_sm"),
    ("cross_entropy_fwd_triton", "chunked_two_pass"): ("BLOCK", "loop_unroll"),
    ("cross_entropy_fwd_triton", "online_softmax"): ("BLOCK", "loop_unroll"),
    ("flash_prefill_triton", "persistent"): ("BLOCK_M", "num_stages"),
    ("flash_prefill_triton", "pipelined"): ("BLOCK_M", "num_stages"),
    ("flash_prefill_triton", "tma_descriptors"): ("BLOCK_M",),
    ("fp8_quant_triton", "fused_row_loop"): ("BLOCK", "loop_unroll", "num_warps"),
    ("fused_qkv_rope_cuda", "register_blocked"): ("TM",),
    ("gemm_fp16_cuda", "register_blocked"): ("TM",),
    ("gemm_fp16_triton", "persistent_tma"): ("BLOCK_N",),
    ("gemm_splitk_cuda", "split_k_atomic"): ("TM",),
    ("gemm_splitk_cuda", "split_k_reduce"): ("TM",),
    ("gemm_splitk_cuda", "tiled"): ("TM",),
    ("layernorm_triton", "chunked_three_pass"): ("BLOCK", "loop_unroll", "num_warps"),
    ("layernorm_triton", "welford_chunked"): ("BLOCK", "loop_unroll", "num_warps"),
    ("mla_decode_triton", "exp2_tail_peel"): ("BLOCK_H",),
    ("mla_decode_triton", "head_block_tl_dot"): ("BLOCK_H",),
    ("mla_decode_triton", "pipelined_stages"): ("BLOCK_H", "num_stages"),
    ("mla_decode_triton", "split_kv"): ("BLOCK_H", "num_stages"),
    ("mla_decode_triton", "latent_halves"): ("BLOCK_H", "num_stages"),
    ("rmsnorm_triton", "chunked_two_pass"): ("BLOCK", "loop_unroll", "num_warps"),
    ("sliding_window_attn_triton", "persistent_tiles"): ("BLOCK_M", "num_stages"),
    ("sliding_window_attn_triton", "pipelined_tiles"): ("BLOCK_M", "num_stages"),
    ("softmax_triton", "chunked_three_pass"): ("BLOCK", "loop_unroll", "num_warps"),
    ("softmax_triton", "online_softmax"): ("BLOCK", "loop_unroll", "num_warps"),
    ("swiglu_fwd_triton", "row_program"): ("num_warps",),
    ("tree_attention_triton", "pipelined_stages"): ("num_stages",),
    ("tree_attention_triton", "split_kv"): ("num_stages",),
}
CLASSES = ("smem", "resources")

_PEAKS: dict = {}          # (module, rung tag, rung params, task) -> (shared memory, threads) of the grid's corners
PEAKS_MAX = 1 << 14        # rungs x tasks of a full run, each a pair of ints


def corners(module, variant) -> list[dict]:
    """The configs of `variant`'s grid (its slip knobs at 0: knobs.untuned) whose shared memory and threads
    bound every other's: each parameter at its last value, a knob at its first, a MIXED one at each of its."""
    mixed = MIXED.get((module.name, variant.tag), ())
    choices = [p.values if p.name in mixed
               else p.values[:1] if p.name in knobs.KNOBS else p.values[-1:] for p in variant.params]
    names = [p.name for p in variant.params]
    return [dict(zip(names, values)) for values in itertools.product(*choices)]


def demand(module, variant, params: dict, task) -> tuple[int, int]:
    """(shared memory bytes, threads) of one config's launch, the launch model asked without keeping it (a limit
    scan's, sim.scan_failure: the corner of a grid is seldom a candidate the episode asks again)."""
    launch = knobs.launch.uncached(module, variant, params, task)
    return launch.smem_bytes, launch.threads


def peak(module, variant, task) -> tuple[int, int] | None:
    """The most shared memory and threads any config of the grid asks for (their corners'), once a process;
    None where the corners are more than a quarter of the grid (MIXED parameters: the scan asks each config)."""
    key = (module.name, variant.tag, variant.params, task.module, task.gpu.name, task.dtype, task.shape)
    found = _PEAKS.get(key, False)
    if found is False:
        ends = corners(module, variant)
        if 4 * len(ends) > math.prod(len(p.values) for p in knobs.untuned(variant).params):
            found = None
        else:
            asked = [demand(module, variant, c, task) for c in ends]
            found = (max(s for s, _ in asked), max(t for _, t in asked))
        if len(_PEAKS) >= PEAKS_MAX:
            _PEAKS.clear()
        _PEAKS[key] = found
    return found


def registers_bound(gpu, threads: int) -> int:
    """The most registers a block of at most `threads` threads holds (ptxas's cap, sim.register_cap)."""
    if gpu.vendor == "amd":
        return 512 * threads
    return min(REGS_PER_BLOCK, 255 * threads)


def clear(module, variant, task, error_class: str, margin: float = 1.0) -> bool:
    """True where no config of `variant`'s grid fails at launch with `error_class` (smem or resources) on `task`
    (an smem failure: at `margin` times the cap or more, a scan's clear failure: Episode.is_clear), proven from
    the grid's peak demand; False where it may (the scan asks each config). A fused program's launch is a sum of
    kernels (no corner): never proven."""
    if error_class not in CLASSES or hasattr(module, "simulate"):
        return False
    found = peak(module, variant, task)
    if found is None:
        return False
    (smem, threads), gpu, cap = found, task.gpu, smem_cap(variant, module, task.gpu)
    if error_class == "smem":
        # a Triton config past the cap takes its compiler's own figure where the corpus holds one
        # (sim.built_launch), which may be more than the model's: there only a peak within the cap proves it
        return smem <= cap if module.impl == "triton" else smem < margin * cap
    # a config past the cap fails on shared memory first (not a resources failure): the rest ask at most the cap
    return (threads <= min(MAX_THREADS, gpu.max_threads_per_sm) and registers_bound(gpu, threads) <= gpu.regs_per_sm
            and min(smem, cap) <= gpu.smem_per_sm)


def unordered(module, variant, task) -> set:
    """The parameters of `variant` along whose values some config of its grid asks for less shared memory or
    fewer threads at the next value (a knob: for more or less): those `corners` must not take at one end (MIXED
    lists them; tests/test_grid_limits.py and scripts/grid_monotone.py ask it). Every config's launch is asked."""
    params = knobs.untuned(variant).params
    asked = {values: demand(module, variant, dict(zip([p.name for p in params], values)), task)
             for values in itertools.product(*(p.values for p in params))}
    found = set()
    for values, here in asked.items():
        for i, p in enumerate(params):
            at = p.values.index(values[i])
            if p.name in found or at + 1 == len(p.values):
                continue
            up = asked[values[:i] + (p.values[at + 1],) + values[i + 1:]]
            if up != here if p.name in knobs.KNOBS else (up[0] < here[0] or up[1] < here[1]):
                found.add(p.name)
    return found
