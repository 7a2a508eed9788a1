"""The sort-based rungs of embedding_bwd_cuda, their shared pieces: the host code that radix-sorts (id, position),
the head of a segment's kernel, and sort_segmented_reduce's kernel moving words.VEC columns a global access. Kept
apart so the module stays within its size limit (not an op module itself)."""
from ..words import WORD, word_union


def sort_host(launch: str, task) -> str:
    # hipCUB wraps rocPRIM; radix_sort_pairs takes the same arguments as cub's SortPairs
    sort_pairs = task.dialect.radix_sort_pairs
    return f"""
__global__ void embedding_bwd_iota_kernel(int* pos, int T) {{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T) pos[i] = i;
}}

// Stable radix sort of (id, position) over only the bits an id can use; equal ids end up
// adjacent and in token order, so each segment's sum has a fixed order.
void embedding_bwd(const int64_t* ids, const scalar_t* grad_out, scalar_t* grad_weight, int T, int D, int V,
                   int padding_idx, cudaStream_t stream) {{
    int end_bit = 1;
    while ((1ll << end_bit) < V) ++end_bit;
    size_t temp_bytes = 0;
    {sort_pairs}(nullptr, temp_bytes, ids, (int64_t*)nullptr, (const int*)nullptr, (int*)nullptr,
                                    T, 0, end_bit, stream);
    temp_bytes = (temp_bytes + 255) & ~(size_t)255;
    char* ws = nullptr;           // [cub temp | sorted ids | positions | sorted positions]
    cudaMallocAsync((void**)&ws, temp_bytes + (size_t)T * 16, stream);
    int64_t* sorted_ids = reinterpret_cast<int64_t*>(ws + temp_bytes);
    int* pos = reinterpret_cast<int*>(sorted_ids + T);
    int* sorted_pos = pos + T;
    embedding_bwd_iota_kernel<<<(T + 255) / 256, 256, 0, stream>>>(pos, T);
    {sort_pairs}(ws, temp_bytes, ids, sorted_ids, pos, sorted_pos, T, 0, end_bit, stream);
    {launch}
    cudaFreeAsync(ws, stream);
}}
"""


def segment(k0: str, prev: str = "sorted_ids[{k0} - 1]", end: str = "k1") -> str:
    prev = prev.format(k0=k0)
    return f"""const int64_t id = sorted_ids[{k0}];
    if (id == padding_idx || ({k0} > 0 && {prev} == id)) return;   // only a segment's first position works
    int k1 = {k0} + 1;
    while (k1 < T && sorted_ids[k1] == id) ++k1;                   // segment = [{k0}, k1)
    const int k_end = {end};"""


def sorted_words_kernel(p, head: str) -> str:
    """sort_segmented_reduce's kernel over VEC-column words (VEC = p['vec'] > 1): a thread sums VEC adjacent
    columns of its segment's rows in fp32, one VEC-value load per row, and writes the table's word once; `head`
    is segment()'s (the bugs' slots)."""
    vec = p["vec"]
    word = WORD[vec]
    return f"""
#define THREADS {p['threads']}
#define VEC {vec}  // adjacent columns a thread moves as one {vec * 2}-byte {word}; D % VEC == 0
{word_union(vec)}

// One block per sorted position; the block at the start of a segment sums its rows in order
// in fp32, VEC columns a thread, and is the only writer of that table row: no atomics, same bits every run.
extern "C" __global__ void __launch_bounds__(THREADS)
embedding_bwd_kernel(const int64_t* __restrict__ sorted_ids, const int* __restrict__ sorted_pos,
                     const scalar_t* __restrict__ grad_out, scalar_t* grad_weight, int T, int D, int padding_idx) {{
    const int k0 = blockIdx.x;
    {head}
    {word}* dst = reinterpret_cast<{word}*>(grad_weight + (size_t)id * D);
    for (int c = threadIdx.x; c < D / VEC; c += THREADS) {{
        Word o; o.u = dst[c];
        float acc[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = to_float(o.h[j]);
        for (int k = k0; k < k_end; ++k) {{
            Word g; g.u = reinterpret_cast<const {word}*>(grad_out + (size_t)sorted_pos[k] * D)[c];
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] += to_float(g.h[j]);
        }}
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.h[j] = from_float(acc[j]);
        dst[c] = o.u;
    }}
}}"""
