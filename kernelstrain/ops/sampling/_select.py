"""Device helpers of the sampling kernels (not an op module itself): the block scans and the
radix-digit split both ops use, the count-based bin select, rank pick and candidate compaction of
topk, and the mass-based bin select, softmax row statistics, mass histogram pass, boundary-bin
compaction and inverse-CDF pick of top_p. Every piece needs THREADS and WARPS defined first.
"""
from ..base import Task

DIGITS = "const int SHIFT[3] = {21, 10, 0}, NBINS[3] = {2048, 2048, 1024};   // 11 + 11 + 10 key bits"


def block_incl_scan(task: Task, warp: bool) -> str:
    """CUDA block_incl_scan<T>(v, buf, total): Hillis-Steele in shared memory (buf[THREADS]), or with
    `warp` shuffle scans inside each warp and the warp totals through shared memory (buf[WARPS])."""
    if not warp:
        return """
// Block-wide inclusive scan in shared memory (Hillis-Steele): log2(THREADS) steps, 2 barriers each.
template <typename T>
__device__ __forceinline__ T block_incl_scan(T v, T* buf, T* total) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int o = 1; o < THREADS; o <<= 1) {
        const T add = threadIdx.x >= o ? buf[threadIdx.x - o] : T(0);
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    const T r = buf[threadIdx.x];
    *total = buf[THREADS - 1];
    __syncthreads();
    return r;
}
"""
    up = task.dialect.shfl_up.format(v="v", o="o")
    return f"""
// Block-wide inclusive scan: shuffle scan inside each warp, warp totals through shared memory.
template <typename T>
__device__ __forceinline__ T block_incl_scan(T v, T* warp_tot, T* total) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
#pragma unroll
    for (int o = 1; o < WARP_SIZE; o <<= 1) {{
        const T n = {up};
        if (lane >= o) v += n;
    }}
    if (lane == WARP_SIZE - 1) warp_tot[warp] = v;
    __syncthreads();
    T off = T(0), all = T(0);
    for (int w = 0; w < WARPS; ++w) {{ const T s = warp_tot[w]; off += w < warp ? s : T(0); all += s; }}
    __syncthreads();
    *total = all;
    return v + off;
}}
"""


# -- topk ----------------------------------------------------------------------------------
# the shared state of a block that selects a row's top K (digit histogram, scan buffer, candidates, pick)
SELECT_SHARED = """    __shared__ unsigned hist[2048];
    __shared__ unsigned ubuf[THREADS];
    __shared__ uint32_t ckey[KCAP];
    __shared__ int cidx[KCAP];
    __shared__ float slots[WARPS];
    __shared__ Sel sel;
    __shared__ unsigned count;
    __shared__ int pick;
"""

COUNT_SELECT = """
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

RANK_PICK = """
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


def topk_compact(task, mode: str) -> str:
    """topk pass 2: order-preserving compaction of keys >= bin_floor into ckey/cidx."""
    if mode == "ballot":
        d = task.dialect
        ballot, popc, lt = d.ballot.format(p="flag"), d.popc, d.lanes_below.format(lane="lane")
        return f"""        const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
        for (int start = 0; start < V; start += THREADS) {{
            const int i = start + threadIdx.x;
            const uint32_t k = i < V ? key_of(row[i]) : 0u;
            const bool flag = i < V && k >= bin_floor;
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
        return """        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int start = 0; start < V4; start += THREADS) {
            const int c = start + threadIdx.x;
            const float4 v = c < V4 ? row4[c] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            const uint32_t k[4] = {key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w)};
            unsigned cnt = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) cnt += k[j] >= bin_floor;
            unsigned total;
            unsigned pos = base + block_incl_scan(cnt, ubuf, &total) - cnt;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (k[j] >= bin_floor) { ckey[pos] = k[j]; cidx[pos] = 4 * c + j; ++pos; }
            base += total;
        }"""
    return """        for (int start = 0; start < V; start += THREADS) {
            const int i = start + threadIdx.x;
            const uint32_t k = i < V ? key_of(row[i]) : 0u;
            const unsigned flag = i < V && k >= bin_floor;
            unsigned total;
            const unsigned pos = base + block_incl_scan(flag, ubuf, &total) - flag;
            if (flag) { ckey[pos] = k; cidx[pos] = i; }
            base += total;
        }"""


# -- top_p ---------------------------------------------------------------------------------
ROW_STATS = """// softmax statistics of a row: max M and Z = sum exp(x - M), online (rescale when the max grows)
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

MASS_SELECT = """
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


def cdf_pick_row(carry0: str, vec: bool) -> str:
    """top_p's cdf_pick_row(): the inverse-CDF walk every rung ends with; `carry0` starts the running sum."""
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


def mass_pass(mode: str, plain: bool) -> str:
    """top_p pass 1: per 11-bit key bin, the count and the mass relative to the bin's edge;
    `plain` bumps them without atomics (the racy_update bug)."""
    def bump(b, w):
        return (f"mass[{b}] += {w}; ++cnt[{b}];  // plain read-modify-write" if plain else
                f"atomicAdd(&mass[{b}], {w}); atomicAdd(&cnt[{b}], 1u);")
    if mode == "float4":
        return f"""const float4* row4 = reinterpret_cast<const float4*>(row);
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
    return f"""for (int i = threadIdx.x; i < V; i += THREADS) {{
        const float x = row[i];
        const uint32_t b = key_of(x) >> 21;
        {bump("b", "expf(x - float_of_key(b << 21))")}
        mx = fmaxf(mx, x);
    }}"""


def bin_compact(task, mode: str) -> str:
    """top_p pass 2: the keys of the boundary bin into shared memory (ckey, n_c)."""
    if mode == "float4":
        return """const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int c = threadIdx.x; c < V / 4; c += THREADS) {
            const float4 v = row4[c];
            const uint32_t ks[4] = {key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if ((ks[j] >> 21) == bin) ckey[atomicAdd(&n_c, 1u)] = ks[j];
        }"""
    if mode == "ballot":
        d = task.dialect
        ballot, popc, lt = d.ballot.format(p="flag"), d.popc, d.lanes_below.format(lane="lane")
        shfl = d.shfl.format(v="base", o=0)
        return f"""const int lane = threadIdx.x % WARP_SIZE;
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
    return """for (int i = threadIdx.x; i < V; i += THREADS) {
            const uint32_t k = key_of(row[i]);
            if ((k >> 21) == bin) ckey[atomicAdd(&n_c, 1u)] = k;
        }"""
