"""Helpers shared by the Triton flash-style attention modules (not an op module itself): for
sliding_window_attn, cross_attention and tree_attention, the shared memory Triton allocates for a
Q tile plus pipelined K/V buffers and the tensor-core efficiency of a query tile; for the split-KV
decoders (flash_decode, paged_decode), the weights of their combine kernel.
"""
from .._triton_smem import triton_mma_sync
from ..base import Task, triton_stage_buffers

# Fraction of the MMA rate kept while K/V tiles stream in, by num_stages (1 = not pipelined).
PIPELINE_OVERLAP = {1: 0.7, 2: 0.88, 3: 1.0, 4: 1.0}


def flash_smem(task: Task, bm: int, bn: int, d: int, e: int, stages: int, shared_kv: bool = False,
               warps: int = 4) -> int:
    """Triton's metadata.shared for a flash tile (16-byte-aligned pointers; checked on H100/A100/gfx942
    and by OutOfResources on an H200): Q + num_stages (sm_90) or num_stages - 1 (sm_8x) K/V buffers,
    plus the probabilities P where mma.sync stages them (staged_p). `shared_kv`: unpipelined
    (num_stages 1), K and V share one buffer. gfx942 stages no Q tile: unpipelined Q and K take
    turns in one LDS buffer; pipelined, the K/V buffers and P where mfma_p stages it."""
    kv_tile, q_tile = 2 * bn * d * e, bm * d * e
    cap = task.gpu.triton_max_stage_buffers
    if cap and stages >= 4:
        stages = cap   # gfx942's stream pipeliner buffers no deeper than num_stages=2 here (Triton 3.9, checked)
    if task.gpu.triton_q_in_registers:
        if stages == 1:
            return max(bm, bn) * d * e
        return kv_tile * triton_stage_buffers(task, stages, bm) + mfma_p(bm, bn, e, warps)
    kv = kv_tile // 2 if stages == 1 and shared_kv else kv_tile * triton_stage_buffers(task, stages, bm)
    return kv + q_tile + staged_p(task, bm, bn, d, e)


def mfma_p(bm: int, bn: int, e: int, warps: int) -> int:
    """gfx942's LDS for P in a pipelined flash loop: staged where Triton's 32-row MFMA tiles leave
    warps sharing rows, 32 <= bm < 32 x warps (MI300X metadata.shared: cross_attention and
    flash_prefill 128 rows at 8 warps, sliding_window 64 at 4; 128 at 4 warps and 16-row tiles not)."""
    return bm * bn * e if 32 <= bm < 32 * warps else 0


def staged_p(task: Task, bm: int, bn: int, d: int, e: int) -> int:
    """Shared memory the [bm, bn] probabilities P take on their way to PV's A operand: on the
    mma.sync targets (sm_8x, sm_120) Triton 3.9 converts them through shared memory, except for
    tiles of 8192+ scores at D <= 128 (128x64, 64x128, 128x128), where the allocator finds them a
    dead K buffer (A100 metadata.shared of cross_attention, sliding_window, chunked_prefill and
    tree_attention tiles); wgmma (sm_90) reads P from registers."""
    if not triton_mma_sync(task):
        return 0
    return 0 if bm * bn >= 8192 and d <= 128 else bm * bn * e


def wgmma_eff(task: Task, bm: int) -> float:
    """sm_90 issues wgmma only for tiles of >= 64 rows; smaller ones fall back to mma.sync."""
    return 1.0 if bm >= task.gpu.triton_full_stage_rows else task.gpu.triton_small_tile_scale


def mfma_eff(task: Task) -> float:
    """Triton's MFMA attention reaches less of MI300X's peak (the catalog's triton_dot_scale)."""
    return task.gpu.triton_dot_scale


def mma_eff(task: Task, bm: int, bn: int, warps: int) -> float:
    """Tensor-core efficiency of a [bm, bn] tile: reuse ~ bm*bn/(bm+bn), wgmma_eff, mfma_eff."""
    reuse = min(1.0, bm * bn / (bm + bn) / (128 * 64 / 192)) ** 0.35
    # fewer than 16 query rows per warp: warps split the N side too and the MMAs run half empty
    # (measured on H200: BLOCK_M 64 with 8 warps ~1.8x slower than with 4)
    rows = 1.0 if bm // warps >= 16 else 0.55
    return reuse * wgmma_eff(task, bm) * rows * mfma_eff(task)


def split_weights(combine: str) -> str:
    """Triton lines of a split-KV combine kernel (program per head): each split's running max m
    and sum l, its weight 2^(m - max m), and its fp32 partial output rows `combine` (acc)."""
    return f"""    bh = tl.program_id(0).to(tl.int64)
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.load(ml_ptr + (bh * NUM_SPLITS + offs_s) * 2)
    l = tl.load(ml_ptr + (bh * NUM_SPLITS + offs_s) * 2 + 1)
    w = tl.exp2(m - tl.max(m, 0))
    acc = tl.load(part_ptr + {combine}[:, None] * HEAD_DIM + offs_d[None, :])"""
