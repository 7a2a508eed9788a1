"""Block-wide reduction and scan device helpers shared by the CUDA training modules (not an op
module itself): `block_sum` (reduction_cuda, grad_clip_cuda) and `block_exclusive_scan` (with
`scan_helpers`, prefix_scan_cuda). Both need THREADS defined and the prelude's WARP_SIZE / warp_sum.
"""
from ..base import DTYPE_BYTES, Task

BARRIER = "\n    __syncthreads();"         # between the per-warp stores and warp 0's reads
NO_BARRIER = {"barrier": ""}              # missing_barrier drops it


def block_sum(barrier: str = BARRIER, compact: bool = False) -> str:
    """block_sum(v, warp_totals): shuffles inside each warp, then warp 0 adds the per-warp totals;
    valid in thread 0. `barrier` separates the per-warp stores from warp 0's reads (missing_barrier
    leaves it empty). compact: warp 0's finish as one statement (the grad_clip spelling)."""
    if compact:
        valid = "The result is valid in thread 0."
        finish = "    if (warp == 0) v = warp_sum(lane < THREADS / WARP_SIZE ? warp_totals[lane] : 0.f);\n"
    else:
        valid = "Valid in thread 0."
        finish = """    if (warp == 0) {
        v = lane < THREADS / WARP_SIZE ? warp_totals[lane] : 0.f;
        v = warp_sum(v);
    }
"""
    return f"""
// Sum over the block: shuffles inside each warp, then warp 0 adds the per-warp totals.
// {valid}
__device__ __forceinline__ float block_sum(float v, float* warp_totals) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_sum(v);
    if (lane == 0) warp_totals[warp] = v;{barrier}
{finish}    return v;
}}
"""


def block_exclusive_scan(task: Task, test: str = "lane >= o") -> str:
    """warp_inclusive_scan(v) (the dialect's shfl_up) and block_exclusive_scan(v, warp_sums, total),
    which also needs WARPS = THREADS / WARP_SIZE defined. off_by_one passes test="lane > o": the
    warp scan skips the lane exactly `o` below."""
    shfl = task.dialect.shfl_up.format(v="v", o="o")
    return f"""
__device__ __forceinline__ float warp_inclusive_scan(float v) {{
    const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
    for (int o = 1; o < WARP_SIZE; o <<= 1) {{
        const float up = {shfl};
        if ({test}) v += up;
    }}
    return v;
}}

// Exclusive prefix of every thread's value across the block; *total gets the block sum.
__device__ __forceinline__ float block_exclusive_scan(float v, float* warp_sums, float* total) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const float incl = warp_inclusive_scan(v);
    if (lane == WARP_SIZE - 1) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {{
        const float w = warp_inclusive_scan(lane < WARPS ? warp_sums[lane] : 0.f);
        if (lane < WARPS) warp_sums[lane] = w;
    }}
    __syncthreads();
    *total = warp_sums[WARPS - 1];
    const float before = warp == 0 ? 0.f : warp_sums[warp - 1];
    __syncthreads();                                // warp_sums is reused by the next tile
    return before + incl - v;
}}
"""


def scan_helpers(task: Task, test: str = "lane >= o") -> str:
    """WARPS, VEC and the Pack union of prefix_scan_cuda's vector rungs, then block_exclusive_scan."""
    vec = 16 // DTYPE_BYTES[task.dtype]
    return f"""
#define WARPS (THREADS / WARP_SIZE)
constexpr int VEC = {vec};                      // elements per 16-byte load; C is a multiple of VEC
union Pack {{ uint4 u; scalar_t h[VEC]; }};
{block_exclusive_scan(task, test)}"""
