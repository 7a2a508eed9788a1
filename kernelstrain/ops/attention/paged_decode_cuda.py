"""Paged-KV decode attention in CUDA (vLLM-style block table, grouped-query heads).

Ladder: one thread per (b, h) -> one warp per (b, h), lanes split D, warp-shuffle dot
products -> a block per (b, h) with 16-byte uint4 K/V loads and a shared-memory merge ->
split-KV over the sequence plus a combine kernel -> a block per (b, KV head) whose cp.async
double-buffered K/V tiles in shared memory serve every query head of the group. The first
three rungs' renders and the shared uint4 pieces live in _paged_vec.py.
"""
from dataclasses import replace

from .. import l2_reuse
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..occupancy import DRAM_LATENCY_S, UNPIPELINED_TRIP, blocks_per_sm
from ..dialect import prelude, shfl_xor_macro
from ._attn_check import cuda_check
from ._paged_vec import (ARGS, KEYS, PART, ROW, STAGES, STORE, combine, gqa_head, gqa_tiles, in_flight, load_q,
                         slots, split_host, thread_per_head_src, vec, vectorized_uint4_src, warp_shuffle_src)
from .paged_decode_spec import ENTRY, PagedDecodeSpec, cost_of

THREADS = Param("threads", (64, 128, 256), 128)
PARTITION = Param("partition", (256, 512, 1024), 512)
COMBINE = "((size_t)pair * num_parts + p)"
BAD_COMBINE = {"idx": "((size_t)pair + p)"}
# BAD_COMBINE reads partial p of a (b, h) pair at pair + p, not pair * num_parts + p: the same slot where the cache
# is one partition (num_parts = S / partition = 1: S 1024 at partition 1024), so it is offered where there are two
SPLIT_CACHE = (("bad_combine_index", lambda t, p: cdiv(t["S"], p["partition"]) > 1),)
# the missing_barrier bug reads the stage without waiting for its copies or for the other threads
STAGE_SYNC = ("        asm volatile(\"cp.async.wait_group @AHEAD@;\\n\" ::);  // all but the newest group have landed\n"
              "        __syncthreads();\n")


def reread(task) -> float:
    return (task["H"] // task["KVH"]) ** 0.65    # sibling query heads re-stream their KV head through L2 (measured)


def l2_bound(launch: Launch, task) -> Launch:
    """A block-per-query-head launch whose grid fills the GPU: the G = H / KVH sibling heads of a KV head stream
    it side by side (adjacent in the grid), DRAM serves it once and L2 G times, so the L2 -> SM stream binds where
    G x its cost passes one DRAM read (ops/l2_reuse.py); a grid under one full wave of resident blocks keeps
    the latency-bound re-read the fit was made with (reread): split_kv at B=1 (256 blocks, ~400 slots) ran 19.9-25.2 us
    on the H100 (fresh seed 95454), which a share of the L2 bound put at 12.4-15.6. Measured: vectorized_uint4 and split_kv at B=64 H=64
    KVH=8 S=4096 (G=8) ran as long on the H100 as on the H200 (651-780 us and 678-805, where their DRAM differs
    1.43x), which G ** 0.65 (3.9x on both cards) timed 1,366-1,379 us on the H100 (1.75-2.1x slow) and 954-964 on
    the H200; at G=4 (B=32 H=32 KVH=8 S=2048) the H100 ran vectorized_uint4 in 118-132 us, modelled 224-238 (the
    lead's H100 run of 2026-12-06 08:41); B=1 rows (32 blocks) stayed within 0.87-1.01x as they were."""
    bound = max(1.0, task["H"] // task["KVH"] * l2_reuse.l2_cost(task.gpu))
    wave = 1.0 if launch.grid >= l2_reuse.resident_slots(launch, task.gpu) else 0.0
    extra = launch.traffic - reread(task)                  # the split rung's fp32 partials
    return replace(launch, traffic=reread(task) - (reread(task) - bound) * wave + extra)


def thread_per_head_launch(p, task):
    b, h, d, t = task["B"], task["H"], task["D"], p["threads"]
    # every lane its own row: sector-sized pieces of one K and one V row in flight per lane
    return Launch(grid=cdiv(b * h, t), threads=t, regs=min(255, 40 + d), bytes_per_access=64,
                  traffic=1.1, lane_util=b * h / (cdiv(b * h, t) * t))


def warp_shuffle_launch(p, task):
    b, h, d, w, warp = task["B"], task["H"], task["D"], p["warps"], task.gpu.warp
    return Launch(grid=cdiv(b * h, w), threads=w * warp, regs=40, bytes_per_access=d // warp * DTYPE_BYTES[task.dtype],
                  traffic=reread(task), lane_util=b * h / (cdiv(b * h, w) * w))


def vectorized_launch(p, task):
    t, d = p["threads"], task["D"]
    return in_flight(Launch(grid=task["B"] * task["H"], threads=t, smem_bytes=(2 + d) * (t // (d // 8)) * 4, regs=72,
                            bytes_per_access=64, traffic=reread(task)), p)


# registers of the direct-load rungs by keys a step (ptxas 13.0 -v, sm_90a, bf16, D=128: 46-48 / 56-68 / 96-128 over
# 64-256 threads and both rungs; the shared model's 72 + 9 a key said 54 / 72 / 108): U=8 on 256 threads is 2 blocks an
# SM, not 3, and main_unroll's +8 (knobs.launch) takes it to 1 (ptxas: 157)
PTXAS_REGS = {2: 48, 4: 64, 8: 128}
# DRAM round trips (sim.chain_floor_s's unit, 0.715 us on the H100) a key step of vectorized_uint4's block waits, by
# keys a step: its loads, then its keys' shuffle-reduced dots and online update before the next step's loads issue. H100
# plan decode6 (measurements/h100_sim2_decode6.json, full-length contexts), B=16 H=KVH=8 S=4096 (128 blocks, one an
# SM): 4 keys on 64 / 128 (decode3) / 256 threads (256 / 128 / 64 steps) 413.1 / 206.7 / 106.6 us, 1.60 us a step past
# a 4.5 us floor; 2 keys (256 steps) 257.6, 0.99 us; 8 keys (64 steps) 104.7, 1.57 us. On 11 waves of 3 blocks an SM
# (B=64 H=64 KVH=8, 256 threads, 4 keys unrolled: 780.1 us on gpu-check's ragged contexts, ~1,000 at full length) a
# step took ~1.4 us: 4 / 8 keys take 2.0 round trips (1.43 us) between the two. One trip a step timed the one-an-SM
# rows at 0.52-1.0x, B=4 S=16384 (512 steps) 772.9 us at 369.7 (now 735.8). split_kv keeps one trip a step: its short
# partitions ran at that on many waves (B=32 S=2048 partition 256, 8 keys unrolled: 240.0 us; 2.2 trips a step put the
# held-out B=8 H=28 KVH=4 partition 256 / 512 rows of seed 62828 at 2.1x).
STEP_TRIPS = {2: 1.4, 4: 2.0, 8: 2.0}


def own_regs(launch: Launch, p, task, keys: int, trips=None) -> Launch:
    """ptxas's registers, and the block's chain of round trips (sim.chain_floor_s: the waves of resident blocks one
    after another): `trips` round trips a step of U keys a key slot (STEP_TRIPS; 1 where not given), then q's load,
    the merge's barrier and the store.
    H100 split_kv B=32 S=2048 256 threads, partition 256 (2 steps of 8 keys, 5 trips), main_unroll 2: 157 registers,
    one block an SM, 63 waves: 240.0 / 247.6 us (sim30b, seed 94141) where the roofline said 114 (4 keys: 140.9)."""
    u = p.get(KEYS.name, KEYS.default)
    steps = cdiv(keys, launch.threads // (task["D"] // 8) * u)
    return replace(launch, regs=PTXAS_REGS.get(u, launch.regs), serial_trips=steps * (trips or {}).get(u, 1) + 3)


def paged_vectorized_launch(p, task):
    """vectorized_launch with its siblings' re-reads bound by L2 (l2_bound; swa_decode_cuda keeps the plain one:
    its window's KV rows were not timed apart) and ptxas's registers."""
    return own_regs(l2_bound(vectorized_launch(p, task), task), p, task, task["S"], STEP_TRIPS)


def partials(p, task) -> tuple:
    """(partitions, fp32 partial traffic over the minimum bytes) of the split rungs."""
    parts = cdiv(task["S"], p["partition"])
    return parts, task["B"] * task["H"] * parts * (task["D"] + 2) * 4 * 2 / cost_of(task).bytes


# Round trips (sim.chain_floor_s's unit) a split launch (split_kv, gqa_cp_async: the partition kernel, then the
# combine kernel that waits for it) takes once whatever its waves: the partition kernel's start and first loads, its
# last wave's merge and partial stores, the combine kernel's loads of those partials. Read off the older H100 rows at
# B=1 H=32 KVH=8 S=4096 (full-length; measurements/h100_gpucheck_s40404, s95353, s96969, s97171, h100_sim2_decode3,
# decode6): split_kv, one wave of blocks of a few key steps (sim.chain_floor_s: steps + 3 trips) ran 19.0-26.9 us
# where those steps are 5.0-13.6 us, then one or four waves more (256 threads, partition 256: 19.5 / 21.8 / 27.6 us
# at 4 / 2 / 1 blocks an SM, 1 / 2 / 4 waves of 4.3-5 us); gqa_cp_async the same with its keys (GQA_KEY_TRIPS):
# 20.3-62.8 us over 64-512 keys a thread. Time = (SPLIT_ONCE + waves x a block's chain) trips + two launches' overhead
# fits both rungs within 0.9-1.1x but split_kv's main_unroll rows (one row in each direction: 18.2 and 25.2 us). The
# model before timed the waves alone: split_kv at 256 threads partition 256 11.7-11.9 us (0.42-0.61x), gqa 17.1-28.5
# by its tile count, where the device ran 16 to 64-key tiles level (21.5-22.6 us).
SPLIT_ONCE = 14.0


def split_floor(launch: Launch, task) -> Launch:
    """The launch with its once-only round trips (SPLIT_ONCE) before its waves' chains, as a floor (Launch.issue_s;
    the waves of resident blocks as this launch model's registers set them)."""
    waves = cdiv(launch.grid, task.gpu.sms * max(1, blocks_per_sm(launch, task.gpu)))
    trip = DRAM_LATENCY_S[task.gpu.vendor] * UNPIPELINED_TRIP
    return replace(launch, issue_s=max(launch.issue_s, (SPLIT_ONCE + waves * launch.serial_trips) * trip))


def split_kv_launch(p, task):
    t, d = p["threads"], task["D"]
    parts, extra = partials(p, task)
    smem = (2 + d) * (t // (d // 8)) * 4
    return split_floor(own_regs(l2_bound(in_flight(Launch(grid=task["B"] * task["H"] * parts, threads=t,
                                                          smem_bytes=smem, regs=72, bytes_per_access=64,
                                                          traffic=reread(task) + extra, launches=2), p), task),
                                p, task, p["partition"]), task)


# The G = H / KVH query heads of a block run their dot products and softmax over each staged tile while the cp.async
# ring copies the next one (one tile ahead), so a tile takes the longer of its copy and its heads' compute, the two
# smoothed: the stream's time x (1 + (G / G0) ** P) ** (1 / P) (GQA_OVERLAP; >= 1: time, not bytes). H100, plan decode3
# on the task's full-length contexts (measurements/h100_sim2_decode3.json), 128 threads, tile 32, B=16 KVH=8 S=4096:
# G 1 / 2 / 4 / 8 101.5 / 115.8 / 119.7 / 195.2 us (flat while the copy binds, 1.92x at G=8); G=7 (B=8 KVH=4 S=8192,
# 256 threads) 108.5 / 111.9. The term before (A + B x G = 0.5 + 0.11 G, clamped at 1 since its G=1 rows ran on
# gpu-check's ragged contexts, ~0.75 of the task's bytes) timed G 1-4 at 146-148 us (1.23-1.44x) and G=1 at B=16
# KVH=32 416 against 355.3.
GQA_OVERLAP = (5.0, 6)
# The stream at G=1: the prior the fit divides by this rung's ceiling (calibration/h200_fit.json: 2.07, fitted with
# the bare term's 0.61 at G=1), so 1.15 / 2.07 before the fit's other terms; the H100 ran the full-length G=1 caches
# at 0.79 (B=16 KVH=8, 268 MB in 101.5 us) and 0.90 (B=16 KVH=32) of its DRAM bandwidth.
GQA_STREAM_EFF = 1.15
# A block's chain where few blocks share the GPU (sim.chain_floor_s) is its thread rows' keys, one after another: a
# row (one query head of the group, one slice of the keys) reads its slice of each staged tile from shared memory,
# the 8-wide dots, the key group's shuffles and the online update, key after key, while the ring's copies run ahead
# of it; the tiles' count does not set it. Round trips a key of a row's slice (partition x G x D/8 / threads keys):
# the older H100 rows at B=1 H=32 KVH=8 S=4096 (G=4; split_floor's files) ran 64 / 128 / 256 / 512 keys a row in
# 19.7-21.6 / 23.7-30.6 / 34.3-40.1 / 58.2-62.8 us, at 16-, 32- and 64-key tiles alike (256 threads, partition 256:
# 21.6 at tile 16, 20.3 at 32); a fit of the four levels over SPLIT_ONCE + 3 trips: 0.123 a key (88 ns). The model
# before (2 round trips a tile, the table entries then the copy: GQA_TRIPS) timed tile 16 at 28.5 us, tile 64 at
# 16.9, and 128 threads ahead of 256.
GQA_KEY_TRIPS = 0.123


def gqa_trips(p, task) -> float:
    """Round trips of a gqa_cp_async block's chain: q's load, the merge and the store (3), and its rows' keys."""
    keys = p["partition"] * (task["H"] // task["KVH"]) * (task["D"] // 8) / p["threads"]
    return 3 + GQA_KEY_TRIPS * keys


def gqa_work(group: int) -> float:
    g0, power = GQA_OVERLAP
    return (1.0 + (group / g0) ** power) ** (1.0 / power)


def gqa_launch(p, task):
    """A block per (b, KV head, partition): its G query heads' compute over each staged tile overlaps the copy of
    the next (gqa_work)."""
    t, d, elt, tile_n = p["threads"], task["D"], DTYPE_BYTES[task.dtype], p["tile_n"]
    parts, extra = partials(p, task)
    smem = 2 * 2 * tile_n * d * elt + t // (d // 8) * (d + 2) * 4
    work = gqa_work(task["H"] // task["KVH"])
    return split_floor(in_flight(Launch(grid=task["B"] * task["KVH"] * parts, threads=t, smem_bytes=smem, regs=60,
                                        bytes_per_access=min(128, 2 * tile_n * d * elt // t), traffic=work + extra,
                                        launches=2, serial_trips=gqa_trips(p, task)),
                                 p, tile_bytes=2 * tile_n * d * elt), task)


def split_kv_src(p, task, idx=COMBINE, scale=" * scale"):
    return f"""
#define THREADS {p['threads']}
#define PARTITION {p['partition']}
{vec(u=p.get(KEYS.name, KEYS.default))}
// grid (B * H, partitions): each block reduces PARTITION tokens of one head to (m, l, acc).
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({ARGS},{PART}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
    const int len = seq_lens[b], lo = blockIdx.y * PARTITION;
    if (lo >= len) return;                          // past this sequence: the combine never reads it
    const int hi = min(lo + PARTITION, len);
{slots("lo", "hi", scale)}\
    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
{STORE.replace("@PAIR@", "pair")}{combine(idx)}""" + \
            split_host("dim3(batch * NUM_HEADS, num_parts)", "0")


def gqa_cp_async_src(p, task, sync=STAGE_SYNC, idx=COMBINE):
    return f"""
{gqa_head(p, 'tokens')}
// grid (B * KVH, partitions): K/V tiles of one KV head are staged once in smem and read by all GROUP
// query heads, so DRAM sees each KV byte once; cp.async keeps the next tile in flight meanwhile.
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({ARGS},{PART}) {{
    extern __shared__ uint4 smem[];              // [STAGES][K | V][TILE_CHUNKS], then ROWS merge rows
    float* merge = reinterpret_cast<float*>(smem + STAGES * 2 * TILE_CHUNKS);
    const int b = blockIdx.x / NUM_KV_HEADS, kvh = blockIdx.x % NUM_KV_HEADS;
    const int len = seq_lens[b], lo = blockIdx.y * PARTITION;
    if (lo >= len) return;
    const int hi = min(lo + PARTITION, len), ntiles = (hi - lo + TILE_N - 1) / TILE_N;
    const int chunk = threadIdx.x % LANES_PER_KEY, row = threadIdx.x / LANES_PER_KEY;
    const int g = row % GROUP, slice = row / GROUP;
    const int* table = block_table + (size_t)b * max_pages;
{load_q("(b * NUM_HEADS + kvh * GROUP + g)")}    float m = -INFINITY, l = 0.f;
    auto load_tile = [&](int tile, int stage) {{   // rows past hi repeat the last token; masked below
        uint4* ks = smem + stage * 2 * TILE_CHUNKS;
        for (int i = threadIdx.x; i < TILE_CHUNKS; i += THREADS) {{
            const size_t r = kv_row(table, min(lo + tile * TILE_N + i / LANES_PER_KEY, hi - 1), kvh) * HEAD_DIM;
            cp_async16(ks + i, reinterpret_cast<const uint4*>(k_cache + r) + i % LANES_PER_KEY);
            cp_async16(ks + TILE_CHUNKS + i, reinterpret_cast<const uint4*>(v_cache + r) + i % LANES_PER_KEY);
        }}
    }};
{gqa_tiles(sync, p.get(STAGES.name, STAGES.default))}        const float3 r = merge_rows(merge, gg, SLICES, GROUP, d);
{STORE.replace("@PAIR@", "b * NUM_HEADS + kvh * GROUP + gg")}{combine(idx)}""" + split_host(
            "dim3(batch * NUM_KV_HEADS, num_parts)", "SMEM_BYTES",
            "    cudaFuncSetAttribute(paged_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);\n")


class PagedDecodeCuda(PagedDecodeSpec):
    impl = "cuda"
    check_adapter = staticmethod(cuda_check(ENTRY, ("q", "k_cache", "v_cache", "block_table", "seq_lens")))
    variants = (
        Rung("thread_per_head", "one thread per (b, h) walks every token: scalar, uncoalesced, few threads",
             (Param("threads", (32, 64, 128), 64),), memory_eff=0.3, launch=thread_per_head_launch,
             render=thread_per_head_src, bugs={"half_accumulator": {"acc_t": "scalar_t"}, "missing_scale": {"scale": ""}}),
        Rung("warp_shuffle", "one warp per (b, h): lanes split D, the dot product reduced with shuffles",
             (Param("warps", (1, 2, 4, 8), 4),), memory_eff=0.6, launch=warp_shuffle_launch, render=warp_shuffle_src,
             bugs={"half_accumulator": {"acc_t": "scalar_t"}, "missing_scale": {"scale": ""}}),
        Rung("vectorized_uint4", "block per (b, h): D/8 lanes per key, uint4 K/V loads of U keys in flight, "
             "smem merge of the key slots", (THREADS, KEYS), memory_eff=0.85, smem="static", launch=paged_vectorized_launch,
             render=vectorized_uint4_src,
             bugs={"bad_combine_index": {"acc": "rows[first * STRIDE + d]"}, "missing_scale": {"scale": ""}}),
        Rung("split_kv", "grid also over sequence partitions; a combine kernel merges the partials",
             (THREADS, PARTITION, KEYS), memory_eff=0.9, smem="static", launch=split_kv_launch, render=split_kv_src,
             bugs={"bad_combine_index": BAD_COMBINE, "missing_scale": {"scale": ""}}, bug_tasks=SPLIT_CACHE),
        Rung("gqa_cp_async", "block per (b, KV head, partition): a cp.async ring of K/V tiles in smem "
             "shared by the whole query-head group", (Param("threads", (128, 256), 128),
             Param("tile_n", (16, 32, 64), 32), PARTITION, KEYS, STAGES), needs=frozenset({"cp_async", "inline_ptx"}),
             memory_eff=GQA_STREAM_EFF, smem="dynamic", launch=gqa_launch, render=gqa_cp_async_src,
             bugs={"missing_barrier": {"sync": ""}, "bad_combine_index": BAD_COMBINE}, bug_tasks=SPLIT_CACHE),
    )

    def assemble(self, body, variant, params, task) -> str:
        defs = (f"#define NUM_HEADS {task['H']}\n#define NUM_KV_HEADS {task['KVH']}\n#define GROUP (NUM_HEADS / "
                f"NUM_KV_HEADS)\n#define HEAD_DIM {task['D']}\n#define PAGE_SIZE {task['P']}\n")
        return prelude(task) + shfl_xor_macro(task) + defs + ROW + body
