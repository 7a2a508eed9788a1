"""Kernels of layernorm_cuda's block-per-row rungs moving words.VEC values a global access (smem_block_reduce's
scalar one too): kept apart so the module stays within its size limit (not an op module itself)."""
from ..words import WORD, word_union


def smem_block_kernel(sig: str, vec: int) -> str:
    """smem_block_reduce's kernel (`sig`: its signature): scalar accesses, or VEC values a global access
    (words.VEC); THREADS and tree_sum come before it."""
    if vec == 1:
        return f"""// One block per row; the mean and the centred variance each take a pass over x.
extern "C" __global__ void __launch_bounds__(THREADS)
{sig} {{
    __shared__ float partial[THREADS];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;  scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) sum += to_float(xr[i]);
    const float mean = tree_sum(sum, partial) / D;
    float sq = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{ const float d = to_float(xr[i]) - mean; sq += d * d; }}
    const float rstd = rsqrtf(tree_sum(sq, partial) / D + eps);
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float((to_float(xr[i]) - mean) * rstd * to_float(weight[i]) + to_float(bias[i]));
}}"""
    word = WORD[vec]
    return f"""#define VEC {vec}  // adjacent values a thread moves as one {vec * 2}-byte {word}; D % VEC == 0
{word_union(vec)}

// One block per row; the mean and the centred variance each take a pass over x, a word at a time.
extern "C" __global__ void __launch_bounds__(THREADS)
{sig} {{
    __shared__ float partial[THREADS];
    const {word}* xr = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.x * D);
    const {word} *wr = reinterpret_cast<const {word}*>(weight), *br = reinterpret_cast<const {word}*>(bias);
    {word}* yr = reinterpret_cast<{word}*>(y + (size_t)blockIdx.x * D);
    const int words = D / VEC;
    float sum = 0.f;
    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += to_float(v.h[k]);
    }}
    const float mean = tree_sum(sum, partial) / D;
    float sq = 0.f;
    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ const float d = to_float(v.h[k]) - mean; sq += d * d; }}
    }}
    const float rstd = rsqrtf(tree_sum(sq, partial) / D + eps);
    for (int c = threadIdx.x; c < words; c += THREADS) {{
        Word v, w, b, o; v.u = xr[c]; w.u = wr[c]; b.u = br[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float((to_float(v.h[k]) - mean) * rstd * to_float(w.h[k]) + to_float(b.h[k]));
        yr[c] = o.u;
    }}
}}"""


def welford_words_kernel(sig: str, vec: int, last: str, scale: str) -> str:
    """welford_shuffle's kernel over VEC-value words (PyTorch's vectorized_layer_norm_kernel: a Welford update per
    element of each aligned vector); THREADS, WARPS, block_welford come before it."""
    word = WORD[vec]
    return f"""#define VEC {vec}  // adjacent values a thread moves as one {vec * 2}-byte {word}; D % VEC == 0
{word_union(vec)}

// One pass over x for the statistics (Welford per element of each word), a second for the output.
extern "C" __global__ void __launch_bounds__(THREADS)
{sig} {{
    __shared__ float stats[3 * WARPS];
    const {word}* xr = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.x * D);
    const {word} *wr = reinterpret_cast<const {word}*>(weight), *br = reinterpret_cast<const {word}*>(bias);
    {word}* yr = reinterpret_cast<{word}*>(y + (size_t)blockIdx.x * D);
    float n = 0.f, mean = 0.f, m2 = 0.f;
    for (int c = threadIdx.x; c < D / VEC; c += THREADS) {{
        Word v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{
            const float f = to_float(v.h[k]), delta = f - mean;
            n += 1.f;  mean += delta / n;  m2 += delta * (f - mean);
        }}
    }}
    const float2 mv = block_welford(n, mean, m2, stats);
    const float rstd = rsqrtf(mv.y + eps);
    for (int c = threadIdx.x; c < ({last}) / VEC; c += THREADS) {{
        Word v, w, b, o; v.u = xr[c]; w.u = wr[c]; b.u = br[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float((to_float(v.h[k]) - mv.x) * rstd{scale} + to_float(b.h[k]));
        yr[c] = o.u;
    }}
}}"""
