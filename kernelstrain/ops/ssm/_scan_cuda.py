"""The register-scan kernel shared by three selective_scan_cuda rungs (not an op module itself):
ITEMS steps per thread scanned in registers, a shuffle warp scan, warp totals through shared
memory, scalar or uint4 loads, optionally ROWS channels per block with B/C staged in smem.
"""

FIRST = "warp_tot[grp][w]"                      # the warp total combined at step w
BAD_FIRST = "warp_tot[grp][w + 1 < WPR ? w + 1 : w]"
BTERM = "dtv[i] * to_float(bv[i]) * uv[i]"      # the input term of the recurrence
NO_DT = "to_float(bv[i]) * uv[i]"


def warp_scan(task) -> str:
    """An inclusive shuffle scan of (a, b) pairs in the task's dialect."""
    shfl = task.dialect.shfl_up
    up = f"{shfl.format(v='v.x', o='o')}, {shfl.format(v='v.y', o='o')}"
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


def packed_io() -> tuple:
    """(load, bload, store) of the uint4 path with ITEMS / 8 uint4s of each input a thread: the
    loads of a chunk all issue before the first is used."""
    load = """Pack pu[ITEMS / 8], pd[ITEMS / 8], pz[ITEMS / 8];
#pragma unroll
        for (int q = 0; q < ITEMS / 8; ++q) {
            pu[q].u = live ? reinterpret_cast<const uint4*>(u + off + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
            pd[q].u = live ? reinterpret_cast<const uint4*>(delta + off + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
            pz[q].u = live ? reinterpret_cast<const uint4*>(z + off + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            uv[i] = to_float(pu[i / 8].h[i % 8]); dtv[i] = live ? softplus(to_float(pd[i / 8].h[i % 8]) + dbias) : 0.f;
            zv[i] = to_float(pz[i / 8].h[i % 8]);
        }"""
    bload = """Pack pb[ITEMS / 8], pc[ITEMS / 8];
#pragma unroll
            for (int q = 0; q < ITEMS / 8; ++q) {
                pb[q].u = live ? reinterpret_cast<const uint4*>(Bb + n * L + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
                pc[q].u = live ? reinterpret_cast<const uint4*>(Cb + n * L + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
            }
            const scalar_t* bv = reinterpret_cast<const scalar_t*>(pb); const scalar_t* cv = reinterpret_cast<const scalar_t*>(pc);"""
    store = """if (live) {
            Pack py[ITEMS / 8];
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) py[i / 8].h[i % 8] = from_float(yv[i] * silu(zv[i]));
#pragma unroll
            for (int q = 0; q < ITEMS / 8; ++q) reinterpret_cast<uint4*>(y + off + t0)[q] = py[q].u;
        }"""
    return load, bload, store


def register_scan(p, task, args: str, vec: bool, rows: int = 1, first: str = FIRST, x0: str = "0.f",
                  bterm: str = BTERM) -> str:
    """Kernel body shared by the register-scan rungs (scalar / uint4 loads, rows channels per block);
    first, x0 and bterm are the slots the rungs' bugs replace."""
    threads = p["threads"]
    items = p.get("items", 8) if vec else p["items"]
    stage_sync = "\n        __syncthreads();"
    aexp = "exp2f(dtv[i] * a2)" if vec else "expf(dtv[i] * a2)"
    a2 = "A[d * NSTATE + n] * LOG2E" if vec else "A[d * NSTATE + n]"
    if vec and items > 8:
        load, bload, store = packed_io()
    elif vec:
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
    kernel = f"""#define THREADS {threads}           // threads per channel
#define ROWS {rows}               // channels per block
#define ITEMS {items}             // consecutive steps per thread
#define CHUNK (THREADS * ITEMS)
#define WPR (THREADS / WARP_SIZE)  // warps per channel
{pack}{warp_scan(task)}
// Each thread scans ITEMS steps in registers, warps combine with shuffles, warps of a channel
// meet through one shared (a, b) pair each; the carried state chains the chunks.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS)
selective_scan_kernel({args}) {{
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
    if threads < task.gpu.warp:
        # a block narrower than the wavefront (32 threads on AMD's 64 lanes): one partial warp, whose last
        # live lane holds the warp's total
        kernel = kernel.replace("#define WPR (THREADS / WARP_SIZE)  // warps per channel", "#define WPR 1")
        kernel = kernel.replace("lane == WARP_SIZE - 1", "lane == THREADS - 1")
    return kernel

