"""Pieces shared by the CUDA sampling modules topk_cuda and top_p_cuda (not an op module itself).

Python side: the THREADS / CAP params, the L2 model of a row's re-reads (`row_l2_miss`), the
ballot spellings (`ballot_ops`) and `SamplingCuda`, the base class with the common class
attributes and the three rungs that render the op's `_select_kernel` in its smem / ballot /
float4 mode. Device side: WARPS and the order-preserving float keys (`KEY_HELPERS`),
block_sum / block_max (`BLOCK_REDUCE`), block_incl_scan (`block_incl_scan`) and the 11/11/10-bit
radix digit split (`DIGITS`).
"""
from ..base import OpModule, Param, Task

THREADS = Param("threads", (128, 256, 512, 1024), 512)
CAP = Param("cap", (1024, 2048, 4096), 2048)


def row_l2_miss(task: Task, threads: int) -> float:
    """Fraction of a row re-read that misses L2: re-reads hit while the resident blocks' rows fit."""
    b, v, gpu = task["B"], task["V"], task.gpu
    resident = min(b, gpu.sms * max(1, gpu.max_threads_per_sm // threads // 2))
    return min(1.0, resident * v * 4 / (gpu.l2_mb * 1e6))


def ballot_ops(task: Task) -> tuple:
    """(ballot of `flag`, popcount, mask of the lanes below `lane`) in HIP (64-bit) or CUDA spelling."""
    if task.is_hip:
        return "__ballot(flag)", "__popcll", "((1ull << lane) - 1ull)"
    return "__ballot_sync(0xffffffffu, flag)", "__popc", "((1u << lane) - 1u)"


class SamplingCuda(OpModule):
    """Base of the CUDA sampling modules; a subclass defines _select_kernel(p, task, bug, mode)."""
    family = "sampling"
    dtypes = ("fp32",)
    vendors = ("nvidia", "amd")

    def _select_kernel(self, p, task, bug, mode: str) -> str:
        raise NotImplementedError

    def _cdf_pick(self, p, task, bug):
        return self._select_kernel(p, task, bug, "smem")

    def _warp_ballot_scan(self, p, task, bug):
        return self._select_kernel(p, task, bug, "ballot")

    def _vectorized_float4(self, p, task, bug):
        return self._select_kernel(p, task, bug, "float4")


# CUDA: needs THREADS defined.
KEY_HELPERS = """#define WARPS (THREADS / WARP_SIZE)

// Order-preserving float <-> uint32 key: larger float, larger key (negatives bit-flipped).
__device__ __forceinline__ uint32_t key_of(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float float_of_key(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
"""

# CUDA: every thread gets the result; needs WARPS and the cuda_prelude's warp_sum / warp_max.
BLOCK_REDUCE = """__device__ __forceinline__ float block_sum(float v, float* slots) {
    v = warp_sum(v);
    if (threadIdx.x % WARP_SIZE == 0) slots[threadIdx.x / WARP_SIZE] = v;
    __syncthreads();
    float r = 0.f;
    for (int w = 0; w < WARPS; ++w) r += slots[w];
    __syncthreads();
    return r;
}
__device__ __forceinline__ float block_max(float v, float* slots) {
    v = warp_max(v);
    if (threadIdx.x % WARP_SIZE == 0) slots[threadIdx.x / WARP_SIZE] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int w = 0; w < WARPS; ++w) r = fmaxf(r, slots[w]);
    __syncthreads();
    return r;
}
"""

DIGITS = "const int SHIFT[3] = {21, 10, 0}, NBINS[3] = {2048, 2048, 1024};   // 11 + 11 + 10 key bits"


def block_incl_scan(task: Task, warp: bool) -> str:
    """CUDA block_incl_scan<T>(v, buf, total): Hillis-Steele in shared memory (buf[THREADS]), or with
    `warp` shuffle scans inside each warp and the warp totals through shared memory (buf[WARPS])."""
    if not warp:
        return """
// Block-wide inclusive scan in shared memory (Hillis-Steele): log2(THREADS) steps, 2 barriers each.
template <typename T>
__device__ __forceinline__ T block_incl_scan(T v, T* buf, T* total) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int o = 1; o < THREADS; o <<= 1) {
        const T add = threadIdx.x >= o ? buf[threadIdx.x - o] : T(0);
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    const T r = buf[threadIdx.x];
    *total = buf[THREADS - 1];
    __syncthreads();
    return r;
}
"""
    up = "__shfl_up(v, o)" if task.is_hip else "__shfl_up_sync(0xffffffffu, v, o)"
    return f"""
// Block-wide inclusive scan: shuffle scan inside each warp, warp totals through shared memory.
template <typename T>
__device__ __forceinline__ T block_incl_scan(T v, T* warp_tot, T* total) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
#pragma unroll
    for (int o = 1; o < WARP_SIZE; o <<= 1) {{
        const T n = {up};
        if (lane >= o) v += n;
    }}
    if (lane == WARP_SIZE - 1) warp_tot[warp] = v;
    __syncthreads();
    T off = T(0), all = T(0);
    for (int w = 0; w < WARPS; ++w) {{ const T s = warp_tot[w]; off += w < warp ? s : T(0); all += s; }}
    __syncthreads();
    *total = all;
    return v + off;
}}
"""
