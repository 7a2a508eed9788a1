"""Top-p (nucleus) sampling in CUDA: keep the smallest set of most probable tokens whose mass
reaches top_p[b], renormalise, and draw one token by inverse CDF in vocabulary order.

Ladder (one block per row): full_sort (bitonic sort of the row's keys in a global scratch
buffer, stages below CHUNK done in shared memory, then a cumulative-mass walk) ->
histogram_refine (threshold search by radix select on probability MASS: three passes of
float-atomic mass histograms) -> cdf_pick (one pass builds per-bin mass relative to each bin's
edge, CDF over bins picks the boundary bin, only that bin is compacted and refined in shared
memory, then a cumulative-sum pick) -> warp_ballot_scan (warp-aggregated compaction, shuffle
scans) -> vectorized_float4. Logits are assumed finite with |logit| < 256.
"""
from ..base import Cost, Launch, Param, Task, Variant, cdiv, cuda_prelude, kernelbench_program
from ._sampling import (BLOCK_REDUCE, CAP, DIGITS, KEY_HELPERS, THREADS, SamplingCuda, ballot_ops, block_incl_scan,
                        row_l2_miss)


class TopPCuda(SamplingCuda):
    op, impl = "top_p", "cuda"
    title = "top-p (nucleus) sampling"
    desc = ("p = softmax(logits[b]); sort p descending, keep every token with p >= the first sorted p at which the "
            "cumulative mass reaches top_p[b]; tokens[b] = inverse-CDF sample in vocabulary order of the kept, "
            "renormalised mass with uniform[b]. fp32 logits [B, V] (finite, |x| < 256), V a multiple of 4.")
    dims = {"B": "batch rows", "V": "vocabulary size"}
    shapes = ({"B": 1, "V": 32000}, {"B": 8, "V": 128256}, {"B": 32, "V": 32000}, {"B": 64, "V": 128256},
              {"B": 128, "V": 32000}, {"B": 256, "V": 128256})
    variants = (
        Variant("full_sort", "bitonic sort of keys in global scratch (sub-CHUNK stages in smem), cumulative-mass walk",
                (Param("threads", (256, 512, 1024), 512), Param("chunk", (1024, 2048, 4096), 2048)),
                compute_eff=0.4, memory_eff=0.5, smem="static", bugs=("missing_barrier", "off_by_one")),
        Variant("histogram_refine", "radix select on mass: 3 passes of float-atomic mass histograms, then CDF pick",
                (THREADS,), compute_eff=0.3, memory_eff=0.55, smem="static", bugs=("missing_scale", "racy_update")),
        Variant("cdf_pick", "one pass of per-bin mass, CDF over bins, boundary bin compacted and refined in smem",
                (THREADS, CAP), compute_eff=0.35, memory_eff=0.7, smem="static", bugs=("missing_scale", "wrong_init")),
        Variant("warp_ballot_scan", "ballot/popc warp-aggregated compaction, warp-shuffle scans",
                (THREADS, CAP), compute_eff=0.45, memory_eff=0.8, smem="static", bugs=("racy_update", "wrong_init")),
        Variant("vectorized_float4", "float4 loads in the mass, compaction and pick passes",
                (THREADS, CAP), compute_eff=0.5, memory_eff=0.9, smem="static", bugs=("missing_scale", "racy_update")),
    )

    def cost(self, task: Task) -> Cost:
        b, v = task["B"], task["V"]
        return Cost(flops=10 * b * v, bytes=b * v * 4 + b * 12)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, v, gpu = task["B"], task["V"], task.gpu
        threads = params["threads"]
        warps = cdiv(threads, gpu.warp)
        miss = row_l2_miss(task, threads)
        small = 4 * warps + 24                                     # reduction slots, Sel, pick
        if variant.tag == "full_sort":
            c, npow = params["chunk"], 1 << (v - 1).bit_length()
            lg, lc = npow.bit_length() - 1, c.bit_length() - 1
            glob = sum(k - lc for k in range(lc + 1, lg + 1))      # stages with stride >= CHUNK run in global
            sweeps = glob + (lg - lc) + 1                          # plus one smem sweep per merge level
            return Launch(grid=b, threads=threads, smem_bytes=4 * c + 4 * threads + small - 16, regs=32,
                          bytes_per_access=4, traffic=3 + sweeps * 2 * npow / v * max(miss, 0.3),
                          compute_scale=0.05)
        if variant.tag == "histogram_refine":
            return Launch(grid=b, threads=threads, smem_bytes=8192 + 4 * threads + small, regs=32, bytes_per_access=4,
                          traffic=1 + 3.5 * miss, compute_scale=0.5)
        slots = threads if variant.tag == "cdf_pick" else warps
        vec = 16 if variant.tag == "vectorized_float4" else 4
        return Launch(grid=b, threads=threads, smem_bytes=16384 + 4 * params["cap"] + 4 * slots + small + 4,
                      regs=40 if vec == 16 else 32, bytes_per_access=vec, traffic=1 + 1.5 * miss)

    def signature(self, task: Task) -> str:
        return ("void top_p_sampling(const float* logits, const float* top_p, const float* uniform, int* tokens, "
                "int B, int V, cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="logits, top_p, uniform",
            body=("probs = torch.softmax(logits, dim=-1)\n"
                  "        sp = probs.sort(dim=-1, descending=True).values\n"
                  "        last = (sp.cumsum(-1) < top_p[:, None]).sum(-1, keepdim=True).clamp(max=V - 1)\n"
                  "        kept = probs.masked_fill(probs < sp.gather(-1, last), 0.0)\n"
                  "        cdf = kept.cumsum(-1)\n"
                  "        return (cdf < uniform[:, None] * cdf[:, -1:]).sum(-1).clamp(max=V - 1).to(torch.int32)"),
            inputs=("[torch.randn(B, V, dtype=DTYPE, device='cuda') * 4, torch.rand(B, device='cuda') * 0.45 + 0.5,\n"
                    "            torch.rand(B, device='cuda')]"))

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        warp = variant.tag not in ("histogram_refine", "cdf_pick", "full_sort")
        vec = variant.tag == "vectorized_float4"
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        host = self._HOST_SORT if variant.tag == "full_sort" else self._HOST
        return (f"{cuda_prelude(task)}\n#define THREADS {params['threads']}\n{self._COMMON}"
                f"{block_incl_scan(task, warp)}{self._pick(bug if variant.tag != 'full_sort' else None, vec)}{body}\n{host}")

    _HOST = """
void top_p_sampling(const float* logits, const float* top_p, const float* uniform, int* tokens, int B, int V,
                    cudaStream_t stream) {
    top_p_kernel<<<B, THREADS, 0, stream>>>(logits, top_p, uniform, tokens, V);
}
"""
    _HOST_SORT = """
void top_p_sampling(const float* logits, const float* top_p, const float* uniform, int* tokens, int B, int V,
                    cudaStream_t stream) {
    int NP = 1;
    while (NP < V) NP <<= 1;                                   // bitonic sort needs a power of two
    uint32_t* scratch = nullptr;
    cudaMallocAsync((void**)&scratch, (size_t)B * NP * sizeof(uint32_t), stream);
    top_p_kernel<<<B, THREADS, 0, stream>>>(logits, top_p, uniform, tokens, V, NP, scratch);
    cudaFreeAsync(scratch, stream);
}
"""
    _COMMON = KEY_HELPERS + BLOCK_REDUCE + """// softmax statistics of a row: max M and Z = sum exp(x - M), online (rescale when the max grows)
__device__ __forceinline__ void row_stats(const float* row, int V, float* slots, float* M, float* Z) {
    float m = -INFINITY, s = 0.f;
    for (int i = threadIdx.x; i < V; i += THREADS) {
        const float x = row[i];
        if (x > m) { s *= expf(m - x); m = x; }
        s += expf(x - m);
    }
    *M = block_max(m, slots);
    *Z = block_sum(s * expf(m - *M), slots);
}
"""

    def _pick(self, bug, vec: bool) -> str:
        carry0 = "1.f" if bug == "wrong_init" else "0.f"
        if vec:
            load = """const int c = start + threadIdx.x;                          // 4 logits per thread
        const float4 x = c < V / 4 ? reinterpret_cast<const float4*>(row)[c] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        const float xs[4] = {x.x, x.y, x.z, x.w};
        float w[4], local = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) { w[j] = key_of(xs[j]) >= thresh ? expf(xs[j] - M) : 0.f; local += w[j]; }
        float total;
        float excl = carry + block_incl_scan(local, fbuf, &total) - local;
#pragma unroll
        for (int j = 0; j < 4; ++j) { if (w[j] > 0.f && excl < target) atomicMax(pick, 4 * c + j); excl += w[j]; }"""
            step = "V / 4"
        else:
            load = """const int i = start + threadIdx.x;
        const float x = i < V ? row[i] : -INFINITY;
        const float w = key_of(x) >= thresh ? expf(x - M) : 0.f;
        float total;
        const float incl = block_incl_scan(w, fbuf, &total);
        if (w > 0.f && carry + incl - w < target) atomicMax(pick, i);"""
            step = "V"
        return f"""
// Inverse CDF in vocabulary order over the kept tokens (key >= thresh): a running cumulative
// sum; the last kept token whose exclusive prefix is below target is the sample.
__device__ void cdf_pick_row(const float* row, int V, uint32_t thresh, float M, float target, float* fbuf, int* pick) {{
    float carry = {carry0};
    for (int start = 0; start < {step}; start += THREADS) {{
        {load}
        carry += total;
        if (carry >= target) break;                          // block-uniform: later tokens cannot win
    }}
    __syncthreads();
}}
"""

    _SELECT = """
struct Sel { uint32_t prefix, mask; float need, above, last; };   // mass still needed inside prefix
// Mass radix-select step: scanning bins from the top, find the bin where the kept mass reaches
// `need`. Each thread owns nbins / THREADS consecutive bins; a block scan finds the owner.
__device__ void select_bin_mass(const float* mass, int nbins, int shift, Sel* sel, float* fbuf) {
    const int per = nbins / THREADS;
    const float need = sel->need;
    float local = 0.f;
    for (int j = 0; j < per; ++j) local += mass[nbins - 1 - (threadIdx.x * per + j)];
    float total;
    const float incl = block_incl_scan(local, fbuf, &total);
    float acc = incl - local;
    const bool tail = threadIdx.x == THREADS - 1 && incl < need;       // rounding: mass ran out
    if ((acc < need && incl >= need) || tail) {
        for (int j = 0; j < per; ++j) {
            const int b = nbins - 1 - (threadIdx.x * per + j);
            if (acc + mass[b] >= need || (tail && j == per - 1)) {
                sel->prefix |= (uint32_t)b << shift;
                sel->mask |= (uint32_t)(nbins - 1) << shift;
                sel->need = need - acc;
                sel->above += acc;
                sel->last = mass[b];
                break;
            }
            acc += mass[b];
        }
    }
    __syncthreads();
}
"""

    def _full_sort(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "\n                __syncthreads();"
        top = "k < NP" if bug == "off_by_one" else "k <= NP"
        return f"""#define CHUNK {p['chunk']}

// compare-exchange of a descending bitonic sort; `up` (bit k of the global index) flips direction
#define CMPX(arr, i, j, up) {{ const int p_ = (i) ^ (j); if (p_ > (i)) {{ const uint32_t a_ = arr[i], b_ = arr[p_]; \\
    if ((up) == 0 ? a_ < b_ : a_ > b_) {{ arr[i] = b_; arr[p_] = a_; }} }} }}

// merge levels klo..khi restricted to strides < CHUNK: each CHUNK segment is sorted in shared memory
__device__ void smem_stages(uint32_t* keys, int NP, int klo, int khi, uint32_t* s) {{
    for (int base = 0; base < NP; base += CHUNK) {{
        for (int i = threadIdx.x; i < CHUNK; i += THREADS) s[i] = keys[base + i];
        __syncthreads();
        for (int k = klo; k <= khi; k <<= 1)
            for (int j = min(k, CHUNK) >> 1; j > 0; j >>= 1) {{
                for (int i = threadIdx.x; i < CHUNK; i += THREADS) CMPX(s, i, j, (base + i) & k);{sync}
            }}
        for (int i = threadIdx.x; i < CHUNK; i += THREADS) keys[base + i] = s[i];
        __syncthreads();
    }}
}}

extern "C" __global__ void __launch_bounds__(THREADS)
top_p_kernel(const float* __restrict__ logits, const float* __restrict__ top_p, const float* __restrict__ uniform,
             int* __restrict__ tokens, int V, int NP, uint32_t* __restrict__ scratch) {{
    __shared__ uint32_t s[CHUNK];
    __shared__ float fbuf[THREADS];
    __shared__ float slots[WARPS];
    __shared__ int pick;
    __shared__ uint32_t s_thresh;
    const float* row = logits + (size_t)blockIdx.x * V;
    uint32_t* keys = scratch + (size_t)blockIdx.x * NP;      // this block's private sort buffer
    float M, Z;
    row_stats(row, V, slots, &M, &Z);
    for (int i = threadIdx.x; i < NP; i += THREADS) keys[i] = i < V ? key_of(row[i]) : 0u;  // padding sorts last
    if (threadIdx.x == 0) {{ pick = -1; s_thresh = 0u; }}
    __syncthreads();
    smem_stages(keys, NP, 2, CHUNK, s);                      // every level up to CHUNK in shared memory
    for (int k = 2 * CHUNK; {top}; k <<= 1) {{
        for (int j = k >> 1; j >= CHUNK; j >>= 1) {{          // long strides: one pass over global memory each
            for (int i = threadIdx.x; i < NP; i += THREADS) CMPX(keys, i, j, i & k);
            __syncthreads();
        }}
        smem_stages(keys, NP, k, k, s);
    }}
    // walk the sorted probabilities: the first position whose cumulative mass reaches top_p * Z
    const float need = top_p[blockIdx.x] * Z;
    float carry = 0.f;
    for (int start = 0; start < V; start += THREADS) {{
        const int i = start + threadIdx.x;
        const float w = i < V ? expf(float_of_key(keys[i]) - M) : 0.f;
        float total;
        const float incl = block_incl_scan(w, fbuf, &total);
        if (i < V && carry + incl - w < need && (carry + incl >= need || i == V - 1)) s_thresh = keys[i];
        carry += total;
        if (carry >= need) break;
    }}
    __syncthreads();
    const uint32_t thresh = s_thresh;
    float kept = 0.f;                                        // kept keys are a prefix of the sorted row
    for (int i = threadIdx.x; i < V && keys[i] >= thresh; i += THREADS) kept += expf(float_of_key(keys[i]) - M);
    const float target = uniform[blockIdx.x] * block_sum(kept, slots);
    cdf_pick_row(row, V, thresh, M, target, fbuf, &pick);
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}"""

    def _histogram_refine(self, p, task, bug):
        need = "Z" if bug == "missing_scale" else "top_p[blockIdx.x] * Z"
        add = ("mass[(k >> SHIFT[d]) & (NBINS[d] - 1)] += expf(x - M);  // plain read-modify-write"
               if bug == "racy_update" else "atomicAdd(&mass[(k >> SHIFT[d]) & (NBINS[d] - 1)], expf(x - M));")
        return f"""{self._SELECT}
extern "C" __global__ void __launch_bounds__(THREADS)
top_p_kernel(const float* __restrict__ logits, const float* __restrict__ top_p, const float* __restrict__ uniform,
             int* __restrict__ tokens, int V) {{
    __shared__ float mass[2048];
    __shared__ float fbuf[THREADS];
    __shared__ float slots[WARPS];
    __shared__ Sel sel;
    __shared__ int pick;
    const float* row = logits + (size_t)blockIdx.x * V;
    float M, Z;
    row_stats(row, V, slots, &M, &Z);
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = {need}; sel.above = 0.f; pick = -1; }}
    {DIGITS}
    for (int d = 0; d < 3; ++d) {{            // each digit re-reads the row (L2 while it fits)
        for (int i = threadIdx.x; i < 2048; i += THREADS) mass[i] = 0.f;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < V; i += THREADS) {{
            const float x = row[i];
            const uint32_t k = key_of(x);
            if ((k & mask) == prefix) {add}
        }}
        __syncthreads();
        select_bin_mass(mass, NBINS[d], SHIFT[d], &sel, fbuf);
    }}
    // threshold = exact key of the boundary token; kept mass = mass above it + its own key's mass
    cdf_pick_row(row, V, sel.prefix, M, uniform[blockIdx.x] * (sel.above + sel.last), fbuf, &pick);
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}"""

    def _select_kernel(self, p, task, bug, mode: str) -> str:
        warp = mode != "smem"
        need = "Z" if bug == "missing_scale" else "top_p[blockIdx.x] * Z"
        plain = bug == "racy_update"

        def bump(b, w):
            return (f"mass[{b}] += {w}; ++cnt[{b}];  // plain read-modify-write" if plain else
                    f"atomicAdd(&mass[{b}], {w}); atomicAdd(&cnt[{b}], 1u);")
        if mode == "float4":
            pass1 = f"""const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int c = threadIdx.x; c < V / 4; c += THREADS) {{       // 16-byte loads, 4 logits per thread
        const float4 v = row4[c];
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
        for (int j = 0; j < 4; ++j) {{
            const uint32_t b = key_of(xs[j]) >> 21;
            {bump("b", "expf(xs[j] - float_of_key(b << 21))")}
            mx = fmaxf(mx, xs[j]);
        }}
    }}"""
            compact = """const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int c = threadIdx.x; c < V / 4; c += THREADS) {
            const float4 v = row4[c];
            const uint32_t ks[4] = {key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if ((ks[j] >> 21) == bin) ckey[atomicAdd(&n_c, 1u)] = ks[j];
        }"""
        else:
            pass1 = f"""for (int i = threadIdx.x; i < V; i += THREADS) {{
        const float x = row[i];
        const uint32_t b = key_of(x) >> 21;
        {bump("b", "expf(x - float_of_key(b << 21))")}
        mx = fmaxf(mx, x);
    }}"""
            if mode == "ballot":
                ballot, popc, lt = ballot_ops(task)
                shfl = "__shfl(base, 0)" if task.is_hip else "__shfl_sync(0xffffffffu, base, 0)"
                compact = f"""const int lane = threadIdx.x % WARP_SIZE;
        for (int start = 0; start < V; start += THREADS) {{     // warp-aggregated: one atomic per warp
            const int i = start + threadIdx.x;
            const uint32_t k = i < V ? key_of(row[i]) : 0u;
            const bool flag = i < V && (k >> 21) == bin;
            const auto bits = {ballot};
            unsigned base = 0u;
            if (lane == 0 && bits) base = atomicAdd(&n_c, (unsigned){popc}(bits));
            base = {shfl};
            if (flag) ckey[base + {popc}(bits & {lt})] = k;
        }}"""
            else:
                compact = """for (int i = threadIdx.x; i < V; i += THREADS) {
            const uint32_t k = key_of(row[i]);
            if ((k >> 21) == bin) ckey[atomicAdd(&n_c, 1u)] = k;
        }"""
        return f"""#define CAP {p['cap']}               // boundary-bin slots in shared memory
{self._SELECT}
extern "C" __global__ void __launch_bounds__(THREADS)
top_p_kernel(const float* __restrict__ logits, const float* __restrict__ top_p, const float* __restrict__ uniform,
             int* __restrict__ tokens, int V) {{
    __shared__ float mass[2048];
    __shared__ unsigned cnt[2048];
    __shared__ uint32_t ckey[CAP];
    __shared__ float fbuf[{'WARPS' if warp else 'THREADS'}];
    __shared__ float slots[WARPS];
    __shared__ Sel sel;
    __shared__ int pick;
    __shared__ unsigned n_c;
    const float* row = logits + (size_t)blockIdx.x * V;
    for (int i = threadIdx.x; i < 2048; i += THREADS) {{ mass[i] = 0.f; cnt[i] = 0u; }}
    if (threadIdx.x == 0) {{ pick = -1; n_c = 0u; }}
    __syncthreads();
    // pass 1 (DRAM): per 11-bit key bin, count and mass relative to the bin's lower edge, so a
    // single pass needs no row max (|x| < 256 keeps exp(x - edge) finite)
    float mx = -INFINITY;
    {pass1}
    __syncthreads();
    const float M = block_max(mx, slots);
    float z = 0.f;
    for (int b = threadIdx.x; b < 2048; b += THREADS)
        if (cnt[b]) {{ mass[b] *= expf(float_of_key((uint32_t)b << 21) - M); z += mass[b]; }}
    const float Z = block_sum(z, slots);
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = {need}; sel.above = 0.f; }}
    __syncthreads();
    select_bin_mass(mass, 2048, 21, &sel, fbuf);             // CDF over bins finds the boundary bin
    const uint32_t bin = sel.prefix >> 21;
    const bool in_smem = cnt[bin] <= CAP;                    // else refine straight from the row
    if (in_smem) {{
        // pass 2: only the boundary bin's keys are needed to pin the threshold down
        {compact}
    }}
    __syncthreads();
    const int n = in_smem ? (int)n_c : V;
    const int SHIFT[2] = {{10, 0}}, NBINS[2] = {{2048, 1024}};
    for (int d = 0; d < 2; ++d) {{
        for (int i = threadIdx.x; i < 2048; i += THREADS) mass[i] = 0.f;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < n; i += THREADS) {{
            const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
            if ((k & mask) == prefix) atomicAdd(&mass[(k >> SHIFT[d]) & (NBINS[d] - 1)], expf(float_of_key(k) - M));
        }}
        __syncthreads();
        select_bin_mass(mass, NBINS[d], SHIFT[d], &sel, fbuf);
    }}
    // pass 3: cumulative-sum pick over the kept tokens, early exit once the target is passed
    cdf_pick_row(row, V, sel.prefix, M, uniform[blockIdx.x] * (sel.above + sel.last), fbuf, &pick);
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}"""
