"""fp8_quant_cuda's persistent_prefetch rung (ops/persistent_rows.py): ptx_cvt_e4m3x2's register-cached
kernel on a persistent grid, the next row group's row loaded while this one's absmax is reduced."""
from .. import persistent_rows
from ._fp8_words import CVT_E4M3X2
from .fp8_quant_spec import ENTRY

PACK = """// 8 x 16-bit inputs per uint4 load; their 8 fp8 codes leave as one 8-byte uint2 store.
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };
union Codes { uint2 u; uint8_t b[VEC]; unsigned short p[VEC / 2]; };
"""


def render(p, task, guard="c < chunks", div="scale", barrier="\n        __syncthreads();"):
    return f"""{persistent_rows.head(p, task)}
{PACK}{CVT_E4M3X2}{persistent_rows.LOAD_ROW}
// BLOCKS_PER_SM CTAs an SM stride over the tokens. Each thread loads its chunks of the next
// group's token before it reduces this one's absmax: those loads are in flight during the
// reduction and the conversion, so only a CTA's first token waits on DRAM.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scales, int T, int D) {{
    // two sets of warp maxima, used in turn: a token's are read before the next token's barrier,
    // so the token after that may write them again with one barrier a token
    __shared__ float warp_slots[2][ROWS_PER_BLOCK][THREADS / WARP_SIZE];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int chunks = D / VEC, stride = gridDim.x * ROWS_PER_BLOCK;
    Pack cache[CHUNKS_PER_THREAD], next[CHUNKS_PER_THREAD];
    load_row(cache, x, blockIdx.x * ROWS_PER_BLOCK + sub, T, D, tid);
    int parity = 0;
    for (int group = blockIdx.x * ROWS_PER_BLOCK; group < T; group += stride, parity ^= 1) {{
        const int row = group + sub;
        load_row(next, x, row + stride, T, D, tid);
        float amax = 0.f;
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j)
#pragma unroll
            for (int k = 0; k < VEC; ++k) amax = fmaxf(amax, fabsf(to_float(cache[j].h[k])));
        amax = warp_max(amax);
        if (tid % WARP_SIZE == 0) warp_slots[parity][sub][tid / WARP_SIZE] = amax;{barrier}
#pragma unroll
        for (int v = 0; v < THREADS / WARP_SIZE; ++v) amax = fmaxf(amax, warp_slots[parity][sub][v]);
        const float scale = fmaxf(amax / FP8_MAX, MIN_SCALE);
        if (row < T) {{
            if (tid == 0) scales[row] = scale;
            const float div = {div};
            uint2* qr = reinterpret_cast<uint2*>(q + (size_t)row * D);
#pragma unroll
            for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
                const int c = tid + j * THREADS;
                if (!({guard})) continue;
                Codes o;
#pragma unroll
                for (int k = 0; k < VEC; k += 2)
                    o.p[k / 2] = fp8x2_from_float2(to_float(cache[j].h[k]) / div, to_float(cache[j].h[k + 1]) / div);
                qr[c] = o.u;
            }}
        }}
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j) cache[j] = next[j];
    }}
}}
{persistent_rows.host(ENTRY, task, "fp8_quant_kernel")}"""


TITLE = "persistent grid over the tokens, next token's loads in flight during this one's absmax"
