"""Sliding-window decode attention in Triton: one query token per (b, h) over the last W keys of a
contiguous KV cache (grouped-query heads: head h reads KV head h // GROUP).

Ladder: one key per loop trip -> [BLOCK_N, D] tiles with an online softmax over the whole cache,
the window a mask -> only the window's blocks -> one program per KV head, its GROUP query heads a
tl.dot tile (K/V read once for the group) -> split-KV over the window with a combine kernel.
"""
from dataclasses import replace

from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr
from . import _kv_pipeline as kv_pipeline
from ._attn_check import HALF
from ._flash_tiles import PIPELINE_OVERLAP, mma_eff
from .flash_decode_triton import key_launch
from .paged_decode_cuda import reread
from .swa_decode_spec import ENTRY, SwaDecodeSpec, cost_of

WARPS = Param("num_warps", (2, 4, 8), 4)
BLOCK_N = Param("BLOCK_N", (32, 64, 128), 64)
# the tl.dot rungs' K/V loads are contiguous, so Triton multi-buffers them num_stages deep; 3 is the
# launch's default (what these rungs ran at before the launch line named it)
STAGES = Param("num_stages", (1, 2, 3), 3)
LOG2E = 1.4426950408889634
# gqa_dot's key tiles go to 256 (room_table, kernelinfer seed 5151: gqa_dot's best at BLOCK_N 128, the list's
# end, in 7 of 12 swa_decode_triton sessions): a [256, D] K and V tile per trip halves the trips whose loads wait on
# the reduction. H100 plan a1 (docs/roomA_device_h100_a1), B=8 H=32 KVH=8 S=4096 W=1000 D=128, 8 warps at 2 stages:
# 256 keys 21.9 us against 128's 24.5 (modelled 16.5 / 19.5: the same order), both behind 128 at 3 stages (17.2),
# where 256 keys no longer fit (2 x 2 x 256 x 128 x 2 B ahead: 256 KB). Correct under TRITON_INTERPRET=1
# (scripts/roomA_interpret_room.py); Triton builds it for every target (scripts/roomA_compile_room.py).
GQA_BLOCK_N = Param("BLOCK_N", (32, 64, 128, 256), 64)


def group_pad(task) -> int:
    """Query heads of a group padded to a tl.dot tile (16 rows at least, a power of two)."""
    return max(16, 1 << (task["H"] // task["KVH"] - 1).bit_length())


def key_per_iteration_launch(p, task):
    # flash_decode's one-key-a-trip model; sibling query heads re-read their KV head through L2
    return replace(key_launch(p, task), traffic=reread(task))


def head_launch(whole_cache: bool):
    """A program per (b, h) streaming [BLOCK_N, D] tiles: of the whole cache (the window a mask) or of
    the window only; sibling query heads re-read their KV head through L2. The tile loop pipelined
    (num_stages > 1: _kv_pipeline) keeps the tiles copied ahead in flight (shared memory; gfx942: registers)."""
    def launch(p, task):
        b, h, d, threads = task["B"], task["H"], task["D"], p["num_warps"] * task.gpu.warp
        tile = kv_pipeline.in_flight(p, min(64, max(4, p["BLOCK_N"] * d * DTYPE_BYTES[task.dtype] // threads)))
        extra = task["S"] / task["W"] if whole_cache else 1.0
        regs = 24 + 2 * p["BLOCK_N"] * d // threads + kv_pipeline.regs(p, task, p["BLOCK_N"], threads)
        return Launch(grid=b * h, threads=threads, smem_bytes=kv_pipeline.smem(p, task, p["BLOCK_N"]),
                      regs=min(255, regs),
                      bytes_per_access=tile, traffic=reread(task) * extra)
    return launch


def group_launch(p, task):
    """A program per (b, KV head[, split]): K/V read once, the group's rows a padded tl.dot tile."""
    b, kvh, d, bn, threads = task["B"], task["KVH"], task["D"], p["BLOCK_N"], p["num_warps"] * task.gpu.warp
    splits = min(p.get("NUM_SPLITS", 1), cdiv(task["W"], bn))
    gp, e, stages = group_pad(task), DTYPE_BYTES[task.dtype], p["num_stages"]
    partials = b * kvh * splits * gp * (d + 2) * 4 * 2 / cost_of(task).bytes if splits > 1 else 0.0
    # K and V tiles: unpipelined they take turns in one buffer, pipelined each gets num_stages - 1
    # (the group's rows are under 64, the mma.sync path: one stage fewer), beside the padded q rows
    # and their P tile (Triton 3.9 metadata.shared, sm_80 and sm_90: 16 rows x 64 keys x D=128 at
    # 1-3 stages 22, 38, 70 KB; 102 at 4)
    kv = bn * d * e * (2 * (stages - 1) if stages > 1 else 1)
    # tiles the loop has in flight ahead of its MMAs: half of one unpipelined (the next load waits on
    # this tile's softmax), num_stages - 1 pipelined; the model's bytes in flight were set at 3
    ahead = max(0.5, stages - 1) / 2
    return Launch(grid=b * kvh * splits, threads=threads, smem_bytes=kv + gp * d * e + gp * bn * e,
                  regs=min(255, 32 + (gp * d + gp * bn + bn * d) // threads),
                  bytes_per_access=max(1, int(min(64, bn * d * e // threads // 2) * ahead)), traffic=1 + partials,
                  compute_scale=mma_eff(task, 64, bn, p["num_warps"]) * PIPELINE_OVERLAP[stages],
                  tile_quant=(task["H"] // kvh) / gp, launches=2 if splits > 1 else 1)


HEAD = '''
@triton.jit
def swa_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, W, qk_scale, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr{extra}):
    bh = tl.program_id(0).to(tl.int64)          # b * H + h; its KV head is bh // GROUP
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh * HEAD_DIM + offs_d).to(tl.float32){scale}
    kv = (bh // GROUP) * S * HEAD_DIM          # int64: B*KVH*S*D can pass 2**31
    m_i = -float("inf")
    l_i = {l0}
    acc = tl.zeros([HEAD_DIM], dtype={acc_t})
'''
STORE = "    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))\n"


def wrapper(task, kernel_call: str) -> str:
    return f'''

{ENTRY.py_def(task)}:
    B, H, D = q.shape
    KVH, S = k_cache.shape[1], k_cache.shape[2]
    qk_scale = D ** -0.5 * {LOG2E}          # log2(e) folded in: exp2 is one MUFU op
    o = torch.empty_like(q)
{kernel_call}    return o
'''


def key_per_iteration_src(p, task, scale=" * qk_scale", acc_t="tl.float32", l0="0.0", rnd=""):
    return HEAD.format(extra="", scale=scale, l0=l0, acc_t=acc_t) + f'''\
    # one key per trip: each load is a single D-row, each score a cross-lane reduction
    for t in range(S - W, S):
        k = tl.load(k_ptr + kv + t * HEAD_DIM + offs_d).to(tl.float32)
        s = tl.sum(k * q, 0)
        m_new = tl.maximum(m_i, s)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)
        v = tl.load(v_ptr + kv + t * HEAD_DIM + offs_d).to(tl.float32)
        acc = (acc * alpha + p * v){rnd}
        l_i = (l_i * alpha + p){rnd}
        m_i = m_new
''' + STORE + wrapper(task, f"    swa_decode_kernel[(B * H,)](q, k_cache, v_cache, o, S, W, qk_scale, GROUP=H // KVH, "
                            f"HEAD_DIM=D,\n                                num_warps={p['num_warps']})\n")


def tiles_src(lo: str, keep: str, scale: str, p, task) -> str:
    """[BLOCK_N, D] tiles from key lo to S, scores outside `keep` set to -inf, online softmax."""
    return HEAD.format(extra=", BLOCK_N: tl.constexpr", scale=scale, l0="0.0", acc_t="tl.float32") + f'''\
    for start in {kv_pipeline.tile_loop(p, lo + ", S, BLOCK_N")}:
        offs_n = start + tl.arange(0, BLOCK_N)
        in_cache = offs_n < S
        kv_off = kv + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=in_cache[:, None], other=0.0)
        s = tl.where({keep}, tl.sum(k.to(tl.float32) * q[None, :], 1), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)   # no key of the window seen yet
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use)
        v = tl.load(v_ptr + kv_off, mask=in_cache[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_new
''' + STORE + wrapper(task, f"    swa_decode_kernel[(B * H,)](q, k_cache, v_cache, o, S, W, qk_scale, GROUP=H // KVH, "
                            f"HEAD_DIM=D,\n                                BLOCK_N={p['BLOCK_N']}, "
                            f"num_warps={p['num_warps']})\n")


def blocked_online_softmax_src(p, task, lo="S - W", scale=" * qk_scale"):
    # every cached key is loaded and scored; the window only decides which scores count
    return tiles_src("0", f"in_cache & (offs_n >= {lo})", scale, p, task)


def window_block_skip_src(p, task, lo="S - W", scale=" * qk_scale"):
    return tiles_src(lo, "in_cache", scale, p, task)


GROUP_HEAD = '''
@triton.jit
def swa_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, W, qk_scale, {args}GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                      HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr{extra}):
    # one program per (b, KV head): its GROUP query heads are the rows of one tl.dot tile, so each
    # K/V tile is loaded once for the whole group (rows past GROUP are zero padding)
    kvh = tl.program_id(0).to(tl.int64)         # b * KVH + kv head
    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    live_g = offs_g < GROUP
    q = tl.load(q_ptr + (kvh * GROUP + offs_g)[:, None] * HEAD_DIM + offs_d[None, :], mask=live_g[:, None], other=0.0)
    kv = kvh * S * HEAD_DIM
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
{range}
    for start in range(lo, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        kv_off = kv + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=mask_n[:, None], other=0.0)
        s = tl.where(mask_n[None, :], tl.dot(q, tl.trans(k)){scale}, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        v = tl.load(v_ptr + kv_off, mask=mask_n[:, None], other=0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
'''


def group_call(task, p, grid, extra="", pre=""):
    return (f"{pre}    swa_decode_kernel[{grid}](q, k_cache, v_cache, {{out}}, S, W, qk_scale, {extra}GROUP=H // KVH,\n"
            f"        GROUP_PAD={group_pad(task)}, HEAD_DIM=D, BLOCK_N={p['BLOCK_N']}, num_warps={p['num_warps']},\n"
            f"        num_stages={p['num_stages']})\n")


def gqa_dot_src(p, task, lo="S - W", scale=" * qk_scale"):
    body = GROUP_HEAD.format(args="", extra="", scale=scale, range=f"    lo, hi = {lo}, S")
    return body + '''\
    rows = (kvh * GROUP + offs_g)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptr + rows, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=live_g[:, None])
''' + wrapper(task, group_call(task, p, "(B * KVH,)").format(out="o"))


def split_kv_src(p, task, combine="(kvh * NUM_SPLITS + offs_s) * GROUP_PAD + g", scale=" * qk_scale"):
    body = GROUP_HEAD.format(args="ml_ptr, split_len, ", extra=", NUM_SPLITS: tl.constexpr", scale=scale,
                             range="    split = tl.program_id(1)   # keys [lo, hi) of the window\n"
                                   "    lo = S - W + split * split_len\n    hi = tl.minimum(lo + split_len, S)")
    return body + f'''\
    part = (kvh * NUM_SPLITS + split) * GROUP_PAD + offs_g     # unnormalised fp32 partials
    tl.store(o_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc)
    tl.store(ml_ptr + part * 2, m_i)
    tl.store(ml_ptr + part * 2 + 1, l_i)


@triton.jit
def swa_decode_combine_kernel(part_ptr, ml_ptr, o_ptr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                              HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # one program per query head: weights 2^(m_s - m_max); empty splits (m = -inf) weigh 0
    bh = tl.program_id(0).to(tl.int64)
    kvh, g = bh // GROUP, bh % GROUP
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = {combine}
    m = tl.load(ml_ptr + rows * 2)
    l = tl.load(ml_ptr + rows * 2 + 1)
    w = tl.exp2(m - tl.max(m, 0))
    acc = tl.load(part_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :])
    o = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, o.to(o_ptr.dtype.element_ty))
''' + wrapper(task, group_call(
        task, p, "(B * KVH, NUM_SPLITS)", "ml_ptr=ml, split_len=split_len, NUM_SPLITS=NUM_SPLITS, ",
        f"    NUM_SPLITS, GP = {p['NUM_SPLITS']}, {group_pad(task)}\n"
        f"    split_len = triton.cdiv(triton.cdiv(W, NUM_SPLITS), {p['BLOCK_N']}) * {p['BLOCK_N']}   # whole tiles a split\n"
        "    part = torch.empty(B * KVH * NUM_SPLITS * GP, D, dtype=torch.float32, device=q.device)\n"
        "    ml = torch.empty(B * KVH * NUM_SPLITS * GP, 2, dtype=torch.float32, device=q.device)\n").format(out="part")
        + "    swa_decode_combine_kernel[(B * H,)](part, ml, o, GROUP=H // KVH, GROUP_PAD=GP, HEAD_DIM=D,\n"
          "                                        NUM_SPLITS=NUM_SPLITS, num_warps=4)\n")


class SwaDecodeTriton(SwaDecodeSpec):
    impl = "triton"
    variants = (
        Rung("key_per_iteration", "one program per (b, h); the loop loads one key and one value row at a time",
             (Param("num_warps", (1, 2, 4), 1),), memory_eff=0.35, launch=key_per_iteration_launch, render=key_per_iteration_src,
             bugs={"missing_scale": {"scale": ""}, "half_accumulator": HALF}),
        Rung("blocked_online_softmax", "[BLOCK_N, D] tiles of the whole cache, online softmax, the window a mask",
             (BLOCK_N, WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.85, launch=head_launch(True),
             render=blocked_online_softmax_src,
             bugs={"off_by_one": {"lo": "S - W - 1"}, "missing_scale": {"scale": ""}}),
        Rung("window_block_skip", "the loop starts at the window: only its W keys are loaded",
             (BLOCK_N, WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.88, launch=head_launch(False),
             render=window_block_skip_src,
             bugs={"off_by_one": {"lo": "S - W - 1"}, "missing_scale": {"scale": ""}}),
        Rung("gqa_dot", "one program per KV head: the query-head group is a tl.dot tile, K/V read once",
             (GQA_BLOCK_N, WARPS, STAGES), path="fp16", compute_eff=0.3, memory_eff=0.9,
             smem="dynamic", launch=group_launch, render=gqa_dot_src,
             bugs={"off_by_one": {"lo": "S - W + 1"}, "missing_scale": {"scale": ""}}),
        Rung("split_kv", "GQA tiles plus a split of the window across programs, partials merged by a combine kernel",
             (Param("NUM_SPLITS", (2, 4, 8, 16, 32), 8), Param("BLOCK_N", (32, 64, 128), 64), WARPS, STAGES), path="fp16",
             compute_eff=0.3, memory_eff=0.92, smem="dynamic", launch=group_launch, render=split_kv_src,
             bugs={"bad_combine_index": {"combine": "(kvh + offs_s) * GROUP_PAD + g"}, "missing_scale": {"scale": ""}}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        return f"{TRITON_PRELUDE}\nW = {task['W']}   # the window: keys S - W .. S - 1\n" + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr, gp = triton_ptr(task.dtype, task), group_pad(task)
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "W": "i32", "qk_scale": "fp32"}
        consts = {"GROUP": task["H"] // task["KVH"], "HEAD_DIM": task["D"]}
        if "NUM_SPLITS" in params:
            sig.update(o_ptr="*fp32", ml_ptr="*fp32", split_len="i32")
        if variant.launch is group_launch:
            consts["GROUP_PAD"] = gp
        consts.update({k: params[k] for k in ("BLOCK_N", "NUM_SPLITS") if k in params})
        specs = [KernelSpec("swa_decode_kernel", {**sig, **dict.fromkeys(consts, "constexpr")}, consts,
                            params["num_warps"], params.get("num_stages", 1))]
        if "NUM_SPLITS" in params:
            comb = {"GROUP": consts["GROUP"], "GROUP_PAD": gp, "HEAD_DIM": task["D"], "NUM_SPLITS": params["NUM_SPLITS"]}
            specs.append(KernelSpec("swa_decode_combine_kernel", {"part_ptr": "*fp32", "ml_ptr": "*fp32", "o_ptr": ptr,
                                    **dict.fromkeys(comb, "constexpr")}, comb, 4, 1))
        return specs
