"""Top-k sampling in CUDA: keep the K largest logits of each row, softmax them and draw one
token by inverse CDF (in vocabulary order) with the row's uniform number u.

Ladder (one block per row throughout): full_sort (chunked bitonic sort in shared memory, the
running top-K merged with each new chunk) -> histogram_refine (radix select: 11/11/10-bit key
histograms with shared atomics, three passes over the row, then an atomic gather) -> cdf_pick
(one histogram pass, order-preserving compaction of the candidates into shared memory through a
block prefix sum, refine there, pick by cumulative sum) -> warp_ballot_scan (ballot/popc
compaction, shuffle scans) -> vectorized_float4 (16-byte loads in both DRAM passes).
"""
from ..base import Cost, Launch, Param, Task, Variant, cdiv, cuda_prelude, kernelbench_program
from ._sampling import (BLOCK_REDUCE, CAP, DIGITS, KEY_HELPERS, THREADS, SamplingCuda, ballot_ops, block_incl_scan,
                        row_l2_miss)

KCAP = 128          # gather slots of the rank-based finisher (K <= 64 plus ties)
LOG2 = {1024: 10, 2048: 11, 4096: 12}


class TopkCuda(SamplingCuda):
    op, impl = "topk", "cuda"
    title = "top-k sampling"
    desc = ("tokens[b] = inverse-CDF sample, in vocabulary order, of softmax over the K largest logits of row b "
            "(logits below the K-th largest are masked; ties with it kept), using uniform[b] in [0, 1). "
            "fp32 logits [B, V], K <= 64, V a multiple of 4; int32 tokens.")
    dims = {"B": "batch rows", "V": "vocabulary size", "K": "top-k"}
    shapes = ({"B": 1, "V": 32000, "K": 50}, {"B": 8, "V": 128256, "K": 50}, {"B": 32, "V": 32000, "K": 40},
              {"B": 64, "V": 128256, "K": 20}, {"B": 128, "V": 32000, "K": 50}, {"B": 256, "V": 128256, "K": 50})
    variants = (
        Variant("full_sort", "chunked bitonic sort in shared memory; running top-K kept at the front of each chunk",
                (Param("threads", (128, 256, 512, 1024), 256), Param("chunk", (1024, 2048, 4096), 2048)),
                compute_eff=0.5, memory_eff=0.6, smem="static", bugs=("missing_barrier",)),
        Variant("histogram_refine", "radix select: 3 passes of shared-memory key histograms, atomic gather, rank pick",
                (THREADS,), compute_eff=0.3, memory_eff=0.55, smem="static", bugs=("racy_update", "off_by_one")),
        Variant("cdf_pick", "1 histogram pass, prefix-sum compaction to smem, refine in smem, cumulative-sum pick",
                (THREADS, CAP), compute_eff=0.35, memory_eff=0.7, smem="static", bugs=("missing_scale", "wrong_init")),
        Variant("warp_ballot_scan", "ballot/popc compaction and warp-shuffle scans instead of smem scan trees",
                (THREADS, CAP), compute_eff=0.45, memory_eff=0.8, smem="static", bugs=("racy_update", "wrong_init")),
        Variant("vectorized_float4", "float4 loads in the histogram and compaction passes, 4 keys per thread",
                (THREADS, CAP), compute_eff=0.5, memory_eff=0.9, smem="static", bugs=("racy_update", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        b, v = task["B"], task["V"]
        return Cost(flops=6 * b * v, bytes=b * v * 4 + b * 8)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, gpu = task["B"], task.gpu
        threads = params["threads"]
        warps = cdiv(threads, gpu.warp)
        slots = threads if variant.tag in ("histogram_refine", "cdf_pick") else cdiv(threads, gpu.warp)
        miss = row_l2_miss(task, threads)
        if variant.tag == "full_sort":
            c = params["chunk"]
            lg = LOG2[c]
            ops = lg * (lg + 1) / 2 * c / (c - 64) * 12 / 2        # compare-exchanges per element, ~12 instr each
            return Launch(grid=b, threads=threads, smem_bytes=8 * c + 4 * warps + 4, regs=24, bytes_per_access=4,
                          compute_scale=6 / ops)
        hist = 8192 + 12 + 4                                       # histogram, Sel, pick
        if variant.tag == "histogram_refine":
            return Launch(grid=b, threads=threads, smem_bytes=hist + 4 * threads + 8 * KCAP + 4 * warps + 4, regs=30,
                          bytes_per_access=4, traffic=1 + 3 * miss, compute_scale=0.5)
        cap = params["cap"]
        vec = 16 if variant.tag == "vectorized_float4" else 4
        wcount = 4 * warps if variant.tag == "warp_ballot_scan" else 0
        return Launch(grid=b, threads=threads, smem_bytes=hist + 8 * cap + 8 * slots + wcount,
                      regs=40 if vec == 16 else 32,
                      bytes_per_access=vec, traffic=1 + miss)

    def signature(self, task: Task) -> str:
        return ("void topk_sampling(const float* logits, const float* uniform, int* tokens, int B, int V, int K, "
                "cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="logits, uniform",
            body=("thresh = torch.topk(logits, K, dim=-1).values[:, -1:]\n"
                  "        probs = torch.softmax(logits.masked_fill(logits < thresh, float('-inf')), dim=-1)\n"
                  "        cdf = probs.cumsum(-1)\n"
                  "        return (cdf < uniform[:, None]).sum(-1).clamp(max=V - 1).to(torch.int32)"),
            inputs="[torch.randn(B, V, dtype=DTYPE, device='cuda') * 2, torch.rand(B, device='cuda')]")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n#define THREADS {params['threads']}\n{self._COMMON}{body}\n{self._HOST}"

    _HOST = """
void topk_sampling(const float* logits, const float* uniform, int* tokens, int B, int V, int K,
                   cudaStream_t stream) {
    topk_kernel<<<B, THREADS, 0, stream>>>(logits, uniform, tokens, V, K);
}
"""
    _COMMON = (KEY_HELPERS + "\n// Block reductions: warp shuffles, one shared slot per warp, every thread gets the result.\n"
               + BLOCK_REDUCE)

    _RANK_PICK = """
// Sample among n <= THREADS unordered candidates: each candidate's CDF position in vocabulary
// order is the weight of the candidates with smaller indices; the pick is the largest index
// whose position is still below u * Z.
__device__ void pick_by_rank(const uint32_t* ckey, const int* cidx, int n, float u, int* token, float* slots,
                             int* pick) {
    const int t = threadIdx.x;
    const float mx = block_max(t < n ? float_of_key(ckey[t]) : -INFINITY, slots);
    const float w = t < n ? expf(float_of_key(ckey[t]) - mx) : 0.f;
    const float target = u * block_sum(w, slots);
    float below = 0.f;
    if (t < n)
        for (int j = 0; j < n; ++j) below += cidx[j] < cidx[t] ? expf(float_of_key(ckey[j]) - mx) : 0.f;
    if (t < n && below < target) atomicMax(pick, cidx[t]);
    __syncthreads();
    if (t == 0) *token = *pick;
}
"""

    def _full_sort(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "\n            __syncthreads();"
        return f"""#define CHUNK {p['chunk']}
#define KPAD 64                    // slots [0, KPAD) carry the running top-K between chunks
{self._RANK_PICK}
extern "C" __global__ void __launch_bounds__(THREADS)
topk_kernel(const float* __restrict__ logits, const float* __restrict__ uniform, int* __restrict__ tokens,
            int V, int K) {{
    __shared__ uint32_t skey[CHUNK];
    __shared__ int sidx[CHUNK];
    __shared__ float slots[WARPS];
    __shared__ int pick;
    const float* row = logits + (size_t)blockIdx.x * V;
    for (int i = threadIdx.x; i < KPAD; i += THREADS) {{ skey[i] = 0u; sidx[i] = -1; }}
    if (threadIdx.x == 0) pick = -1;
    for (int base = 0; base < V; base += CHUNK - KPAD) {{
        // fill the chunk behind the current winners; padding keys (0) sort last
        for (int i = threadIdx.x; i < CHUNK - KPAD; i += THREADS) {{
            const int j = base + i;
            skey[KPAD + i] = j < V ? key_of(row[j]) : 0u;
            sidx[KPAD + i] = j < V ? j : -1;
        }}
        __syncthreads();
        // bitonic sort of the whole chunk, descending: log2(CHUNK) * (log2(CHUNK) + 1) / 2 stages
        for (int k = 2; k <= CHUNK; k <<= 1)
            for (int j = k >> 1; j > 0; j >>= 1) {{
                for (int i = threadIdx.x; i < CHUNK; i += THREADS) {{
                    const int partner = i ^ j;
                    if (partner > i) {{
                        const uint32_t a = skey[i], b = skey[partner];
                        if (((i & k) == 0) ? a < b : a > b) {{
                            skey[i] = b; skey[partner] = a;
                            const int t = sidx[i]; sidx[i] = sidx[partner]; sidx[partner] = t;
                        }}
                    }}
                }}{sync}
            }}
    }}
    pick_by_rank(skey, sidx, K, uniform[blockIdx.x], tokens + blockIdx.x, slots, &pick);
}}"""

    _SELECT = """
struct Sel { uint32_t prefix, mask, need; };   // keys matching prefix on mask; need-th largest among them

// Radix-select step: find the bin (scanning from the top) that holds the need-th largest key.
// Each thread owns nbins / THREADS consecutive bins; a block scan of their counts finds the owner.
__device__ void select_bin(const unsigned* hist, int nbins, int shift, Sel* sel, unsigned* ubuf) {
    const int per = nbins / THREADS;
    const unsigned need = sel->need;
    unsigned local = 0;
    for (int j = 0; j < per; ++j) local += hist[nbins - 1 - (threadIdx.x * per + j)];
    unsigned total;
    const unsigned incl = block_incl_scan(local, ubuf, &total);
    unsigned acc = incl - local;
    if (acc < need && incl >= need) {
        for (int j = 0; j < per; ++j) {
            const int b = nbins - 1 - (threadIdx.x * per + j);
            if (acc + hist[b] >= need) {
                sel->prefix |= (uint32_t)b << shift;
                sel->mask |= (uint32_t)(nbins - 1) << shift;
                sel->need = need - acc;
                break;
            }
            acc += hist[b];
        }
    }
    __syncthreads();
}
"""

    def _histogram_refine(self, p, task, bug):
        store = ("ckey[count] = k; cidx[count] = i; ++count;  // unsynchronised slot claim" if bug == "racy_update" else
                 "const unsigned s = atomicAdd(&count, 1u);\n                if (s < KCAP) { ckey[s] = k; cidx[s] = i; }")
        keep = "k > thresh" if bug == "off_by_one" else "k >= thresh"
        return f"""#define KCAP {KCAP}
{block_incl_scan(task, False)}{self._SELECT}{self._RANK_PICK}
extern "C" __global__ void __launch_bounds__(THREADS)
topk_kernel(const float* __restrict__ logits, const float* __restrict__ uniform, int* __restrict__ tokens,
            int V, int K) {{
    __shared__ unsigned hist[2048];
    __shared__ unsigned ubuf[THREADS];
    __shared__ uint32_t ckey[KCAP];
    __shared__ int cidx[KCAP];
    __shared__ float slots[WARPS];
    __shared__ Sel sel;
    __shared__ unsigned count;
    __shared__ int pick;
    const float* row = logits + (size_t)blockIdx.x * V;
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = K; count = 0u; pick = -1; }}
    {DIGITS}
    for (int d = 0; d < 3; ++d) {{            // each digit re-reads the whole row (L2 if it fits)
        for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < V; i += THREADS) {{
            const uint32_t k = key_of(row[i]);
            if ((k & mask) == prefix) atomicAdd(&hist[(k >> SHIFT[d]) & (NBINS[d] - 1)], 1u);
        }}
        __syncthreads();
        select_bin(hist, NBINS[d], SHIFT[d], &sel, ubuf);
    }}
    const uint32_t thresh = sel.prefix;            // key of the K-th largest logit
    for (int i = threadIdx.x; i < V; i += THREADS) {{
        const uint32_t k = key_of(row[i]);
        if ({keep}) {{
                {store}
        }}
    }}
    __syncthreads();
    pick_by_rank(ckey, cidx, min(count, (unsigned)KCAP), uniform[blockIdx.x], tokens + blockIdx.x, slots, &pick);
}}"""

    def _compact(self, task, mode: str, bug) -> str:
        """Pass 2: order-preserving compaction of keys >= bin_floor into ckey/cidx."""
        if mode == "ballot":
            ballot, popc, lt = ballot_ops(task)
            end = "V - 1" if bug == "off_by_one" else "V"
            return f"""        const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
        for (int start = 0; start < V; start += THREADS) {{
            const int i = start + threadIdx.x;
            const uint32_t k = i < {end} ? key_of(row[i]) : 0u;
            const bool flag = i < {end} && k >= bin_floor;
            const auto bits = {ballot};             // one bit per lane, in lane (= vocab) order
            if (lane == 0) wcount[warp] = {popc}(bits);
            __syncthreads();
            unsigned off = base, total = 0;
            for (int w = 0; w < WARPS; ++w) {{ off += w < warp ? wcount[w] : 0u; total += wcount[w]; }}
            __syncthreads();
            if (flag) {{ const unsigned pos = off + {popc}(bits & {lt}); ckey[pos] = k; cidx[pos] = i; }}
            base += total;
        }}"""
        if mode == "float4":
            guard = "true" if bug == "no_bounds_check" else "c < V4"
            return f"""        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int start = 0; start < V4; start += THREADS) {{
            const int c = start + threadIdx.x;
            const float4 v = {guard} ? row4[c] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            const uint32_t k[4] = {{key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w)}};
            unsigned cnt = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) cnt += k[j] >= bin_floor;
            unsigned total;
            unsigned pos = base + block_incl_scan(cnt, ubuf, &total) - cnt;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (k[j] >= bin_floor) {{ ckey[pos] = k[j]; cidx[pos] = 4 * c + j; ++pos; }}
            base += total;
        }}"""
        return """        for (int start = 0; start < V; start += THREADS) {
            const int i = start + threadIdx.x;
            const uint32_t k = i < V ? key_of(row[i]) : 0u;
            const unsigned flag = i < V && k >= bin_floor;
            unsigned total;
            const unsigned pos = base + block_incl_scan(flag, ubuf, &total) - flag;
            if (flag) { ckey[pos] = k; cidx[pos] = i; }
            base += total;
        }"""

    def _select_kernel(self, p, task, bug, mode: str) -> str:
        warp = mode != "smem"
        slots = "WARPS" if warp else "THREADS"
        u = "1.f" if bug == "missing_scale" else "uniform[blockIdx.x]"
        inc = "++hist[{}];  // plain read-modify-write" if bug == "racy_update" else "atomicAdd(&hist[{}], 1u);"
        carry0 = "1.f" if bug == "wrong_init" else "0.f"
        if mode == "float4":
            hist_pass = f"""const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int c = threadIdx.x; c < V4; c += THREADS) {{          // 16-byte loads, 4 keys per thread
        const float4 v = row4[c];
        mx = fmaxf(mx, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        {inc.format("key_of(v.x) >> 21")} {inc.format("key_of(v.y) >> 21")}
        {inc.format("key_of(v.z) >> 21")} {inc.format("key_of(v.w) >> 21")}
    }}"""
        else:
            hist_pass = f"""for (int i = threadIdx.x; i < V; i += THREADS) {{
        const float f = row[i];
        mx = fmaxf(mx, f);
        {inc.format("key_of(f) >> 21")}
    }}"""
        return f"""#define CAP {p['cap']}               // candidate slots in shared memory
{block_incl_scan(task, warp)}{self._SELECT}
extern "C" __global__ void __launch_bounds__(THREADS)
topk_kernel(const float* __restrict__ logits, const float* __restrict__ uniform, int* __restrict__ tokens,
            int V, int K) {{
    __shared__ unsigned hist[2048];
    __shared__ uint32_t ckey[CAP];
    __shared__ int cidx[CAP];
    __shared__ unsigned ubuf[{slots}];
    __shared__ float fbuf[{slots}];{chr(10) + "    __shared__ unsigned wcount[WARPS];" if mode == "ballot" else ""}
    __shared__ Sel sel;
    __shared__ int pick;
    const float* row = logits + (size_t)blockIdx.x * V;
    const int V4 = V / 4;
    for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = K; pick = -1; }}
    __syncthreads();
    // pass 1 (DRAM): row max and a histogram of the top 11 key bits (sign, exponent, 2 mantissa bits)
    float mx = -INFINITY;
    {hist_pass}
    __syncthreads();
    mx = block_max(mx, fbuf);
    select_bin(hist, 2048, 21, &sel, ubuf);
    const uint32_t bin_floor = sel.prefix;                   // every top-K key is >= bin_floor
    const unsigned n_cand = (K - sel.need) + hist[bin_floor >> 21];
    const bool in_smem = n_cand <= CAP;                      // else refine straight from the row
    unsigned base = 0;
    if (in_smem) {{
        // pass 2: candidates move to shared memory in vocabulary order (block prefix sum of flags)
{self._compact(task, mode, bug)}
    }}
    const int n = in_smem ? (int)n_cand : V;
    const int SHIFT[2] = {{10, 0}}, NBINS[2] = {{2048, 1024}};
    for (int d = 0; d < 2; ++d) {{                          // refine the low 21 bits on the candidates
        for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < n; i += THREADS) {{
            const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
            if ((k & mask) == prefix) atomicAdd(&hist[(k >> SHIFT[d]) & (NBINS[d] - 1)], 1u);
        }}
        __syncthreads();
        select_bin(hist, NBINS[d], SHIFT[d], &sel, ubuf);
    }}
    const uint32_t thresh = sel.prefix;                      // key of the K-th largest logit
    float z = 0.f;
    for (int i = threadIdx.x; i < n; i += THREADS) {{
        const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
        z += k >= thresh ? expf(float_of_key(k) - mx) : 0.f;
    }}
    const float target = {u} * block_sum(z, fbuf);
    // inverse CDF: running cumulative sum in vocabulary order; the last kept token whose
    // exclusive prefix is still below target is the sample
    float carry = {carry0};
    for (int start = 0; start < n; start += THREADS) {{
        const int i = start + threadIdx.x;
        const uint32_t k = i < n ? (in_smem ? ckey[i] : key_of(row[i])) : 0u;
        const float w = k >= thresh ? expf(float_of_key(k) - mx) : 0.f;
        float total;
        const float incl = block_incl_scan(w, fbuf, &total);
        if (w > 0.f && carry + incl - w < target) atomicMax(&pick, in_smem ? cidx[i] : i);
        carry += total;
        if (carry >= target) break;
    }}
    __syncthreads();
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}"""
