"""Pieces of the swa_decode_cuda renders (not an op module itself): the window's uint4 key-slot loop
over a contiguous cache, the split rungs' partial store, and the combine kernel with its host
function. The key-slot machinery itself (Pack, key_scores, online_update, merge_rows) is _paged_vec's.
"""
from ._paged_vec import load_q
from .swa_decode_spec import ENTRY


def window_slots(lo: str, hi: str, scale: str) -> str:
    """Keys [lo, hi) of one head spread over ROWS key slots of LANES_PER_KEY lanes, U keys a slot per
    step; each slot's running (acc, m, l) lands in a shared merge row."""
    return f"""    __shared__ float merge[ROWS * STRIDE];
    const int slot = threadIdx.x / LANES_PER_KEY, chunk = threadIdx.x % LANES_PER_KEY;
    const uint4* kb = reinterpret_cast<const uint4*>(k_cache + kv_off(b, kvh, S)) + chunk;
    const uint4* vb = reinterpret_cast<const uint4*>(v_cache + kv_off(b, kvh, S)) + chunk;
{load_q("pair", scale)}    float m = -INFINITY, l = 0.f;
    for (int t0 = {lo}; t0 < {hi}; t0 += ROWS * U) {{   // one trip count for every lane: shuffles stay whole
#pragma unroll
        for (int u = 0; u < U; ++u) {{                 // 2U independent 16-byte loads in flight per lane
            const int t = t0 + u * ROWS + slot;
            kp[u].u = t < {hi} ? kb[(size_t)t * LANES_PER_KEY] : make_uint4(0u, 0u, 0u, 0u);
            vp[u].u = t < {hi} ? vb[(size_t)t * LANES_PER_KEY] : kp[u].u;
        }}
        key_scores(s, qv, kp);
#pragma unroll
        for (int u = 0; u < U; ++u) if (t0 + u * ROWS + slot >= {hi}) s[u] = -INFINITY;
        online_update(s, vp, m, l, acc);
    }}
    float* mine = merge + slot * STRIDE;
#pragma unroll
    for (int i = 0; i < VEC; ++i) mine[chunk * VEC + i] = acc[i];
    if (chunk == 0) {{ mine[HEAD_DIM] = m; mine[HEAD_DIM + 1] = l; }}
    __syncthreads();
"""


def store_partial(pair: str) -> str:
    return f"""        const size_t part = (size_t)({pair}) * gridDim.y + blockIdx.y;
        part_acc[part * HEAD_DIM + d] = r.y;        // unnormalised, relative to its own max r.x
        if (d == 0) {{ part_ml[2 * part] = r.x; part_ml[2 * part + 1] = r.z; }}
    }}
}}
"""


def combine_src(task, idx: str, grid: str, smem: str, pre: str = "") -> str:
    """The combine kernel (o = sum_p e^(m_p - m) acc_p / sum_p e^(m_p - m) l_p) and the host."""
    return f"""
extern "C" __global__ void swa_decode_combine_kernel(const float* __restrict__ part_acc,
        const float* __restrict__ part_ml, scalar_t* __restrict__ o, int parts) {{
    const int pair = blockIdx.x;
    const float* ml = part_ml + (size_t)pair * parts * 2;
    float m_max = -INFINITY;
    for (int p = 0; p < parts; ++p) m_max = fmaxf(m_max, ml[2 * p]);
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {{
        float num = 0.f, den = 0.f;
        for (int p = 0; p < parts; ++p) {{
            const float w = __expf(ml[2 * p] - m_max);
            num += w * part_acc[{idx} * HEAD_DIM + d];
            den += w * ml[2 * p + 1];
        }}
        o[(size_t)pair * HEAD_DIM + d] = from_float(num / den);
    }}
}}

{ENTRY.host_head(task)} {{
    const int parts = (W + PARTITION - 1) / PARTITION;   // every partition holds at least one key
    const size_t n = (size_t)B * NUM_HEADS * parts;
    float* ws;                                   // fp32 partials: acc [n, HEAD_DIM], then (m, l) [n, 2]
    cudaMallocAsync((void**)&ws, n * (HEAD_DIM + 2) * sizeof(float), stream);
{pre}    swa_decode_kernel<<<{grid}, THREADS, {smem}, stream>>>(q, k_cache, v_cache, ws, ws + n * HEAD_DIM, S, W);
    swa_decode_combine_kernel<<<B * NUM_HEADS, HEAD_DIM, 0, stream>>>(ws, ws + n * HEAD_DIM, o, parts);
    cudaFreeAsync(ws, stream);
}}
"""
