"""topk_cuda's split_row_two_stage rung (not an op module itself): a row split over many CTAs.

One block per row leaves most SMs idle when B is small (B=1..8 on 108-170 SMs), and every radix
pass re-reads the row. Stage 1 (grid chunks x B) stages each CHUNK of a row in shared memory with
one 16-byte-load DRAM read, radix-selects the chunk's own K-th largest key there and hands on every
key >= it: each of the row's top K (and each tie with the K-th) has fewer than K larger keys in its
chunk, so it is among them. Stage 2 (one block per row) radix-selects the K-th largest over those
few candidates (from L2), gathers the kept ones and picks by rank, as histogram_refine finishes.
The two-stage split is what TensorRT-LLM's topKStage1/topKStage2 and FlashInfer's multi-CTA
top-k do for small batches.
"""
from ..base import Launch, cdiv
from ._select import COUNT_SELECT, DIGITS, RANK_PICK, SELECT_SHARED, block_incl_scan

SLOTS = 128         # candidates one chunk hands on: its K <= 64 largest plus ties
KCAP = 128          # gather slots of the rank-based finisher (K <= 64 plus ties)


STAGE1_ROUNDS = 4    # DRAM round trips a stage-1 CTA waits on: its chunk's load, then 3 digit passes' block scans
L2_PER_DRAM_TRIP = 3  # L2 round trips one DRAM round trip lasts (~200 vs ~650 ns)


def split_launch(p, task):
    """Stage 1 is the main kernel: its smem holds the chunk's keys and the histogram; the candidates
    (about K a chunk, 8 bytes each) are written and read back once more.

    Both stages are chains of dependent block-wide phases, not bandwidth: on an H100 (80GB HBM3,
    scripts/gpu_check_rounds.sh) threads 512 chunk 4096 took 0.0208 ms at B=1 V=32000, 0.0290 ms at
    B=8 V=128256 and 0.208 ms at B=256 V=128256, where a bandwidth-and-launch model said 0.0075,
    0.0090 and 0.157 ms. Launch.rounds counts them: each wave of stage 1 waits STAGE1_ROUNDS; stage
    2 (one block a row) then runs 4 passes (3 digits, the gather) over the row's chunks x SLOTS
    candidates, candidates / threads dependent L2 reads each, once a call, so it is spread over
    stage 1's waves (where B fills the GPU it is a tail, where B is small it is half the time)."""
    threads, chunk = p["threads"], p["chunk"]
    chunks = cdiv(task["V"], chunk)
    handed = 2 * 8 * min(task["K"], chunk) / (4 * chunk)
    smem = 4 * chunk + 8192 + 4 * threads + 16
    gpu = task.gpu
    resident = max(1, min(gpu.max_threads_per_sm // threads, gpu.smem_per_sm // smem))
    waves = cdiv(task["B"] * chunks, gpu.sms * resident)
    stage2 = cdiv(4 * cdiv(chunks * SLOTS, threads), L2_PER_DRAM_TRIP)
    return Launch(grid=task["B"] * chunks, threads=threads, smem_bytes=smem,
                  regs=30, bytes_per_access=16, traffic=1 + handed, compute_scale=0.5, launches=2,
                  rounds=STAGE1_ROUNDS + cdiv(stage2, waves))


ATOMIC_CLAIM = "const unsigned s = atomicAdd(&count, 1u);"
RACY_CLAIM = "const unsigned s = count++;  // unsynchronised slot claim"


def split_src(p, task, claim=ATOMIC_CLAIM):
    return f"""#define CHUNK {p['chunk']}                // logits per CTA of stage 1
#define SLOTS {SLOTS}                 // candidates a chunk hands on: its K <= 64 largest plus ties
#define KCAP {KCAP}
{block_incl_scan(task, False)}{COUNT_SELECT}{RANK_PICK}
// Radix select over n keys read by key(i): the need-th largest in sel->prefix (3 digit passes).
template <typename KeyAt>
__device__ void radix_select(KeyAt key, int n, unsigned* hist, Sel* sel, unsigned* ubuf) {{
    {DIGITS}
    for (int d = 0; d < 3; ++d) {{
        for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = sel->prefix, mask = sel->mask;
        for (int i = threadIdx.x; i < n; i += THREADS) {{
            const uint32_t k = key(i);
            if ((k & mask) == prefix) atomicAdd(&hist[(k >> SHIFT[d]) & (NBINS[d] - 1)], 1u);
        }}
        __syncthreads();
        select_bin(hist, NBINS[d], SHIFT[d], sel, ubuf);
    }}
}}

// Stage 1, grid (chunks, B): one DRAM read of the chunk into shared memory, select there.
extern "C" __global__ void __launch_bounds__(THREADS)
topk_kernel(const float* __restrict__ logits, uint32_t* __restrict__ wkey, int* __restrict__ widx,
                  unsigned* __restrict__ wcount, int V, int K) {{
    __shared__ __align__(16) uint32_t skey[CHUNK];
    __shared__ unsigned hist[2048];
    __shared__ unsigned ubuf[THREADS];
    __shared__ Sel sel;
    __shared__ unsigned count;
    const int start = blockIdx.x * CHUNK, n = min(CHUNK, V - start);
    const float4* row4 = reinterpret_cast<const float4*>(logits + (size_t)blockIdx.y * V + start);
    for (int c = threadIdx.x; c < n / 4; c += THREADS) {{       // V and CHUNK are multiples of 4
        const float4 v = row4[c];
        reinterpret_cast<uint4*>(skey)[c] = make_uint4(key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w));
    }}
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = min(K, n); count = 0u; }}
    radix_select([&](int i) {{ return skey[i]; }}, n, hist, &sel, ubuf);
    const uint32_t thresh = sel.prefix;            // the chunk's own K-th largest key
    const size_t slot0 = ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * SLOTS;
    for (int i = threadIdx.x; i < n; i += THREADS) {{
        const uint32_t k = skey[i];
        if (k >= thresh) {{
            {claim}
            if (s < SLOTS) {{ wkey[slot0 + s] = k; widx[slot0 + s] = start + i; }}
        }}
    }}
    __syncthreads();
    if (threadIdx.x == 0) wcount[blockIdx.y * gridDim.x + blockIdx.x] = min(count, (unsigned)SLOTS);
}}

// Stage 2, one block per row: the K-th largest among the row's candidates, gather, rank pick.
__global__ void __launch_bounds__(THREADS)
topk_merge_kernel(const uint32_t* __restrict__ wkey, const int* __restrict__ widx, const unsigned* __restrict__ wcount,
                  const float* __restrict__ uniform, int* __restrict__ tokens, int chunks, int K) {{
{SELECT_SHARED}    const uint32_t* rkey = wkey + (size_t)blockIdx.x * chunks * SLOTS;
    const int* ridx = widx + (size_t)blockIdx.x * chunks * SLOTS;
    const unsigned* rcount = wcount + (size_t)blockIdx.x * chunks;
    // an unused slot reads as key 0, below every float's key, so it never reaches the top K
    auto key = [&](int s) {{ return (unsigned)(s % SLOTS) < rcount[s / SLOTS] ? rkey[s] : 0u; }};
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = K; count = 0u; pick = -1; }}
    radix_select(key, chunks * SLOTS, hist, &sel, ubuf);
    const uint32_t thresh = sel.prefix;            // key of the row's K-th largest logit
    for (int j = threadIdx.x; j < chunks * SLOTS; j += THREADS) {{
        const uint32_t k = key(j);
        if (k >= thresh) {{
            {claim}
            if (s < KCAP) {{ ckey[s] = k; cidx[s] = ridx[j]; }}
        }}
    }}
    __syncthreads();
    pick_by_rank(ckey, cidx, min(count, (unsigned)KCAP), uniform[blockIdx.x], tokens + blockIdx.x, slots, &pick);
}}

void topk_sampling(const float* logits, const float* uniform, int* tokens, int B, int V, int K,
                   cudaStream_t stream) {{
    const int chunks = (V + CHUNK - 1) / CHUNK;
    const size_t slots = (size_t)B * chunks * SLOTS;
    char* ws = nullptr;
    cudaMallocAsync((void**)&ws, slots * 8 + (size_t)B * chunks * 4, stream);
    uint32_t* wkey = (uint32_t*)ws;
    int* widx = (int*)(ws + slots * 4);
    unsigned* wcount = (unsigned*)(ws + slots * 8);
    topk_kernel<<<dim3(chunks, B), THREADS, 0, stream>>>(logits, wkey, widx, wcount, V, K);
    topk_merge_kernel<<<B, THREADS, 0, stream>>>(wkey, widx, wcount, uniform, tokens, chunks, K);
    cudaFreeAsync(ws, stream);
}}
"""
