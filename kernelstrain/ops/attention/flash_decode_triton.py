"""Decode attention in Triton: one query token per (batch, head) over a contiguous KV cache.

Ladder: one key per loop iteration -> [BLOCK_N, D] key tiles with a two-pass softmax ->
single-pass online softmax -> next tile prefetched into registers -> split-KV
(flash-decoding) with a separate combine kernel.
"""
from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr
from ..norms._norms import triton_spill
from ..occupancy import DRAM_LATENCY_S
from . import _kv_pipeline as kv_pipeline
from ._attn_check import HALF, triton_check
from ._flash_tiles import split_weights
from .flash_decode_spec import ENTRY, FlashDecodeSpec, cost_of

WARPS = Param("num_warps", (2, 4, 8), 4)
BLOCK_N = Param("BLOCK_N", (16, 32, 64, 128), 64)
# The single-pass rungs that prefetch nothing (online_softmax, split_kv) take 256-key tiles (room_table, kernelinfer
# seed 5151: their best at BLOCK_N 128, the list's end, in 7 of 12 sessions): half the trips, each a [256, D] tile
# of 64-256 values a thread (40 + 0.5 a value: no spill at 4 and 8 warps; at 2 warps D=128 the register file spills,
# which tile_launch charges). H100 (plan decode6, measurements/h100_sim2_decode6.json), online_softmax 2 warps bf16:
# B=16 H=16 S=1024 D=64 256 keys 30.3 us against 128's 66.0 (modelled 25.3 / 32.0), B=32 H=32 S=4096 D=128 945.6 against
# 734.1 (modelled 1497.2 / 710.4: the spill's loss, over-stated). register_prefetch stays at 128 (a prefetch doubles
# what spills). Checked: scripts/roomA_interpret_room.py (TRITON_INTERPRET=1), scripts/roomA_compile_room.py.
WIDE_BLOCK_N = Param("BLOCK_N", (16, 32, 64, 128, 256), 64)
# split_kv stops at 128 keys (roomT): the H100 ran 256 slower at both shapes of plan a10 (roomA j2), the model ahead:
# B=1 H=32 S=4096 D=128 38.9 us against 34.1 (modelled 25.8 / 28.5), B=16 H=16 S=1024 D=64 33.0 / 31.7 (26.2 / 29.5)
SPLIT_BLOCK_N = Param("BLOCK_N", (32, 64, 128), 64)
LOG2E = 1.4426950408889634


def key_launch(p, task):
    # a D-row spread over the program: a few bytes per lane; the compiler hoists the next trip's
    # K row over this trip's reduction, so about two rows per lane are in flight (H200: 2.26 ms at B=32)
    d, threads = task["D"], p["num_warps"] * task.gpu.warp
    return Launch(grid=task["B"] * task["H"], threads=threads, regs=32,
                  bytes_per_access=max(4, 2 * d * DTYPE_BYTES[task.dtype] // threads), lane_util=min(1.0, d / threads))


TRIP_WARP_S, TRIP_VALUE_S = 0.245e-6, 0.015e-6


def trip_chain(p, task, prefetch: bool, passes: float, block_n: int = 0, waits: float | None = None) -> float:
    """DRAM round trips (sim.chain_floor_s's unit) a program's tile loop takes in turn: each trip's dot, exp and
    cross-warp sums issue one after another on the program's few warps (TRIP_WARP_S a warp for the reductions'
    barriers: a D-long partial a warp, so x D / 128; TRIP_VALUE_S a tile value a thread), and a tile loaded in the trip (not prefetched, not pipelined)
    waits ~1.8 round trips more (its K, then its V). H100, B=1 H=32 S=4096 D=128 (32 programs, one an SM; sim30):
    register_prefetch BLOCK_N 32 / 64 on 4 warps 187.0 / 124.0 us (1.46 / 1.94 us a trip), 64 on 8 warps 154.0
    (2.4), online_softmax 32 / 64 296.2 / 218.1 (2.31 / 3.41); the roofline model said 97 / 72 / 67 / 207 / 154.
    `block_n` / `waits`: a tile of other keys than p's BLOCK_N (paged_decode_triton page_tile: a page) and other
    round trips waited a trip (paged_decode_triton.PAGED_WAITS)."""
    threads, block_n = p["num_warps"] * task.gpu.warp, block_n or p["BLOCK_N"]
    trip = p["num_warps"] * TRIP_WARP_S * task["D"] / 128 + block_n * task["D"] / threads * TRIP_VALUE_S
    if waits is None:
        waits = 1.8 if not prefetch and p.get("num_stages", 1) == 1 else 0.0
    trip += waits * DRAM_LATENCY_S[task.gpu.vendor]
    trips = passes * cdiv(cdiv(task["S"], p.get("NUM_SPLITS", 1)), block_n)
    return trips * trip / (DRAM_LATENCY_S[task.gpu.vendor] * 1.1)     # sim.chain_floor_s takes 1.1 round trips a trip


# Registers of the tile rungs by whether they prefetch the next tile (register_prefetch) or not (online_softmax,
# blocked_two_pass, split_kv): a + per x values, for a [BLOCK_N, D] tile of BLOCK_N x D / threads values a thread.
# ptxas of Triton 3.9's sm_90a builds (scripts/sim2_ptxas_regs.py; measurements/sim2_ptxas_regs_flash.jsonl: D 64 /
# 128, BLOCK_N 16-128, 2-8 warps, 1-2 stages): without a prefetch 32-171 registers over 130 kernels (split_kv's 36
# at 8 splits among them), none spilling (the estimate 0.64-1.31x of ptxas); with it 48-255 over 24, only BLOCK_N
# 128 on 2 warps (D=128, 256 values) spilling (0.83-1.04x). The fp32-copy estimate before (24 + 2 x values, doubled
# with the prefetch) put 128 values on 2 warps at 255 registers and a spill that ptxas does not make. H100 gpu-check
# rows, D=128: online_softmax BLOCK_N 128 on 2 warps 698.7 us at B=4 H=64 S=16384, 107.9 at B=8 H=32 S=2048
# (modelled 989.4 / 170.0 with the spill); register_prefetch BLOCK_N 64 on 2 warps (249 registers) 704.7 at B=32
# H=32 S=4096 (1469.5)
TILE_REGS = {False: (40, 0.5), True: (40, 1.65)}
# ... but the prefetched bf16 tile under the device's Triton (3.6, the H100's: its ptxas on sm_90a,
# measurements/sim2_ptxas_regs_flash_triton36.jsonl, D=128) takes 2.8 registers a value (PREFETCH_BF16_REGS): 64
# values a thread 218-219 (3.9: 154-158), 128 values 255 and 1.6-1.7 KB of spill. The rows split by dtype, not by
# run (every timed register_prefetch row of measurements/ at 128 values a thread): BLOCK_N 128 on 4 warps, D=128,
# bf16 226.7-228.1 us at B=1 H=32 S=4096, 315.1 at B=8 S=2048, 1926.0-1970.1 at B=32 S=4096 (H200 1630.6); fp16
# 92.3 / 96.2 / 707.6 (H200 561.8), which 1.65 a value (no spill) times at 94.3 / 94.3 / 710.4 (0.30-0.42x the bf16
# rows). The spill's cost (triton_spill of what the thread holds) at 2.0 a value (PREFETCH_BF16_SPILL: ptxas
# rematerializes part of its 2.8) times the bf16 rows at 0.85-1.01x (BLOCK_N 64 on 2 warps 1.43x, BLOCK_N 128 on 2
# warps at D=64 1.31x); at 2.8 its excess put them at 2.5-3.0x. Device-unverified: Triton 3.6's fp16 figures (the
# times say no spill).
PREFETCH_BF16_REGS = 2.8
PREFETCH_BF16_SPILL = 2.0


def tile_launch(traffic=1.0, prefetch=False):
    """The [BLOCK_N, D] tile rungs: two passes over K (traffic 1.5), one, or one with the next
    tile prefetched (twice the registers and the loads in flight); split-KV adds its partials.
    Pipelined (num_stages > 1), the num_stages - 1 tiles copied ahead are in flight beside this
    one's reduction (in shared memory; gfx942: registers): more bytes in flight where the resident
    grid is short of DRAM's bandwidth-latency product (few heads, long rows), fewer programs a SM
    where it is not."""
    def launch(p, task):
        b, h, s, d, block_n = task["B"], task["H"], task["S"], task["D"], p["BLOCK_N"]
        threads = p["num_warps"] * task.gpu.warp
        # a K tile load keeps several 16-byte loads per thread in flight (capped by registers), but
        # the next tile waits on this one's reduction: about half of it is in flight on average
        tile = kv_pipeline.in_flight(p, min(64, max(4, block_n * d * DTYPE_BYTES[task.dtype] // threads)))
        # ptxas's registers (TILE_REGS): one tile a trip Triton holds as packed 16-bit pairs and converts as it
        # reduces; the prefetch holds the next tile beside it. Past the cap the excess spills to local memory
        # (triton_spill counts half its estimate: twice ptxas's figure here): register_prefetch BLOCK_N 128 on
        # 2 warps, 255 registers and 2.8 KB of spill traffic, ran 26x its 8-warp twin on the H200
        a, per = TILE_REGS[prefetch]
        bf16, values = prefetch and task.dtype == "bf16", block_n * d / threads
        ring = kv_pipeline.regs(p, task, block_n, threads)
        demand = round(a + (PREFETCH_BF16_REGS if bf16 else per) * values) + ring
        held = round(a + (PREFETCH_BF16_SPILL if bf16 else per) * values) + ring
        regs, spill = min(255, demand), triton_spill(2 * held, 255)
        chain = trip_chain(p, task, prefetch, 1.5 if traffic > 1 else 1)    # pass 1: K alone, no P x V
        if prefetch:
            return Launch(grid=b * h, threads=threads, regs=regs, bytes_per_access=2 * tile, traffic=spill,
                          serial_trips=chain)
        smem = kv_pipeline.smem(p, task, block_n)
        if "NUM_SPLITS" not in p:
            return Launch(grid=b * h, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=tile,
                          traffic=traffic * spill, serial_trips=chain)
        splits = p["NUM_SPLITS"]
        used = min(splits, cdiv(s, block_n))          # splits past the last tile hold no keys
        partials = b * h * splits * (d + 2) * 4 * 2   # fp32 partial o, m, l: written once, read once
        return Launch(grid=b * h * used, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=tile,
                      traffic=spill + partials / cost_of(task).bytes, launches=2, serial_trips=chain)
    return launch


HEAD = '''
@triton.jit
def flash_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, scale, HEAD_DIM: tl.constexpr{extra}):
    bh = tl.program_id(0).to(tl.int64)          # int64: B*H*S*D can pass 2**31
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh * HEAD_DIM + offs_d).to(tl.float32)
    k_base = k_ptr + bh * S * HEAD_DIM
    v_base = v_ptr + bh * S * HEAD_DIM
    m_i = -float("inf")
    l_i = {l0}
    acc = tl.zeros([HEAD_DIM], dtype={acc_t})
'''

def wrapper(task, grid: str, extra: str, params: dict) -> str:
    return f'''

{ENTRY.py_def(task)}:
    B, H, S, D = k.shape
    o = torch.empty_like(q)
    flash_decode_kernel[({grid},)](q, k, v, o, S, scale, HEAD_DIM=D{extra}, num_warps={params["num_warps"]})
    return o
'''

def key_per_iteration_src(p, task, scale=" * scale", acc_t="tl.float32", l0="0.0", rnd=""):
    head = HEAD.format(extra="", l0=l0, acc_t=acc_t)
    return head + f'''    # one key per trip: every load is a single D-row and every score a cross-lane reduction
    for n in range(0, S):
        k = tl.load(k_base + n * HEAD_DIM + offs_d).to(tl.float32)
        s = tl.sum(k * q, 0){scale}
        m_new = tl.maximum(m_i, s)
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_base + n * HEAD_DIM + offs_d).to(tl.float32)
        acc = (acc * alpha + p * v){rnd}
        l_i = (l_i * alpha + p){rnd}
        m_i = m_new
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + wrapper(task, "B * H", "", p)

TILE = '''        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < {hi}
        k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        s = tl.where(mask_n, tl.sum(k.to(tl.float32) * q[None, :], 1){scale}, float("-inf"))
'''
V = ("        v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], "
     "other=0.0)\n")
STORE = "    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))\n"

def blocked_two_pass_src(p, task, scale=" * scale"):
    return HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + \
            "    # pass 1: row max and normaliser (the sum is rescaled whenever the max grows)\n" \
            f"    for start in {kv_pipeline.tile_loop(p, '0, S, BLOCK_N')}:\n" + TILE.format(hi="S", scale=" * scale") + '''\
        m_new = tl.maximum(m_i, tl.max(s, 0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new), 0)
        m_i = m_new
    # pass 2: K is read a second time to rebuild the probabilities, then weights V
''' + f"    for start in {kv_pipeline.tile_loop(p, '0, S, BLOCK_N')}:\n" + TILE.format(hi="S", scale=scale) + "        p = tl.exp(s - m_i)\n" + V + \
            "        acc += tl.sum(p[:, None] * v.to(tl.float32), 0)\n" + STORE + \
            wrapper(task, "B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

ONLINE = '''        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = {exp}(m_i - m_new)
        p = {exp}(s - m_new)
{v}        acc = acc{rescale} + tl.sum(p[:, None] * v.to(tl.float32), 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_new
'''

def online_softmax_src(p, task, rescale=" * alpha"):
    return HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + \
            "    # one pass over K and V: rescale the running sums whenever the max grows\n" \
            f"    for start in {kv_pipeline.tile_loop(p, '0, S, BLOCK_N')}:\n" + \
            TILE.format(hi="S", scale=" * scale") + \
            ONLINE.format(exp="tl.exp", v=V, rescale=rescale) + STORE + \
            wrapper(task, "B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

def register_prefetch_src(p, task, scale=" * qk_scale"):
    return HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + f'''\
    qk_scale = scale * {LOG2E}               # fold log2(e): exp2 is one MUFU op
    offs_n = tl.arange(0, BLOCK_N)
    mask_n = offs_n < S
    k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    for start in range(0, S, BLOCK_N):
        # issue the next tile's loads before reducing this one: two tiles in flight per program
        offs_next = start + BLOCK_N + tl.arange(0, BLOCK_N)
        mask_next = offs_next < S
        k_next = tl.load(k_base + offs_next[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_next[:, None], other=0.0)
        v_next = tl.load(v_base + offs_next[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_next[:, None], other=0.0)
        s = tl.where(mask_n, tl.sum(k.to(tl.float32) * q[None, :], 1){scale}, float("-inf"))
''' + ONLINE.format(exp="tl.exp2", v="", rescale=" * alpha") + '''\
        k, v, mask_n = k_next, v_next, mask_next
''' + STORE + wrapper(task, "B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

def split_kv_src(p, task, combine="(bh * NUM_SPLITS + offs_s)", qk="scale * "):
    head = HEAD.format(extra=", BLOCK_N: tl.constexpr,\n                        ml_ptr, split_len, "
                              "NUM_SPLITS: tl.constexpr", l0="0.0", acc_t="tl.float32")
    return head + f'''\
    # this program owns keys [lo, hi) of its head; o_ptr is the fp32 partial buffer
    split = tl.program_id(1)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, S)
    qk_scale = {qk}{LOG2E}
    for start in {kv_pipeline.tile_loop(p, "lo, hi, BLOCK_N")}:
''' + TILE.format(hi="hi", scale=" * qk_scale") + \
            ONLINE.format(exp="tl.exp2", v=V, rescale=" * alpha") + f'''\
    part = bh * NUM_SPLITS + split
    tl.store(o_ptr + part * HEAD_DIM + offs_d, acc)    # unnormalised; the combine rescales
    tl.store(ml_ptr + part * 2, m_i)
    tl.store(ml_ptr + part * 2 + 1, l_i)


@triton.jit
def flash_decode_combine_kernel(part_ptr, ml_ptr, o_ptr, HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # merge the splits of one head: weights 2^(m_s - m_max), empty splits (m = -inf) weigh 0
{split_weights(combine)}
    o = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, o.to(o_ptr.dtype.element_ty))


{ENTRY.py_def(task)}:
    B, H, S, D = k.shape
    NUM_SPLITS, BLOCK_N = {p["NUM_SPLITS"]}, {p["BLOCK_N"]}
    split_len = triton.cdiv(triton.cdiv(S, NUM_SPLITS), BLOCK_N) * BLOCK_N   # whole tiles per split
    part = torch.empty(B * H * NUM_SPLITS, D, dtype=torch.float32, device=q.device)
    ml = torch.empty(B * H * NUM_SPLITS, 2, dtype=torch.float32, device=q.device)
    flash_decode_kernel[(B * H, NUM_SPLITS)](q, k, v, part, S, scale, HEAD_DIM=D, BLOCK_N=BLOCK_N, ml_ptr=ml,
                                             split_len=split_len, NUM_SPLITS=NUM_SPLITS, num_warps={p["num_warps"]})
    o = torch.empty_like(q)
    flash_decode_combine_kernel[(B * H,)](part, ml, o, HEAD_DIM=D, NUM_SPLITS=NUM_SPLITS, num_warps=4)
    return o
'''


class FlashDecodeTriton(FlashDecodeSpec):
    impl = "triton"
    check_adapter = staticmethod(triton_check)
    variants = (
        Rung("key_per_iteration", "one program per (b, h); the loop loads one key and one value row at a time",
             (Param("num_warps", (1, 2, 4), 1),), memory_eff=0.35, launch=key_launch, render=key_per_iteration_src,
             bugs={"missing_scale": {"scale": ""}, "half_accumulator": HALF}),
        Rung("blocked_two_pass", "[BLOCK_N, D] tiles; pass 1 finds max and sum, pass 2 re-reads K with V",
             (BLOCK_N, WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.85, launch=tile_launch(1.5),
             render=blocked_two_pass_src, bugs={"missing_scale": {"scale": ""}}),
        Rung("online_softmax", "single pass: running max/sum, accumulator rescaled per tile",
             (WIDE_BLOCK_N, WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.88, launch=tile_launch(),
             render=online_softmax_src, bugs={"missing_scale": {"rescale": ""}}),
        Rung("register_prefetch", "next K/V tile loaded into registers while this one is reduced; exp2",
             (BLOCK_N, WARPS), memory_eff=0.9, launch=tile_launch(prefetch=True), render=register_prefetch_src,
             bugs={"missing_scale": {"scale": ""}}),
        Rung("split_kv", "flash-decoding: S split across programs, partials merged by a combine kernel",
             (Param("NUM_SPLITS", (2, 4, 8, 16, 32), 8), SPLIT_BLOCK_N, WARPS, kv_pipeline.LOOP_STAGES),
             memory_eff=0.93, launch=tile_launch(), render=split_kv_src,
             bugs={"bad_combine_index": {"combine": "(bh + offs_s)"}, "missing_scale": {"qk": ""}}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "scale": "fp32",
               "HEAD_DIM": "constexpr"}
        consts = {"HEAD_DIM": task["D"]}
        if "BLOCK_N" not in params:
            return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1)]
        consts["BLOCK_N"] = params["BLOCK_N"]
        sig["BLOCK_N"] = "constexpr"
        if "NUM_SPLITS" not in params:
            return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1)]
        sig = {**sig, "o_ptr": "*fp32", "ml_ptr": "*fp32", "split_len": "i32", "NUM_SPLITS": "constexpr"}
        consts["NUM_SPLITS"] = params["NUM_SPLITS"]
        comb = {"part_ptr": "*fp32", "ml_ptr": "*fp32", "o_ptr": ptr, "HEAD_DIM": "constexpr",
                "NUM_SPLITS": "constexpr"}
        return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1),
                KernelSpec("flash_decode_combine_kernel", comb,
                           {"HEAD_DIM": task["D"], "NUM_SPLITS": params["NUM_SPLITS"]}, 4, 1)]
