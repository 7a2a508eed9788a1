"""Mamba selective scan forward in CUDA:
  dt = softplus(delta + delta_bias[d]);  x_t[n] = exp(dt * A[d, n]) * x_{t-1}[n] + dt * B[b, n, t] * u_t
  y_t = (sum_n C[b, n, t] * x_t[n] + Dskip[d] * u_t) * silu(z_t)
The recurrence is a scan with the associative operator (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2).

Ladder: one thread walks a whole channel sequentially -> block per channel, Hillis-Steele scan of
(a, b) pairs in shared memory per state -> items per thread scanned in registers + warp-shuffle
scan + cross-warp prefix (Mamba's structure) -> 16-byte vector loads/stores and exp2f ->
B/C chunk staged once in (dynamic) shared memory for ROWS channels of the block.
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from .selective_scan_spec import SelectiveScanSpec

THREADS = Param("threads", (64, 128, 256), 128)
ITEMS = Param("items", (4, 8, 16), 8)


class SelectiveScanCuda(SelectiveScanSpec):
    impl = "cuda"
    desc = ("Selective scan (Mamba S6) forward with delta softplus, D skip and z gating. u, delta, z, y: [B, D, L]; "
            "Bs, Cs: [B, N, L] (same dtype); A: [D, N] fp32; Dskip, delta_bias: [D] fp32. fp32 state and math. "
            "L a multiple of 16.")
    variants = (
        Variant("sequential_per_channel", "one thread per (batch, channel) walks all L steps, state in registers",
                (Param("threads", (32, 64, 128, 256), 128),), compute_eff=0.3, memory_eff=0.3,
                bugs=("wrong_init", "missing_scale")),
        Variant("chunked_smem_scan", "block per channel, one step per thread, Hillis-Steele (a, b) scan in smem",
                (Param("threads", (64, 128, 256, 512), 256),), compute_eff=0.35, memory_eff=0.6, smem="static",
                bugs=("off_by_one", "wrong_init")),
        Variant("warp_shuffle_scan", "ITEMS steps per thread in registers, __shfl_up_sync warp scan, warp prefixes",
                (THREADS, ITEMS), compute_eff=0.35, memory_eff=0.72, smem="static", bugs=("bad_combine_index", "wrong_init")),
        Variant("vectorized_regs", "uint4 loads of u/delta/z/B/C (8 steps), exp2f with log2e folded into A",
                (THREADS,), compute_eff=0.4, memory_eff=0.85, smem="static", bugs=("missing_scale", "wrong_init")),
        Variant("smem_bc_multi_channel", "B/C chunk staged once in dynamic smem and shared by ROWS channels",
                (Param("threads", (64, 128, 256), 64), Param("rows", (1, 2, 4, 8), 4)), compute_eff=0.45,
                memory_eff=0.9, smem="dynamic", bugs=("bad_combine_index", "missing_scale")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, l, d, n, elt = task["B"], task["L"], task["D"], task["N"], DTYPE_BYTES[task.dtype]
        threads = params["threads"]
        warps = cdiv(threads, task.gpu.warp)
        if variant.tag == "sequential_per_channel":
            # lanes walk rows L apart: every load touches 32 lines, L1 thrashes between steps
            return Launch(grid=cdiv(b * d, threads), threads=threads, regs=40 + 2 * n, bytes_per_access=elt,
                          traffic=1.8, lane_util=min(1.0, b * d / threads))
        if variant.tag == "chunked_smem_scan":
            steps = (threads - 1).bit_length()
            return Launch(grid=b * d, threads=threads, smem_bytes=8 * threads * (1 + n), regs=32 + n,
                          bytes_per_access=elt, compute_scale=2.0 / (2 + steps), lane_util=min(1.0, l / threads))
        items = params.get("items", 8)
        chunk = threads * items
        util = l / (cdiv(l, chunk) * chunk)
        if variant.tag == "warp_shuffle_scan":
            # B/C are re-read by every channel (from L2); per-item scalar loads
            return Launch(grid=b * d, threads=threads, smem_bytes=8 * warps, regs=min(255, 40 + n + 5 * items),
                          bytes_per_access=elt * min(items, 2), compute_scale=0.75, lane_util=util)
        if variant.tag == "vectorized_regs":
            return Launch(grid=b * d, threads=threads, smem_bytes=8 * warps, regs=40 + n + 40,
                          bytes_per_access=16, compute_scale=0.85, lane_util=util)
        rows = params["rows"]
        return Launch(grid=cdiv(b * d, rows), threads=threads * rows,
                      smem_bytes=2 * n * threads * 8 * elt + 8 * warps * rows, regs=40 + n + 40,
                      bytes_per_access=16, compute_scale=1.0 - 0.25 / rows, lane_util=util)

    def signature(self, task: Task) -> str:
        return ("void selective_scan_fwd(const scalar_t* u, const scalar_t* delta, const float* A, const scalar_t* Bs, "
                "const scalar_t* Cs, const float* Dskip, const scalar_t* z, const float* delta_bias, scalar_t* y, "
                "int B, int D, int L, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    _ARGS = ("const scalar_t* __restrict__ u, const scalar_t* __restrict__ delta, const float* __restrict__ A,\n"
             "                      const scalar_t* __restrict__ Bs, const scalar_t* __restrict__ Cs, "
             "const float* __restrict__ Dskip,\n                      const scalar_t* __restrict__ z, "
             "const float* __restrict__ delta_bias, scalar_t* __restrict__ y, int Bsz, int D, int L")

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body, grid, block, smem = getattr(self, "_" + variant.tag)(params, task, bug)
        attr = (f"\n    cudaFuncSetAttribute(selective_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});"
                if variant.smem == "dynamic" else "")
        return f"""{cuda_prelude(task)}
#define NSTATE {task['N']}
#define LOG2E 1.4426950408889634f

__device__ __forceinline__ float softplus(float v) {{ return v <= 20.f ? log1pf(expf(v)) : v; }}
__device__ __forceinline__ float silu(float v) {{ return v / (1.f + expf(-v)); }}
// scan operator: apply p (earlier steps) then q (later): (a_p a_q, a_q b_p + b_q)
__device__ __forceinline__ float2 combine(float2 p, float2 q) {{ return make_float2(p.x * q.x, q.x * p.y + q.y); }}
{body}
void selective_scan_fwd(const scalar_t* u, const scalar_t* delta, const float* A, const scalar_t* Bs,
                        const scalar_t* Cs, const float* Dskip, const scalar_t* z, const float* delta_bias,
                        scalar_t* y, int B, int D, int L, cudaStream_t stream) {{{attr}
    selective_scan_kernel<<<{grid}, {block}, {smem if variant.smem == "dynamic" else 0}, stream>>>(u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, B, D, L);
}}
"""

    def _sequential_per_channel(self, p, task, bug):
        x0 = "1.f" if bug == "wrong_init" else "0.f"
        bterm = "to_float(Bb[n * L + t]) * ut" if bug == "missing_scale" else "dt * to_float(Bb[n * L + t]) * ut"
        return f"""#define THREADS {p['threads']}

// One thread owns one (batch, channel) row and walks it in time order; x[] is the SSM state.
extern "C" __global__ void __launch_bounds__(THREADS)
selective_scan_kernel({self._ARGS}) {{
    const int row = blockIdx.x * THREADS + threadIdx.x;       // b * D + d
    if (row >= Bsz * D) return;
    const int b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float a[NSTATE], x[NSTATE];
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) {{ a[n] = A[d * NSTATE + n]; x[n] = {x0}; }}
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int t = 0; t < L; ++t) {{
        const float dt = softplus(to_float(delta[off + t]) + dbias);
        const float ut = to_float(u[off + t]);
        float yt = dskip * ut;
#pragma unroll
        for (int n = 0; n < NSTATE; ++n) {{
            x[n] = expf(dt * a[n]) * x[n] + {bterm};
            yt += to_float(Cb[n * L + t]) * x[n];
        }}
        y[off + t] = from_float(yt * silu(to_float(z[off + t])));
    }}
}}
""", f"(B * D + {p['threads']} - 1) / {p['threads']}", str(p["threads"]), 0

    def _chunked_smem_scan(self, p, task, bug):
        x0 = "1.f" if bug == "wrong_init" else "0.f"
        prev = "sc[threadIdx.x - o + 1]" if bug == "off_by_one" else "sc[threadIdx.x - o]"
        return f"""#define THREADS {p['threads']}

// Block per (batch, channel); each chunk puts one time step on each thread and, for every state
// n, runs a Hillis-Steele scan of (a, b) pairs through shared memory: 2 barriers per step.
extern "C" __global__ void __launch_bounds__(THREADS)
selective_scan_kernel({self._ARGS}) {{
    __shared__ float2 sc[THREADS];
    __shared__ float sB[NSTATE][THREADS], sC[NSTATE][THREADS];
    const int row = blockIdx.x, b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float carry[NSTATE];                                       // state at the end of the previous chunk
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) carry[n] = {x0};
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int c0 = 0; c0 < L; c0 += THREADS) {{
        const int t = c0 + threadIdx.x;
        const bool live = t < L;
        const float dt = live ? softplus(to_float(delta[off + t]) + dbias) : 0.f;
        const float ut = live ? to_float(u[off + t]) : 0.f;
        for (int n = 0; n < NSTATE; ++n) {{                    // coalesced along t
            sB[n][threadIdx.x] = live ? to_float(Bb[n * L + t]) : 0.f;
            sC[n][threadIdx.x] = live ? to_float(Cb[n * L + t]) : 0.f;
        }}
        float yt = dskip * ut;
        for (int n = 0; n < NSTATE; ++n) {{
            float2 e = make_float2(live ? expf(dt * A[d * NSTATE + n]) : 1.f, dt * sB[n][threadIdx.x] * ut);
            sc[threadIdx.x] = e;
            __syncthreads();
            for (int o = 1; o < THREADS; o <<= 1) {{
                const float2 before = threadIdx.x >= o ? {prev} : make_float2(1.f, 0.f);
                __syncthreads();
                e = combine(before, e);
                sc[threadIdx.x] = e;
                __syncthreads();
            }}
            yt += sC[n][threadIdx.x] * (e.x * carry[n] + e.y);
            const float2 last = sc[THREADS - 1];
            carry[n] = last.x * carry[n] + last.y;
            __syncthreads();                                   // everyone read sc before the next state
        }}
        if (live) y[off + t] = from_float(yt * silu(to_float(z[off + t])));
    }}
}}
""", "B * D", str(p["threads"]), 0

    def _warp_scan(self, task) -> str:
        up = ("__shfl_up(v.x, o), __shfl_up(v.y, o)" if task.is_hip else
              "__shfl_up_sync(0xffffffffu, v.x, o), __shfl_up_sync(0xffffffffu, v.y, o)")
        return f"""
// inclusive warp scan of (a, b) pairs with shuffles; also returns the exclusive value
__device__ __forceinline__ float2 warp_scan(float2 v, float2* excl) {{
    const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
    for (int o = 1; o < WARP_SIZE; o <<= 1) {{
        const float2 p = make_float2({up});
        if (lane >= o) v = combine(p, v);
    }}
    const float2 p = make_float2({up.replace(", o)", ", 1)")});
    *excl = lane == 0 ? make_float2(1.f, 0.f) : p;
    return v;
}}
"""

    def _register_scan(self, p, task, bug, vec: bool, rows: int = 1):
        """Kernel body shared by the register-scan rungs (scalar / uint4 loads, rows channels per block)."""
        threads = p["threads"]
        items = 8 if vec else p["items"]
        first = "warp_tot[grp][w]" if bug != "bad_combine_index" else "warp_tot[grp][w + 1 < WPR ? w + 1 : w]"
        x0 = "1.f" if bug == "wrong_init" else "0.f"
        stage_sync = "\n        __syncthreads();"
        bterm = "to_float(bv[i]) * uv[i]" if bug == "missing_scale" else "dtv[i] * to_float(bv[i]) * uv[i]"
        aexp = "exp2f(dtv[i] * a2)" if vec else "expf(dtv[i] * a2)"
        a2 = "A[d * NSTATE + n] * LOG2E" if vec else "A[d * NSTATE + n]"
        if vec:
            load = """Pack pu, pd, pz;
        pu.u = live ? *reinterpret_cast<const uint4*>(u + off + t0) : make_uint4(0u, 0u, 0u, 0u);
        pd.u = live ? *reinterpret_cast<const uint4*>(delta + off + t0) : make_uint4(0u, 0u, 0u, 0u);
        pz.u = live ? *reinterpret_cast<const uint4*>(z + off + t0) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            uv[i] = to_float(pu.h[i]); dtv[i] = live ? softplus(to_float(pd.h[i]) + dbias) : 0.f; zv[i] = to_float(pz.h[i]);
        }"""
            if rows > 1 or p.get("rows"):
                bload = """Pack pb, pc;
            pb.u = *reinterpret_cast<const uint4*>(&sBC[n][tid * ITEMS]);
            pc.u = *reinterpret_cast<const uint4*>(&sBC[NSTATE + n][tid * ITEMS]);
            const scalar_t* bv = pb.h; const scalar_t* cv = pc.h;"""
            else:
                bload = """Pack pb, pc;
            pb.u = live ? *reinterpret_cast<const uint4*>(Bb + n * L + t0) : make_uint4(0u, 0u, 0u, 0u);
            pc.u = live ? *reinterpret_cast<const uint4*>(Cb + n * L + t0) : make_uint4(0u, 0u, 0u, 0u);
            const scalar_t* bv = pb.h; const scalar_t* cv = pc.h;"""
            store = """if (live) {
            Pack py;
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) py.h[i] = from_float(yv[i] * silu(zv[i]));
            *reinterpret_cast<uint4*>(y + off + t0) = py.u;
        }"""
        else:
            load = """#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const bool ok = t0 + i < L;
            uv[i] = ok ? to_float(u[off + t0 + i]) : 0.f;
            dtv[i] = ok ? softplus(to_float(delta[off + t0 + i]) + dbias) : 0.f;
            zv[i] = ok ? to_float(z[off + t0 + i]) : 0.f;
        }"""
            bload = """scalar_t bv[ITEMS], cv[ITEMS];
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                bv[i] = t0 + i < L ? Bb[n * L + t0 + i] : from_float(0.f);
                cv[i] = t0 + i < L ? Cb[n * L + t0 + i] : from_float(0.f);
            }"""
            store = """#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (t0 + i < L) y[off + t0 + i] = from_float(yv[i] * silu(zv[i]));"""
        stage = ""
        if rows > 1 or p.get("rows"):
            stage = """
        // the block's channels share one batch: stage this chunk of B and C once, 16 bytes a thread
        for (int v = threadIdx.x; v < 2 * NSTATE * CHUNK / 8; v += THREADS * ROWS) {
            const int r = v / (CHUNK / 8), c = (v % (CHUNK / 8)) * 8, n = r % NSTATE;
            const scalar_t* src = (r < NSTATE ? Bb : Cb) + (size_t)n * L + c0 + c;
            *reinterpret_cast<uint4*>(&sBC[r][c]) = c0 + c < L ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
        }""" + stage_sync
        smem_decl = "    extern __shared__ __align__(16) scalar_t sBC_raw[];\n    scalar_t (*sBC)[CHUNK] = reinterpret_cast<scalar_t (*)[CHUNK]>(sBC_raw);   // [2N][CHUNK]\n" if stage else ""
        pack = "union Pack { uint4 u; scalar_t h[8]; };\n" if vec else ""
        return f"""#define THREADS {threads}           // threads per channel
#define ROWS {rows}               // channels per block
#define ITEMS {items}             // consecutive steps per thread
#define CHUNK (THREADS * ITEMS)
#define WPR (THREADS / WARP_SIZE)  // warps per channel
{pack}{self._warp_scan(task)}
// Each thread scans ITEMS steps in registers, warps combine with shuffles, warps of a channel
// meet through one shared (a, b) pair each; the carried state chains the chunks.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS)
selective_scan_kernel({self._ARGS}) {{
{smem_decl}    __shared__ float2 warp_tot[ROWS][WPR];
    const int grp = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int lane = tid % WARP_SIZE, warp = tid / WARP_SIZE;
    const int row = blockIdx.x * ROWS + grp, b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float carry[NSTATE];
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) carry[n] = {x0};
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int c0 = 0; c0 < L; c0 += CHUNK) {{
        const int t0 = c0 + tid * ITEMS;
        const bool live = t0 < L;
        float uv[ITEMS], dtv[ITEMS], zv[ITEMS], yv[ITEMS];
        {load}{stage}
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) yv[i] = dskip * uv[i];
        for (int n = 0; n < NSTATE; ++n) {{
            const float a2 = {a2};
            {bload}
            float2 e[ITEMS];
            float2 acc = make_float2(1.f, 0.f);
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {{ acc = combine(acc, make_float2({aexp}, {bterm})); e[i] = acc; }}
            float2 wex;
            const float2 winc = warp_scan(acc, &wex);
            if (lane == WARP_SIZE - 1) warp_tot[grp][warp] = winc;
            __syncthreads();
            float2 pre = make_float2(1.f, 0.f), tot = make_float2(1.f, 0.f);
            for (int w = 0; w < WPR; ++w) {{
                const float2 s = {first};
                if (w < warp) pre = combine(pre, s);
                tot = combine(tot, s);
            }}
            __syncthreads();                                   // warp_tot is rewritten for the next state
            const float2 ex = combine(pre, wex);               // everything before this thread's first step
            const float s_in = ex.x * carry[n] + ex.y;
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) yv[i] += to_float(cv[i]) * (e[i].x * s_in + e[i].y);
            carry[n] = tot.x * carry[n] + tot.y;
        }}
        {store}{chr(10) + "        __syncthreads();                                   // sBC is refilled next chunk" if stage else ""}
    }}
}}
"""

    def _warp_shuffle_scan(self, p, task, bug):
        return self._register_scan(p, task, bug, vec=False), "B * D", str(p["threads"]), 0

    def _vectorized_regs(self, p, task, bug):
        return self._register_scan(p, task, bug, vec=True), "B * D", str(p["threads"]), 0

    def _smem_bc_multi_channel(self, p, task, bug):
        smem = 2 * task["N"] * p["threads"] * 8 * DTYPE_BYTES[task.dtype]
        return (self._register_scan(p, task, bug, vec=True, rows=p["rows"]), f"B * D / {p['rows']}",
                f"{p['threads'] * p['rows']}", smem)
