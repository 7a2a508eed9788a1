"""Pieces shared by the norm modules (not an op module itself): the 16-byte Pack union and
the block-wide shuffle sum of the CUDA renders, and next_pow2 for the Triton row tiles.

>>> next_pow2(5120), next_pow2(4096)
(8192, 4096)
"""

# CUDA: the Pack union of the uint4 variants.
VEC_PACK = """
// 8 x 16-bit elements travel as one 16-byte uint4.
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };
"""

# CUDA: needs THREADS #defined first, and warp_sum from cuda_prelude().
BLOCK_SUM = """
// Sum over the block: shuffle within each warp, then the first warp sums the warp totals.
__device__ __forceinline__ float block_sum(float v, float* warp_totals) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_sum(v);
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / WARP_SIZE) ? warp_totals[lane] : 0.f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) warp_totals[0] = v;
    __syncthreads();
    return warp_totals[0];
}
"""


def next_pow2(n: int) -> int:
    """Smallest power of two >= n: the width of a Triton tile that holds a whole row."""
    return 1 << (n - 1).bit_length()
