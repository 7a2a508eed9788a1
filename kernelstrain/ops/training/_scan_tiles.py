"""The tile rungs of prefix_scan_cuda: reduce-then-scan (three launches) and the single-pass decoupled look-back,
which share the load, in-register scan and store of a thread's ITEMS 16-byte vectors of a tile."""
from ._block_reduce import block_sum, scan_helpers

SIG = ("extern \"C\" __global__ void __launch_bounds__(THREADS)\n"
       "prefix_scan_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int R, int C)")
NL = "\n"


# A look-back tile's instructions a thread, its lane idle or not (nvcc 13.0 -O3 sm_90a SASS of decoupled_lookback_src,
# the path of a row's first tile: 155 / 207 / 312 / 456 at bf16 ITEMS 1 / 2 / 4 / 8, 121 / 139 / 179 / 243 at fp32,
# alike at 128, 256 and 512 threads): the tile id's atomic, the loads, the in-register scan's convert and add of each
# value (a dependent chain), the block scan's shuffles and barriers, the pack and the stores. Where a tile is wider
# than the row (THREADS x VEC x ITEMS > C) its idle lanes run all of it on zeros, so the grid's instruction issue,
# not DRAM, sets the time: an H100 (docs/roomM_device_h100_m1/, R=4096 C=4096 bf16, tiles 4-16x the row) ran 512
# threads ITEMS 4 / 8 / 16 at 47.1 / 82.8 / 112.4 us and 1,024 threads ITEMS 8 at 140.8, where the roofline model
# (one row's bytes a block) put them at 45.4 / 58.7 / 74.5 / 59.7. TILE_ISSUE_EFF, the share of the SMs' fp32 lane
# slots the kernel issues in (its barriers and dependent adds stall it), fitted on those rows: 45.4 / 67.8 / 116.7 /
# 132.0 us. Elsewhere (a tile no wider than the row) the floor stays under the memory time.
#
# reduce_then_scan's rescan (pass 3) runs the same tile code less the atomic and the look-back (SASS, bf16 256 threads
# ITEMS 1 / 2 / 4 / 8: 169 / 219 / 325 / 535 to its EXIT) after pass 1's tile sums over the same tiles (109 / 130 /
# 176 / 268: TILE_SUM_*), one kernel after the other; the H100 rows above ran it at 128 / 256 / 512 threads ITEMS 8 at
# 70.8 / 73.1 / 101.7 us (tiles 2-8x the row; modelled 64.3 / 63.6 / 70.3 on the memory side, 108.3 at 512 with both
# passes' issue).
TILE_BASE_INSTRUCTIONS, TILE_VALUE_INSTRUCTIONS = 110, 5.5
TILE_SUM_BASE_INSTRUCTIONS, TILE_SUM_VALUE_INSTRUCTIONS = 85, 3
TILE_ISSUE_EFF = 0.45


# A look-back tile (any but its row's first) spins on its predecessors' status words before it stores; a row's first
# tile publishes and goes on. decoupled_lookback's calibration ceiling was fitted on rows of many tiles (8 to 1,024),
# so it carries the wait of tiles that all look back: a row of `tiles` tiles has a share 1 - 1/tiles of them.
# Stored rows (sim/device by tiles a row, decoupled_lookback, H100 unless named): 1 tile (the tile holds the row, or is
# wider): sim2 j1 bf16 1.267 (18 rows) / fp32 1.283 (6), j2 1.325 / 1.140, s40404 fp32 1.246, H200 s5151 bf16 1.268;
# 2 tiles 1.05-1.20; 4 tiles 0.95-1.11; 8-1,024 tiles 0.82-1.09 (measurements/h100_sim2_j1.json, h100_sim2_j2.json,
# h100_gpucheck_s40404.json, h200_gpucheck_s5151.json, scripts/simS_pool.py). LOOKBACK_WAIT: the wait over a tile's
# streaming time, from the one-tile rows' 1.27.
LOOKBACK_WAIT = 0.27


def lookback_share(tiles: int) -> float:
    """The memory side of a row of `tiles` look-back tiles against the fitted (many-tile) rung: every tile but the
    first waits LOOKBACK_WAIT of its streaming time."""
    return (1 + LOOKBACK_WAIT * (1 - 1 / tiles)) / (1 + LOOKBACK_WAIT)


def tile_issue_s(threads: int, values: int, gpu, passes: int = 1) -> float:
    """Launch.issue_s of a grid's `threads` tile threads of `values` values each (TILE_BASE_INSTRUCTIONS), with
    reduce_then_scan's tile sums before it (passes 2)."""
    instructions = TILE_BASE_INSTRUCTIONS + TILE_VALUE_INSTRUCTIONS * values
    if passes == 2:
        instructions += TILE_SUM_BASE_INSTRUCTIONS + TILE_SUM_VALUE_INSTRUCTIONS * values
    return threads * instructions / (gpu.peak("fp32") / 2 * TILE_ISSUE_EFF)


# a thread's ITEMS contiguous 16-byte vectors of tile (row base, offset j0): loaded and scanned in registers, then
# stored from the thread's exclusive prefix (reduce_then_scan's rescan and decoupled_lookback)
TILE_LOAD = """    float v[ITEMS][VEC], s = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        Pack in; in.u = make_uint4(0u, 0u, 0u, 0u);
        if (j0 + it * VEC < C) in.u = *reinterpret_cast<const uint4*>(x + base + j0 + it * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) { s += to_float(in.h[k]); v[it][k] = s; }
    }"""


def tile_store(offset: str) -> str:
    return f"""#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {{
        if (j0 + it * VEC >= C) break;
        Pack out;
#pragma unroll
        for (int k = 0; k < VEC; ++k) out.h[k] = from_float({offset} + v[it][k]);
        *reinterpret_cast<uint4*>(y + base + j0 + it * VEC) = out.u;
    }}"""


def reduce_then_scan_src(p, task, test="lane >= o", offset="before"):
    items = p["items"]
    return f"""#define ITEMS {items}                  // 16-byte vectors per thread
#define TILE (THREADS * VEC * ITEMS)
{scan_helpers(task, test)}{block_sum()}
// Pass 1: a block per tile of a row sums it (each item a coalesced THREADS * VEC stripe).
extern "C" __global__ void __launch_bounds__(THREADS)
tile_sum_kernel(const scalar_t* __restrict__ x, float* __restrict__ sums, int C) {{
    __shared__ float warp_totals[WARPS];
    const int tiles = (C + TILE - 1) / TILE, row = blockIdx.x / tiles;
    const scalar_t* xr = x + (size_t)row * C + (size_t)(blockIdx.x % tiles) * TILE;
    const int left = C - (blockIdx.x % tiles) * TILE;
    float s = 0.f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {{
        const int j = (it * THREADS + threadIdx.x) * VEC;
        if (j < left) {{
            Pack in; in.u = *reinterpret_cast<const uint4*>(xr + j);
#pragma unroll
            for (int k = 0; k < VEC; ++k) s += to_float(in.h[k]);
        }}
    }}
    s = block_sum(s, warp_totals);
    if (threadIdx.x == 0) sums[blockIdx.x] = s;
}}

// Pass 2: a block per row turns its tile sums into exclusive tile offsets, in place.
extern "C" __global__ void __launch_bounds__(THREADS)
tile_offsets_kernel(float* __restrict__ sums, int tiles) {{
    __shared__ float warp_sums[WARPS];
    float* sr = sums + (size_t)blockIdx.x * tiles;
    float carry = 0.f;
    for (int base = 0; base < tiles; base += THREADS) {{
        const int i = base + threadIdx.x;
        const float v = i < tiles ? sr[i] : 0.f;
        float total;
        const float before = carry + block_exclusive_scan(v, warp_sums, &total);
        if (i < tiles) sr[i] = {offset};
        carry += total;
    }}
}}

// Pass 3: every tile is scanned again (ITEMS contiguous vectors a thread, thread totals by
// shuffles) and starts from its row offset: no block waits for another.
{SIG.replace("int R, int C)", "int R, int C," + NL + "                   const float* __restrict__ offsets")}) {{
    __shared__ float warp_sums[WARPS];
    const int tiles = (C + TILE - 1) / TILE;
    const size_t base = (size_t)(blockIdx.x / tiles) * C;
    const int j0 = (blockIdx.x % tiles) * TILE + threadIdx.x * VEC * ITEMS;
{TILE_LOAD}
    float total;
    const float start = offsets[blockIdx.x] + block_exclusive_scan(s, warp_sums, &total);
{tile_store("start")}
}}

void prefix_scan(const scalar_t* x, scalar_t* y, int R, int C, cudaStream_t stream) {{
    const int tiles = (C + TILE - 1) / TILE;
    float* sums = nullptr;                  // [R, tiles] tile sums, then their exclusive offsets
    cudaMallocAsync((void**)&sums, (size_t)R * tiles * sizeof(float), stream);
    tile_sum_kernel<<<R * tiles, THREADS, 0, stream>>>(x, sums, C);
    tile_offsets_kernel<<<R, THREADS, 0, stream>>>(sums, tiles);
    prefix_scan_kernel<<<R * tiles, THREADS, 0, stream>>>(x, y, R, C, sums);
    cudaFreeAsync(sums, stream);
}}
"""


def decoupled_lookback_src(p, task, window="look - (WARP_SIZE - 1 - lane)", barrier="\n    __syncthreads();"):
    items, d = p["items"], task.dialect
    ballot, highest = d.ballot.format(p="pred"), f"(WARP_SIZE - 1 - {d.clz}(mask))"
    return f"""#define ITEMS {items}                  // 16-byte vectors per thread, contiguous
#define TILE (THREADS * VEC * ITEMS)
{scan_helpers(task)}
// Tile status word: flag in the high half, float bits in the low half, so one 64-bit store
// publishes both. 0 = not ready, 1 = tile aggregate only, 2 = inclusive prefix of the row.
enum : unsigned {{ NOT_READY = 0, AGGREGATE = 1, PREFIX = 2 }};
__device__ __forceinline__ void publish(unsigned long long* s, unsigned flag, float v) {{
    *reinterpret_cast<volatile unsigned long long*>(s) = ((unsigned long long)flag << 32) | __float_as_uint(v);
}}

// Single pass: tiles of every row are handed out in order by an atomic counter, so every
// predecessor is already running. A tile publishes its aggregate, warp 0 looks back over
// WARP_SIZE predecessors at a time until one has a full prefix, then publishes its own.
{SIG.replace("int R, int C)", "int R, int C," + NL + "                   unsigned long long* status, unsigned int* next_tile)")} {{
    __shared__ float warp_sums[WARPS];
    __shared__ float tile_prefix;
    __shared__ int tile_id;
    if (threadIdx.x == 0) tile_id = atomicAdd(next_tile, 1u);
    __syncthreads();
    const int t = tile_id, tiles_per_row = (C + TILE - 1) / TILE;
    const int row = t / tiles_per_row, first = t - t % tiles_per_row;   // first tile of this row
    const size_t base = (size_t)row * C;
    const int j0 = (t % tiles_per_row) * TILE + threadIdx.x * VEC * ITEMS;
{TILE_LOAD}
    float total;
    const float before = block_exclusive_scan(s, warp_sums, &total);
    if (threadIdx.x < WARP_SIZE) {{
        const int lane = threadIdx.x;
        float prefix = 0.f;
        if (t != first) {{
            if (lane == 0) publish(&status[t], AGGREGATE, total);
            for (int look = t - 1;; look -= WARP_SIZE) {{
                const int i = {window};
                unsigned long long word = (unsigned long long)PREFIX << 32;   // before the row: prefix 0
                if (i >= first)
                    do {{ word = *reinterpret_cast<volatile unsigned long long*>(&status[i]); }} while ((word >> 32) == NOT_READY);
                const bool pred = (word >> 32) == PREFIX;
                const {d.lane_mask_t} mask = {ballot};
                const float val = __uint_as_float((unsigned)word);
                if (mask) {{                                 // stop at the nearest full prefix
                    prefix += warp_sum(lane >= {highest} ? val : 0.f);
                    break;
                }}
                prefix += warp_sum(val);
            }}
        }}
        if (lane == 0) {{ publish(&status[t], PREFIX, prefix + total); tile_prefix = prefix; }}
    }}{barrier}
    const float offset = tile_prefix + before;
{tile_store("offset")}
}}

void prefix_scan(const scalar_t* x, scalar_t* y, int R, int C, cudaStream_t stream) {{
    const int tiles = R * ((C + TILE - 1) / TILE);
    unsigned long long* ws = nullptr;       // [tile counter | status of every tile], zeroed
    cudaMallocAsync((void**)&ws, (tiles + 1) * sizeof(unsigned long long), stream);
    cudaMemsetAsync(ws, 0, (tiles + 1) * sizeof(unsigned long long), stream);
    prefix_scan_kernel<<<tiles, THREADS, 0, stream>>>(x, y, R, C, ws + 1, reinterpret_cast<unsigned int*>(ws));
    cudaFreeAsync(ws, stream);
}}
"""
