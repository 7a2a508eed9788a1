"""What Triton (3.9) puts in shared memory beyond a loop's operand buffers, as its compiler
reports it in metadata.shared (scripts/smem_audit.py; tests/test_limits_models.py): facts shared
by the Triton op modules' launch models, not an op module itself."""
from .base import Task, triton_stage_buffers


def triton_mma_sync(task: Task) -> bool:
    """Whether Triton's dots run on mma.sync here (sm_8x, sm_120): NVIDIA tensor cores, no wgmma.

    >>> from kernelstrain.gpus import GPUS
    >>> [triton_mma_sync(Task(None, GPUS[g], "fp16", ())) for g in ("A100", "RTX5090", "H100", "MI300X")]
    [True, True, False, False]
    """
    return "mma" in task.gpu.features and "wgmma" not in task.gpu.features


def epilogue_scratch(bm: int, bn: int, e: int, threads: int) -> int:
    """Scratch of an epilogue's layout conversion (mma accumulator -> the store's blocked layout) on
    mma.sync: Triton converts the tile in rounds of bm/2 elements a thread (rows of 128 columns),
    16 a thread for 256-wide tiles (a warp's store row spans the whole tile). A100: 128x128 at 4
    warps +16 KB, 128x256 +4 KB; exact on 42 of persistent_tma's 48 configs, 64x256 at 8 warps 8 KB low.
    Never more than the tile itself: where the threads outnumber twice the tile's columns (8 warps on a
    64-wide tile) the rounds cover it in one (Triton 3.9, fused_qkv_rope fused_epilogue 64 x 64 at 8 warps,
    A100: 8 KB, where the per-thread rounds said 16).

    >>> epilogue_scratch(128, 128, 2, 128), epilogue_scratch(128, 256, 2, 128), epilogue_scratch(64, 64, 2, 256)
    (16384, 4096, 8192)
    """
    return min(threads * (bm * e // 2 if bn <= 128 else 16 * e), bm * bn * e)


def dot_loop_smem(task: Task, bm: int, bn: int, bk: int, e: int, stages: int, persistent_threads: int = 0,
                  gathered: bool = False, warps: int = 4) -> int:
    """Shared memory of a tl.dot K loop: triton_stage_buffers of the A and B tiles. Unpipelined,
    the two tiles take turns in one buffer on gfx942, and on mma.sync too where A is gathered
    (grouped_gemm: 128x128x64 A100 18 KB, MI300X 16 KB; wgmma 32 KB). A persistent loop (its
    `persistent_threads`) on NVIDIA without TMA keeps its epilogue_scratch live beside them."""
    features = task.gpu.features
    if stages == 1 and ("mfma" in features or gathered and triton_mma_sync(task)):
        return max(bm, bn) * bk * e
    smem = (bm + bn) * bk * e * triton_stage_buffers(task, stages, bm, warps)
    if persistent_threads and "tma" not in features and "mfma" not in features:
        smem += epilogue_scratch(bm, bn, e, persistent_threads)
    return smem


def flash_bwd_smem(task: Task, kind: str, big: int, small: int, d: int, e: int, stages: int) -> int:
    """flash_attn_bwd_triton's metadata.shared: the big block's two resident tiles (registers on
    gfx942), the streamed pair of tiles (num_stages buffers with wgmma, one fewer otherwise), and
    what the products stage: a [big, small] P^T / dS^T tile on NVIDIA (the tuned K-major kernel
    keeps it in registers for 128-row blocks and stages lse and delta, two fp32 vectors x two
    buffers; gfx942 only there a [big, small] tile); mma.sync's atomic dQ product stages K once
    more in its operand layout (A10 tuned 64 x 64 x 3 stages 105 KB, 128 x 32 97 KB)."""
    gpu = task.gpu
    amd, wgmma = "mfma" in gpu.features, "wgmma" in gpu.features
    streamed = 2 * small * d * e * max(1, stages - (0 if wgmma else 1))
    smem = (0 if gpu.triton_q_in_registers else 2 * big * d * e) + streamed
    if kind == "tuned":
        return smem + (big * small * e if amd else 16 * small + (big < 128) * big * small * e)
    return smem if amd else smem + big * small * e + (small * d * e if kind != "split" and not wgmma else 0)


def mla_smem(task: Task, bh: int, bn: int, e: int, stages: int, warps: int, dim: int, latent: int) -> int:
    """mla_decode_triton's metadata.shared for BLOCK_H heads x BLOCK_N keys of `dim` (latent + rope)
    columns. Pipelined: q + num_stages - 1 key tiles in flight (+1 with wgmma); gfx942 keeps q in
    registers. Unpipelined, K and V share the tile: with wgmma (64+ heads on sm_90) q + the tile;
    mma.sync keeps only its `latent` V columns beside q, plus a conversion scratch of 128 bytes a
    warp a key, at least 32 KB, which also bounds its shallow pipelines from below (A100 / A10: 16 /
    32 heads x 32 / 64 keys x 4 / 8 warps exact unpipelined and at 3 stages, within 1 KB at 2);
    gfx942 the V columns alone."""
    gpu, tile = task.gpu, bn * dim * e
    wgmma = bh >= gpu.triton_full_stage_rows > 0
    v_side = bn * latent * e + max(32768, 128 * warps * bn)   # mma.sync's V columns and conversion scratch
    if gpu.triton_q_in_registers:
        return tile * (stages - 1) if stages > 1 else bn * latent * e
    if stages > 1:
        piped = bh * dim * e + tile * (stages - 1 + wgmma) + 1024
        return piped if wgmma else max(piped, v_side)
    return bh * dim * e + (tile if wgmma else v_side)
