"""The kernel of fp8_quant_cuda's fused_smem_block rung moving words.VEC values a global access: kept apart so
the module stays within its size limit (not an op module itself). A thread loads VEC adjacent 16-bit inputs as
one word and stores their VEC fp8 codes as one VEC-byte word (2: unsigned short, 4: uint32_t)."""
import math

from ..over_read import past_row
from ..unroll import pragma
from ..words import WORD, word_union

CODE_WORD = {2: "unsigned short", 4: "uint32_t"}     # the word of VEC fp8 codes
# the hardware conversion of the register-cached rungs (ptx_cvt_e4m3x2, persistent_prefetch)
CVT_E4M3X2 = """// Two floats -> two e4m3 codes in one instruction (sm_89+); the first source fills the high byte.
__device__ __forceinline__ unsigned short fp8x2_from_float2(float lo, float hi) {
    unsigned short packed;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
    return packed;
}
"""


def block_scale(barrier: str) -> str:
    """Both fused_smem_block kernels' tree max of the block's `amax` in shared memory and the row's scale
    (`barrier`: the bug slot after each halving step)."""
    return f"""    red[threadIdx.x] = amax;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);{barrier}
    }}
    const float scale = fmaxf(red[0] / FP8_MAX, MIN_SCALE);
    if (threadIdx.x == 0) scales[blockIdx.x] = scale;"""


def fp8_words_kernel(p, vec: int, barrier: str, last: str) -> str:
    """fused_smem_block's kernel over VEC-value words (`barrier`, `last`: its bug slots; the output loop covers
    ({last}) / VEC words, so "D - 1" drops the row's last word); the host wrapper follows it."""
    word, code = WORD[vec], CODE_WORD[vec]
    return f"""#define THREADS {p['threads']}
#define VEC {vec}  // adjacent values a thread loads as one {vec * 2}-byte {word}, stores as one {vec}-byte word; D % VEC == 0
{word_union(vec)}
union Codes {{ {code} u; uint8_t b[VEC]; }};

// One block per token: strided absmax over VEC-value words, tree reduction in shared memory,
// then a second pass over the (now L1/L2-resident) row converts a word at a time.
extern "C" __global__ void __launch_bounds__(THREADS)
fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scales, int T, int D) {{
    __shared__ float red[THREADS];
    const {word}* xr = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.x * D);
    {code}* qr = reinterpret_cast<{code}*>(q + (size_t)blockIdx.x * D);
    const int words = D / VEC;
    float amax = 0.f;
{pragma(p)}    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) amax = fmaxf(amax, fabsf(to_float(v.h[k])));
    }}
{block_scale(barrier)}
{pragma(p)}    for (int c = threadIdx.x; c < ({last}) / VEC; c += THREADS) {{
        Word v; v.u = xr[c];
        Codes o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.b[k] = fp8_from_float(to_float(v.h[k]) / scale);
        qr[c] = o.u;
    }}
}}"""


# missing_barrier: one block (T = 1) can win the race for the amax slots (an H100 passed register_cached 3 of 3 runs,
# fused_smem_block 1 of 3: labels j1/j2, measurements/h100_label_device.json); from T = 32 every run failed
MANY_BLOCKS = (("missing_barrier", lambda t, p: t["T"] > 1),)


def over_read_moves_a_scale(task, p) -> bool:
    """warp_shuffle_vectorized's no_bounds_check runs the absmax loop one pass of THREADS chunks too far: row r also
    takes the max over the m elements past it (the next row's first m). Its scale moves only where those hold a larger
    |x| than its own D: P = m / (D + m) a row (x randn). Row T - 1 reads past x, where what lies there decides (the
    H100 passed all 12 runs at T 1 D 4096, labels n1). Offered where the T - 1 in-bounds rows all keep their scale
    w.p. <= 1e-6."""
    d, past = task["D"], past_row(task["D"], p["threads"])
    return task["T"] >= 2 and (task["T"] - 1) * math.log1p(past / d) >= -math.log(1e-6)
