"""fused_qkv_rope_triton persistent_tma's shared memory (not an op module itself): Triton 3.9's metadata.shared of
the persistent loop with the rope epilogue, which the GEMM models' tile arithmetic does not give."""
from ..base import triton_stage_buffers


def persistent_smem(task, bm: int, bn: int, bk: int, stages: int, threads: int) -> int:
    """persistent_tma's metadata.shared (Triton 3.9, T=1000 HID=2048 H=16 KVH=4 D=128: scripts/roomA_compile_room.py
    --new-rung, exact on its builds over sm_80/86/89/90a/120, docs/roomA_compile_room_new_rung.txt, BLOCK_K 128 and 5
    stages among them): the K loop's x / w ring (triton_stage_buffers), the rope epilogue's layout conversion beside
    it, not in it (tl.range(flatten=True) issues the next tile's loads under this tile's epilogue, so the ring stays
    live), and the TMA copies' mbarriers, 8 bytes a buffer. The conversion: on wgmma (sm_90) the whole tile at 2 bytes
    a value a warpgroup (128 x 128: 32,768 at 4 warps, 65,536 at 8); on sm_120 a byte a value for every 8 warps, 16 KB
    at least (128 x 256: 32,768 at 8 warps, 16,384 at 4); on sm_8x 256 bytes a row, 128 a thread at most (128 x 128 and
    128 x 256: 16,384 at 4 warps, 32,768 at 8; 64-row tiles 16,384, where the plain store's epilogue_scratch has 4,096
    at 64 x 256). Fitted on the --new-rung builds and checked against every persistent_tma figure of the Triton smem
    corpus (its over-cap candidates on the menu shapes)."""
    buffers = triton_stage_buffers(task, stages, bm)
    ring = (bm + bn) * bk * 2 * buffers
    if "wgmma" in task.gpu.features:
        return ring + bm * bn * 2 * threads // 128 + 8 * buffers
    if "tma" in task.gpu.features:
        return ring + max(16384, bm * bn * threads // 256) + 8 * buffers
    return ring + min(bm * 256, threads * 128)
