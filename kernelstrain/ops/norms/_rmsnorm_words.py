"""The kernel of rmsnorm_cuda's block-per-row rungs moving words.VEC values a global access: kept apart so
the module stays within its size limit (not an op module itself)."""
from ..unroll import pragma
from ..words import WORD, word_union


def rms_words_kernel(p, vec: int, init: str, scale: str, helpers: str, decl: str, reduce: str) -> str:
    """The rung's kernel over VEC-value words: `decl` its shared memory, `reduce` the statements that turn
    each thread's sum_sq into inv_rms (`helpers` they call come first); the host wrapper follows it."""
    word = WORD[vec]
    return f"""
#define THREADS {p['threads']}
#define VEC {vec}  // adjacent values a thread loads as one {vec * 2}-byte {word}; D % VEC == 0
{word_union(vec)}
{helpers}
extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps) {{
    {decl}
    const {word}* xr = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.x * D);
    const {word}* wr = reinterpret_cast<const {word}*>(weight);
    {word}* yr = reinterpret_cast<{word}*>(y + (size_t)blockIdx.x * D);
    const int words = D / VEC;
    float sum_sq = {init};
{pragma(p)}    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ float f = to_float(v.h[k]); sum_sq += f * f; }}
    }}
    {reduce}
{pragma(p)}    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v, w, o; v.u = xr[c]; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(v.h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
"""
