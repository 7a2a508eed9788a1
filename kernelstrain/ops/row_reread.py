"""The second pass of a two-pass block-per-row CUDA kernel (rmsnorm_cuda's and add_rmsnorm_cuda's block rungs,
fp8_quant_cuda's fused_smem_block / warp_shuffle_vectorized): it re-reads the row the first pass brought in, which the SM's L1 still holds while the rows of its resident blocks fit
there, and which comes back from L2 / DRAM once they do not (LRU over a working set past the cache: nearly every
line is gone by its second use). So the re-read's cost turns on the threads a row, through the blocks an SM holds,
not on the rung alone.

The working set: the rows of the blocks an SM runs at once plus the row both passes share (the weight); the L1 an
SM caches in is taken as its shared-memory capacity (GPU.smem_per_sm: 228 KiB of the H100's / H200's 256 KiB
unified array; these rungs use a few hundred bytes of shared memory); the miss share rises from 0 at that size to
1 at CLIFF past it (blocks run out of phase, so the LRU cliff is not a step).

Fitted on the stored rows (measurements/*.json, scripts/simS_pool.py --dump rmsnorm_cuda / add_rmsnorm_cuda), where
the old model timed a rung the same at every thread count:
- rmsnorm_cuda vectorized_uint4, H100 bf16 T=16384 D=8192 (h100_gpucheck_s98181): 512 / 256 / 128 / 64 threads
  194.1 / 205.6 / 254.7 / 278.7 us (1.00 / 1.06 / 1.31 / 1.44x; working sets 4 / 8 / 16 / 32 rows of 16 KiB + the
  weight: 80, 144, 272, 528 KiB); the old model 1.00-1.02x throughout;
- rmsnorm_cuda vectorized_uint4 H200 fp16 T=8192 D=5120 (h200_gpucheck_s8484 / s6868): 64 threads (330 KiB)
  1.43x register_cached where 128-256 threads (170 / 90 KiB) ran 1.08x (h200_gpucheck_s3131);
- add_rmsnorm_cuda vectorized_uint4 (the residual h written by pass 1 and re-read by the thread that wrote it):
  1.00-1.04x register_cached at every shape with <= 256 KiB a working set on both cards (H100 T=16384 D=8192 fp16
  256-1024 threads 1.002-1.026x, s61717 / s62828 / s93131 / s98181 / s98282 / simS_s1; H200 s1717 / s6262 /
  s6868 / s8484 1.00-1.04x), where the old flat traffic 1.25 put it 1.07-1.23x; at 64 threads (H200 s1717
  T=8192 D=5120, 330 KiB) 1.165x;
- fp8_quant_cuda warp_shuffle_vectorized (absmax pass, then the convert pass re-reads x), H100 bf16: T=4096 D=4096
  64 threads 1.21x its 512-thread time (256 KiB an SM, s40404), T=16384 D=8192 128 threads 1.13x (s96969); the old
  model 0.99-1.02x.
The stored rows do not tell this L1 model from l2_reuse's (layernorm_cuda smem_block_reduce: the resident rows of
every SM against 0.8 of the L2, squared): both scale with resident rows x row bytes, at thresholds 1.33x apart
(228 KiB an SM here, 0.8 x 50 MB / 132 SMs = 303 KiB there), and score alike on them (pair order 0.930 / 0.928,
rmsnorm_cuda). simS's device plan s3 times the shapes where they part: T=8192 D=6144 at 128 threads (204 KiB an SM:
no miss here; 26 MB resident: 0.42 there) and D=2048 / D=4096 at 64 / 128 threads.
Each module's `extra` (the re-read's cost at a full miss, over the rung's fitted traffic) is fitted on its rows.
"""
from dataclasses import replace

from .occupancy import blocks_per_sm

CLIFF = 0.25        # the working set, over the L1's size, past which every re-read misses: 1 + CLIFF
EXPOSURE = 0.3      # exposed_reread: waves ** -EXPOSURE; rmsnorm_cuda's stored rows, pair order / within 0.8-1.25x
                    # (H100, H200) at 0.3 / 0.5 / 0.7: 0.927 / 0.921 / 0.913, 0.867-0.924 / 0.867-0.924 / 0.867-0.899


def miss_share(launch, task, row_bytes: int, shared_bytes: int) -> float:
    """The share of a second pass's re-read the SM's L1 no longer holds (NVIDIA; an AMD CU's 32 KiB vector L1 is
    not its LDS, and no stored row times one: 0, the rung's fitted traffic as it was)."""
    gpu = task.gpu
    if gpu.vendor != "nvidia":
        return 0.0
    resident = min(blocks_per_sm(launch, gpu), -(-launch.grid // gpu.sms))
    working = resident * row_bytes + shared_bytes
    return min(1.0, max(0.0, (working / gpu.smem_per_sm - 1) / CLIFF))


def reread(launch, task, row_bytes: int, shared_bytes: int, extra: float):
    """`launch` with its traffic raised by `extra` of itself where the re-read misses L1 (miss_share)."""
    return replace(launch, traffic=launch.traffic * (1 + extra * miss_share(launch, task, row_bytes, shared_bytes)))


def served_traffic(task, hit: float, fitted: float) -> float:
    """A rung's traffic where its re-read comes from L1: `hit` (the stored NVIDIA rows) on NVIDIA, its `fitted`
    figure elsewhere (no AMD row times it)."""
    return hit if task.gpu.vendor == "nvidia" else fitted


def exposed_reread(launch, task, row_bytes: int, shared_bytes: int):
    """`launch` (its traffic counting the re-read in full, as the rung was fitted) with the re-read in full where it
    misses L1 and, where L1 serves it, only as far as the blocks' second passes are exposed: waves ** -EXPOSURE of
    the grid (one wave: every block reaches its second pass together, nothing streams beside it; many waves: other
    blocks' first passes stream from DRAM while one re-reads from L1). rmsnorm_cuda vectorized_uint4's stored rows:
    where L1 holds the rows, 1.26-1.38x the device on bandwidth-bound grids (H100 bf16 T=16384 D=8192 512 threads
    194.1 us, modelled 1.38x; T=8192 D=5120 1.31-1.34x; H200 fp16 T=8192 D=5120 128-256 threads 1.26x) and
    0.88-1.09x on one- or two-wave grids (T=2048 D=2048, T=1, T=64), against 0.98-1.06x where the rows miss L1.
    layernorm_cuda vectorized_uint4 (the same two passes; x and the weight and bias shared): held out, H100 T=4096
    D=4096 modelled 1.22-1.25x in four seeds; H100 rows timed after this was applied to it (h100_simB_d1, no fit
    list): fp16 T=16384 D=8192 at 512 / 256 / 128 threads 195.9 / 250.5 / 270.9 us, modelled 267-268 for all three
    with the re-read in full, 209 / 217 / 259 with this; its four shapes' pair order 263 -> 268 of 296."""
    gpu = task.gpu
    if gpu.vendor != "nvidia":
        return launch
    miss = miss_share(launch, task, row_bytes, shared_bytes)
    waves = max(1.0, launch.grid / (gpu.sms * max(1, blocks_per_sm(launch, gpu))))
    return replace(launch, traffic=1 + (launch.traffic - 1) * (miss + (1 - miss) * waves ** -EXPOSURE))
