"""Inclusive prefix sum over the rows of x [R, C] in CUDA (fp32 accumulation).

y[r, j] = x[r, 0] + ... + x[r, j], e.g. the cumulative probabilities of top-p sampling or token offsets. Ladder: one
thread walks a row -> Hillis-Steele in shared memory (n log n work) -> Blelloch up/down-sweep (work-efficient,
padded against bank conflicts) -> warp-shuffle scan over 16-byte vectors -> single pass with decoupled look-back:
tiles of every row spread over the whole GPU, each publishing its aggregate/prefix for its successors.
Between the last two, the classic multi-pass scan for rows too few to fill the GPU: reduce-then-scan (tile sums,
a scan of each row's tile sums, a rescan of every tile from its offset; three launches and a second read of x).
"""
from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar
from ..l2_reuse import reread_traffic
from ..occupancy import DRAM_LATENCY_S, UNPIPELINED_TRIP
from ..dialect import prelude
from ._block_reduce import block_sum, scan_helpers
from ._scan_items import warp_shuffle_items_src
from ._scan_tiles import SIG, decoupled_lookback_src, lookback_share, reduce_then_scan_src, tile_issue_s

THREADS = Param("threads", (128, 256, 512, 1024), 256)
NL, NO_BARRIER = "\n", {"barrier": ""}
CLEAR_ROOT = "\n        if (threadIdx.x == 0) tile[PAD(N - 1)] = 0.f;   // exclusive scan: identity at the root"

ENTRY = Entry("prefix_scan", (Arg("x", "in", ("R", "C")), Arg("y", "out", ("R", "C")), Scalar("R"), Scalar("C")))

def blocked(items: int) -> float:
    """The memory side's slowdown (Launch.narrow) of a tile kernel whose threads each load and store ITEMS
    contiguous 16-byte vectors (the blocked layout of decoupled_lookback and reduce_then_scan's rescan): a warp's
    load or store instruction spreads its 32 lanes 16 * ITEMS bytes apart, over 32 sectors and ITEMS times the
    lines of a coalesced one, and the registers of ITEMS x VEC partial sums cut the blocks an SM holds. An H100
    (scripts/roomM_device.py m1, docs/roomM_device_h100_m1/, bf16): reduce_then_scan at 256 threads ran items 1 /
    2 / 4 / 8 at 24.8 / 28.1 / 30.6 / 40.5 us (R=8 C=1M) and 23.9 / 27.6 / 30.3 / 39.9 (R=64 C=128256), 1.00 /
    1.14 / 1.25 / 1.65; decoupled_lookback at 512 threads items 4 / 8 / 16 at 28.4 / 36.7 / 44.2 (R=8 C=1M),
    26.5 / 35.4 / 41.5 (R=64), 47.1 / 82.8 / 112.4 (R=4096 C=4096), where a launch model of in-flight bytes alone
    put 8 and 16 ahead of 4 (21.0 / 20.2 against 22.2 us at R=8)."""
    return 1.0 + 0.09 * (items - 1)


def row_chain_trips(c: int, tile: int, e: int, threads: int, gpu) -> float:
    """sim.chain_floor_s's round trips of a block that walks its row tile after tile (warp_shuffle_scan): every
    tile's loads wait for the last tile's block scan, so a tile costs its bytes (read and written) at the rate one
    block streams on its SM (~1.02x the SM's share of DRAM bandwidth) or a DRAM round trip, whichever is longer, plus
    the shorter of the two where few warps cannot overlap them (all of it at 128 threads, an eighth at 1024). An
    H100 (docs/roomM_device_h100_m1/ and _m3/, bf16): 1024 threads items 1 / 2 / 4 ran R=8 C=1M at 159.8 / 159.2 /
    164.3 us (1.25 / 2.49 / 5.1 us a tile of 32 / 64 / 128 KB), 128 threads items 1 / 2 / 4 R=64 C=128256 at 106.2 /
    68.9 / 49.5 (0.85 / 1.1 / 1.55 us a tile of 4 / 8 / 16 KB); the roofline terms alone put R=8 at 86.6 us for
    163.1 (eight rows cover eight SMs, each as slow as R=1's one)."""
    lat = DRAM_LATENCY_S[gpu.vendor]
    stream = 2 * min(tile, c) * e / (1.02 * gpu.bw_tbs * 1e12 / gpu.sms)
    per_tile = max(lat, stream) + min(lat, stream) * min(1.0, 128 / threads)
    return cdiv(c, tile) * per_tile / (lat * UNPIPELINED_TRIP)


def launch_of(kind: str):
    """serial, hillis (log-step smem scan), blelloch, shuffle (uint4 + warp scan), rts (reduce-then-scan) or
    lookback."""
    def launch(p, task):
        r, c, e, gpu = task["R"], task["C"], DTYPE_BYTES[task.dtype], task.gpu
        threads, vec, items = p["threads"], 16 // e, p.get("items", 1)
        warps = cdiv(threads, gpu.warp)
        if kind == "serial":
            return Launch(grid=cdiv(r, threads), threads=threads, regs=32, bytes_per_access=32, traffic=2.0,
                          lane_util=min(1.0, r / threads))
        if kind == "hillis":
            return Launch(grid=r, threads=threads, smem_bytes=2 * threads * 4, regs=20, bytes_per_access=e,
                          compute_scale=1 / (threads.bit_length() - 1), lane_util=min(1.0, c / threads))
        if kind == "blelloch":
            return Launch(grid=r, threads=threads, smem_bytes=(2 * threads + 2 * threads // 32) * 4, regs=40,
                          bytes_per_access=e, lane_util=min(1.0, c / (2 * threads)))
        if kind == "shuffle":   # ITEMS vectors a thread: v[] registers; the block scan (~half a 1-vector tile) once a tile
            return Launch(grid=r, threads=threads, smem_bytes=warps * 4, regs=24 + (items - 1) * (vec + 4),
                          bytes_per_access=16 * items, compute_scale=2 / (1 + 1 / items),
                          lane_util=min(1.0, c / (threads * vec * items)),
                          serial_trips=row_chain_trips(c, threads * vec * items, e, threads, gpu))
        tile = threads * vec * items   # v[ITEMS][VEC] partial sums live across the block scan: past 32, a register each
        if kind == "rts":   # the rescan (pass 3) is the main kernel; pass 1 read x once before it (from L2 if it fits)
            reread = reread_traffic(1, r * c * e, gpu) - 1.0          # x is half the minimum bytes (x read, y written)
            return Launch(grid=r * cdiv(c, tile), threads=threads, smem_bytes=warps * 4,
                          regs=24 + 2 * items + max(0, items * vec - 32), bytes_per_access=16 * items,
                          traffic=1 + 0.5 * reread, narrow=blocked(items), lane_util=c / (cdiv(c, tile) * tile),
                          launches=3, issue_s=tile_issue_s(r * cdiv(c, tile) * threads, vec * items, gpu, passes=2))
        return Launch(grid=r * cdiv(c, tile), threads=threads, smem_bytes=warps * 4 + 8,
                      regs=24 + 2 * items + max(0, items * vec - 32), narrow=blocked(items) * lookback_share(cdiv(c, tile)),
                      bytes_per_access=16 * items, lane_util=c / (cdiv(c, tile) * tile), launches=2,
                      issue_s=tile_issue_s(r * cdiv(c, tile) * threads, vec * items, gpu))
    return launch


def several_tiles(task, params) -> bool:
    """Whether a row spans more than one look-back tile: where one tile holds a whole row every tile is its row's
    first, the look-back never runs and its prefix is 0, so a wrong window or a missing barrier (the other warps
    reading a stale tile_prefix, left 0 by the SM's last tile) cannot show: an H100 passed missing_barrier at
    R=16384 C=2048 bf16, 512 threads, items 2 (gpu-check seed 61717, 2026-12-06)."""
    return task["C"] > params["threads"] * (16 // DTYPE_BYTES[task.dtype]) * params["items"]


LOOKBACK_BUGS = (("missing_barrier", several_tiles), ("bad_combine_index", several_tiles))


def host(grid: str) -> str:
    return f"""
void prefix_scan(const scalar_t* x, scalar_t* y, int R, int C, cudaStream_t stream) {{
    prefix_scan_kernel<<<{grid}, THREADS, 0, stream>>>(x, y, R, C);
}}
"""


def serial_per_row_src(p, task, last="C"):
    return f"""
// One thread per row: the running sum is a serial dependency chain, and the lanes of a warp
// read addresses a whole row apart.
{SIG} {{
    const int r = blockIdx.x * THREADS + threadIdx.x;
    if (r >= R) return;
    const scalar_t* xr = x + (size_t)r * C;
    scalar_t* yr = y + (size_t)r * C;
    float s = 0.f;
    for (int j = 0; j < {last}; ++j) {{ s += to_float(xr[j]); yr[j] = from_float(s); }}
}}
{host("(R + THREADS - 1) / THREADS")}"""


def hillis_steele_smem_src(p, task, barrier="\n            __syncthreads();"):
    return f"""
// One block per row, THREADS elements per tile. Each step adds the value `offset` to the left,
// ping-ponging between two buffers: log2(THREADS) steps, THREADS * log2(THREADS) adds.
{SIG} {{
    __shared__ float buf[2][THREADS];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    float carry = 0.f;                               // sum of the row's earlier tiles
    for (int base = 0; base < C; base += THREADS) {{
        const int j = base + threadIdx.x;
        int cur = 0;
        buf[0][threadIdx.x] = j < C ? to_float(xr[j]) : 0.f;
        __syncthreads();
        for (int offset = 1; offset < THREADS; offset <<= 1) {{
            const float v = buf[cur][threadIdx.x];
            buf[cur ^ 1][threadIdx.x] = threadIdx.x >= offset ? v + buf[cur][threadIdx.x - offset] : v;
            cur ^= 1;{barrier}
        }}
        if (j < C) yr[j] = from_float(carry + buf[cur][threadIdx.x]);
        carry += buf[cur][THREADS - 1];
        __syncthreads();                              // buf[0] is refilled by the next tile
    }}
}}
{host("R")}"""


def blelloch_smem_src(p, task, barrier="\n        __syncthreads();", clear=CLEAR_ROOT):
    return f"""
#define N (2 * THREADS)                   // elements per tile, two per thread
#define PAD(i) ((i) + ((i) >> 5))         // one pad word per 32: tree strides stop hitting one bank

// One block per row. Up-sweep builds partial sums in a tree, down-sweep pushes prefixes
// back down: 2N adds per tile instead of N log N. Exclusive result + input = inclusive.
{SIG} {{
    __shared__ float tile[N + N / 32];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    float carry = 0.f;
    for (int base = 0; base < C; base += N) {{
        const int a = threadIdx.x, b = threadIdx.x + THREADS;
        const float xa = base + a < C ? to_float(xr[base + a]) : 0.f;
        const float xb = base + b < C ? to_float(xr[base + b]) : 0.f;
        tile[PAD(a)] = xa; tile[PAD(b)] = xb;
        int offset = 1;
        for (int d = N >> 1; d > 0; d >>= 1, offset <<= 1) {{     // up-sweep
            __syncthreads();
            if (threadIdx.x < d) {{
                const int i = offset * (2 * threadIdx.x + 1) - 1, k = offset * (2 * threadIdx.x + 2) - 1;
                tile[PAD(k)] += tile[PAD(i)];
            }}
        }}
        __syncthreads();
        const float tile_total = tile[PAD(N - 1)];
        __syncthreads();{clear}
        for (int d = 1; d < N; d <<= 1) {{                          // down-sweep
            offset >>= 1;{barrier}
            if (threadIdx.x < d) {{
                const int i = offset * (2 * threadIdx.x + 1) - 1, k = offset * (2 * threadIdx.x + 2) - 1;
                const float t = tile[PAD(i)];
                tile[PAD(i)] = tile[PAD(k)];
                tile[PAD(k)] += t;
            }}
        }}
        __syncthreads();
        if (base + a < C) yr[base + a] = from_float(carry + tile[PAD(a)] + xa);
        if (base + b < C) yr[base + b] = from_float(carry + tile[PAD(b)] + xb);
        carry += tile_total;
        __syncthreads();
    }}
}}
{host("R")}"""


def warp_shuffle_scan_src(p, task, init="0.f", test="lane >= o"):
    if p["items"] > 1:
        return warp_shuffle_items_src(p["items"], scan_helpers(task, test), SIG, host("R"), init)
    return f"""{scan_helpers(task, test)}
// One block per row, THREADS * VEC elements per tile: each thread scans its own 16-byte
// vector in registers, the thread totals are scanned with shuffles, warp totals via smem.
{SIG} {{
    __shared__ float warp_sums[WARPS];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    float carry = {init};
    for (int base = 0; base < C; base += THREADS * VEC) {{
        const int j = base + threadIdx.x * VEC;
        Pack in; in.u = make_uint4(0u, 0u, 0u, 0u);
        if (j < C) in.u = *reinterpret_cast<const uint4*>(xr + j);
        float v[VEC], s = 0.f;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ s += to_float(in.h[k]); v[k] = s; }}
        float total;
        const float before = carry + block_exclusive_scan(s, warp_sums, &total);
        if (j < C) {{
            Pack out;
#pragma unroll
            for (int k = 0; k < VEC; ++k) out.h[k] = from_float(before + v[k]);
            *reinterpret_cast<uint4*>(yr + j) = out.u;
        }}
        carry += total;
    }}
}}
{host("R")}"""


class PrefixScanCuda(OpModule):
    op, impl, family = "prefix_scan", "cuda", "training"
    title = "Inclusive prefix sum over rows"
    desc = "y[r, :] = cumsum(x[r, :]) along the contiguous last dim of [R, C]; fp32 accumulation."
    dims = {"R": "rows", "C": "row length (contiguous)"}
    shapes = ({"R": 1, "C": 128256}, {"R": 64, "C": 128256}, {"R": 256, "C": 32000},
              {"R": 4096, "C": 4096}, {"R": 16384, "C": 2048}, {"R": 8, "C": 1048576})
    dtypes = ("fp32", "bf16")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"R": 256, "C": 32000}
    tolerance = "scan"
    baseline = "hillis_steele_smem"     # a single thread per row leaves the GPU idle: not a starting point
    variants = (
        Rung("serial_per_row", "one thread scans a whole row", (Param("threads", (32, 64, 128), 64),),
             compute_eff=0.5, memory_eff=0.45, launch=launch_of("serial"), render=serial_per_row_src,
             bugs={"off_by_one": {"last": "C - 1"}}),
        Rung("hillis_steele_smem", "block per row, tiles scanned in double-buffered smem, log2 steps",
             (THREADS,), compute_eff=0.05, memory_eff=0.55, smem="static", launch=launch_of("hillis"),
             render=hillis_steele_smem_src, bugs={"missing_barrier": NO_BARRIER}),
        Rung("blelloch_smem", "block per row, work-efficient up/down-sweep on 2 x THREADS padded smem",
             (THREADS,), compute_eff=0.025, memory_eff=0.7, smem="static", launch=launch_of("blelloch"),
             render=blelloch_smem_src, bugs={"missing_barrier": NO_BARRIER, "wrong_init": {"clear": ""}}),
        Rung("warp_shuffle_scan", "block per row, 16-byte vectors, thread scan + __shfl_up_sync warp scan",
             (THREADS, Param("items", (1, 2, 4), 1)), compute_eff=0.15, memory_eff=0.86, smem="static", launch=launch_of("shuffle"),
             render=warp_shuffle_scan_src, bugs={"off_by_one": {"test": "lane > o"}, "wrong_init": {"init": "1.f"}}),
        Rung("reduce_then_scan", "three passes over tiles spread on the GPU: tile sums, row offsets, tile rescans",
             (Param("threads", (128, 256, 512), 256), Param("items", (1, 2, 4, 8), 2)),
             compute_eff=0.15, memory_eff=0.9, smem="static", launch=launch_of("rts"),
             render=reduce_then_scan_src,
             bugs={"off_by_one": {"test": "lane > o"}, "bad_combine_index": {"offset": "before + v"}}),
        Rung("decoupled_lookback", "one pass: dynamic tile ids, per-tile status flags, warp-wide look-back",
             (Param("threads", (128, 256, 512), 256), Param("items", (1, 2, 4, 8), 2)),
             compute_eff=0.15, memory_eff=0.9, smem="static", launch=launch_of("lookback"),
             render=decoupled_lookback_src,
             bugs={"bad_combine_index": {"window": "look - (WARP_SIZE - lane)"}, "missing_barrier": NO_BARRIER},
             bug_tasks=LOOKBACK_BUGS),
    )

    def cost(self, task: Task) -> Cost:
        r, c = task["R"], task["C"]
        return Cost(flops=r * c, bytes=2 * r * c * DTYPE_BYTES[task.dtype])

    torch_ref = TorchRef(body="return torch.cumsum(x.float(), dim=-1).to(x.dtype)",
        inputs="[torch.rand(R, C, dtype=DTYPE, device='cuda')]")

    def assemble(self, body, variant, params, task) -> str:
        return f"{prelude(task)}\n#define THREADS {params['threads']}\n{body}"
