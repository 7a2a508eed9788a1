"""The fused kernel of add_rmsnorm_cuda's block-per-row rungs moving words.VEC values a global access: kept
apart so the module stays within its size limit (not an op module itself)."""
from ..words import WORD, word_union


def fused_words(sig: str, threads: int, vec: int, helpers: str, reduce: str, smem: str, last: str, scale: str) -> str:
    """The fused add + RMSNorm kernel (`sig`: its signature) over VEC-value words: `reduce` the block-wide sum
    of sum_sq (`helpers` define it), `smem` its shared memory; the host wrapper follows it."""
    word = WORD[vec]
    return f"""
#define THREADS {threads}
#define VEC {vec}  // adjacent values a thread moves as one {vec * 2}-byte {word}; D % VEC == 0
{word_union(vec)}
{helpers}
// One block per row: add and store the residual a word at a time, reduce, then re-read the
// residual (each thread re-reads only the words it wrote, so no barrier is needed) to normalise.
extern "C" __global__ void __launch_bounds__(THREADS)
{sig} {{
    {smem}
    const {word}* xr = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.x * D);
    {word}* r = reinterpret_cast<{word}*>(residual + (size_t)blockIdx.x * D);
    const {word}* wr = reinterpret_cast<const {word}*>(weight);
    {word}* yr = reinterpret_cast<{word}*>(y + (size_t)blockIdx.x * D);
    float sum_sq = 0.f;
    for (int c = threadIdx.x; c < D / VEC; c += THREADS) {{
        Word a, b, h; a.u = xr[c]; b.u = r[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{
            h.h[k] = from_float(to_float(a.h[k]) + to_float(b.h[k]));
            const float f = to_float(h.h[k]);
            sum_sq += f * f;
        }}
        r[c] = h.u;
    }}
    const float inv_rms = rsqrtf({reduce} / D + eps);
    for (int c = threadIdx.x; c < ({last}) / VEC; c += THREADS) {{
        Word h, w, o; h.u = r[c]; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(h.h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
"""
