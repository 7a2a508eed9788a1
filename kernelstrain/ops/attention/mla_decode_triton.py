"""DeepSeek MLA decode in Triton, absorbed weights: all H heads' queries live in the 512-wide
latent space (+64 RoPE), so they attend to ONE shared cache row [c_kv | k_pe] per token, and
c_kv doubles as the value. Ladder: per-head two-pass CUDA-core kernel -> heads as the M side
of tl.dot, online softmax -> exp2, peeled masked tail -> pipelined latent tiles -> split-KV.
"""
from .._triton_smem import mla_smem
from ..base import Launch, Param, Rung, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE, cdiv, triton_ptr, unchecked
from ._mla_split import STREAM_EFF, heads_work, lone
from ._mla_tiles import ATTEND, ATTEND_HALF, HALF_QUERY, WHOLE_QUERY
from .mla_decode_spec import DIM, ENTRY, KV_LORA, ROPE, TAIL_KEYS_WEIGH, MlaDecodeSpec, cost_of

SM_SCALE = 192 ** -0.5            # DeepSeek-V2/V3: 1/sqrt(qk_nope 128 + qk_rope 64)
BLOCK_H = Param("BLOCK_H", (16, 32, 64), 16)
BLOCK_N = Param("BLOCK_N", (16, 32, 64), 32)
WARPS = Param("num_warps", (4, 8), 4)
# off_by_one: the key loop stops one tile early, so the last BLOCK_N keys (or the ragged remainder) get no weight: an
# output error of ~sqrt(dropped / S), >= 1e-2 on every menu shape and dtype. (It replaces half_accumulator: on an H200 the
# fp16 softmax state stayed at <= 2.9e-3 over the whole KV length, inside the 5e-3 tolerance; only bf16 failed.)


def warps(p) -> int:
    """split_kv runs 8 warps for 64-head blocks, else 4 (not a tunable: H100, room26 set, 8 warps 0.86-1.35x 4 at 16
    heads as the grid fills, 0.49-0.53x at 64; the model had 1.4-1.5x); the other rungs take num_warps."""
    return (8 if p["BLOCK_H"] >= 64 else 4) if "num_splits" in p else p["num_warps"]


# -- naive_two_pass ------------------------------------------------------------------------
def naive_launch(p, task):
    # every head re-streams its batch's cache twice; siblings running together hit in L2 (~6% miss)
    b, h, bn, threads = task["B"], task["H"], p["BLOCK_N"], warps(p) * task.gpu.warp
    per = bn * DIM // threads    # tile elements a thread holds: the rate follows it, as a tile's dots are tl.sums
    # across all the warps (smem + barrier, both passes; H200 pgrid: BLOCK_N 16, 2 / 4 / 8 warps 12 / 27 / 49 ms)
    return Launch(grid=b * h, threads=threads, regs=min(40 + per, 255), bytes_per_access=16, traffic=2 * (1 + (h - 1) * 0.06),
                  compute_scale=2176 / 3328 * (1 if 40 + per <= 255 else 0.5) * min(1.0, per / 144))


def naive_two_pass_src(p, task, scale=" * qk_scale", stop="S"):
    return f'''

@triton.jit
def _scores(q_nope, q_pe, rows, S, kv_base, offs_c, offs_r, KV_LORA: tl.constexpr, ROPE: tl.constexpr):
    # dot of one head's query with BLOCK_N latent rows, on CUDA cores (broadcast multiply + row sum)
    valid = rows < S
    ptrs = kv_base + rows[:, None] * (KV_LORA + ROPE)
    kv = tl.load(ptrs + offs_c[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
    s = tl.sum(kv * q_nope[None, :], 1) + tl.sum(k_pe * q_pe[None, :], 1)
    return tl.where(valid, s, float("-inf")), kv


@triton.jit
def mla_decode_kernel(q_ptr, kv_ptr, o_ptr, S, H, qk_scale,
                      KV_LORA: tl.constexpr, ROPE: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per (batch, head): every head streams its sequence's whole latent cache, twice.
    pid = tl.program_id(0)
    b = pid // H
    offs_c = tl.arange(0, KV_LORA)
    offs_r = tl.arange(0, ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    q_row = q_ptr + pid.to(tl.int64) * (KV_LORA + ROPE)
    q_nope = tl.load(q_row + offs_c).to(tl.float32){scale}
    q_pe = tl.load(q_row + KV_LORA + offs_r).to(tl.float32){scale}
    kv_base = kv_ptr + b.to(tl.int64) * S * (KV_LORA + ROPE)
    # pass 1: running max and softmax denominator
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.full([], 0.0, tl.float32)
    for start in range(0, {stop}, BLOCK_N):
        s, kv = _scores(q_nope, q_pe, start + offs_n, S, kv_base, offs_c, offs_r, KV_LORA, ROPE)
        m_new = tl.maximum(m_i, tl.max(s, 0))
        l_i = (l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new), 0)).to(tl.float32)
        m_i = m_new
    # pass 2: recompute the scores, weight the latent rows (c_kv is also the value)
    acc = tl.zeros([KV_LORA], dtype=tl.float32)
    for start in range(0, {stop}, BLOCK_N):
        s, kv = _scores(q_nope, q_pe, start + offs_n, S, kv_base, offs_c, offs_r, KV_LORA, ROPE)
        p = tl.exp(s - m_i) / l_i
        acc += tl.sum(p[:, None] * kv, 0)
    tl.store(o_ptr + pid.to(tl.int64) * KV_LORA + offs_c, acc.to(o_ptr.dtype.element_ty))


{ENTRY.py_def(task)}:
    B, H, _ = q.shape
    q, kv_cache = q.contiguous(), kv_cache.contiguous()
    out = torch.empty((B, H, KV_LORA), device=q.device, dtype=q.dtype)
    mla_decode_kernel[(B * H,)](q, kv_cache, out, kv_cache.shape[1], H, SM_SCALE,
                                KV_LORA=KV_LORA, ROPE=ROPE, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
    return out
'''


# -- the tiled rungs: BLOCK_H heads are the M side of every tl.dot ----------------------------
def tiled_launch(p, task, halves: int = 1):
    """halves: programs sharing a head block's 512 output columns (latent_halves: 2), each scoring all 576."""
    gpu, b, h, s, e, bn = task.gpu, task["B"], task["H"], task["S"], DTYPE_BYTES[task.dtype], p["BLOCK_N"]
    threads = warps(p) * gpu.warp
    bh, stages, splits = p["BLOCK_H"], p.get("num_stages", 1), p.get("num_splits", 1)
    tile = bn * DIM * e                               # one latent tile: K and V at once
    smem = mla_smem(task, bh, bn, e, stages, warps(p), DIM, KV_LORA)
    # acc [BLOCK_H, 512 / halves] and q, live across the loop
    carried = bh * KV_LORA // halves // threads + bh * DIM * e // 4 // threads
    regs = 48 + carried + bh * bn // threads       # BLOCK_H 64, 4 warps: 2.6-3.4x BLOCK_H 32 (H200 pgrid, H100 simgrid)
    spill = max(0, carried + (regs - carried) // 2 - 255)      # Triton holds ~2x the rest, not the carried (triton_spill)
    # wgmma on sm_90 only for 64-row tiles (else mma.sync); Triton's MFMA attention lags on MI300X
    mma = (1.0 if bh >= gpu.triton_full_stage_rows else gpu.triton_small_tile_scale) * gpu.triton_dot_scale
    overlap = {1: 0.72, 2: 0.92, 3: 1.0}[stages] if "num_stages" in p else 0.72
    # every program after the first to read a latent tile (the other head blocks, the other half) mostly hits L2
    traffic = 1 + (cdiv(h, bh) * halves - 1) * 0.05 + spill / 255
    if splits > 1:                                    # fp32 partial outputs written then re-read
        traffic = traffic * heads_work(task, bh, mma) + 2 * b * h * splits * (KV_LORA + 1) * 4 / cost_of(task).bytes
    tail = s / (cdiv(cdiv(s, splits), bn) * bn * splits)
    # each half scores all 576 columns again: (halves x 576 + 512) / (576 + 512) of the op's MMA work
    rescored = (halves * DIM + KV_LORA) / (DIM + KV_LORA)
    out = Launch(grid=b * cdiv(h, bh) * splits * halves, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                 bytes_per_access=max(16, tile * max(1, stages - 1) // threads // 2), traffic=traffic,
                 compute_scale=mma * overlap * 255 / (255 + 2 * spill) / rescored,
                 tile_quant=h / (cdiv(h, bh) * bh) * tail, launches=2 if splits > 1 else 1)
    return lone(out, task) if splits > 1 else out


def tiled(p, exp, peel, split, stop=None, halves=False):
    """BLOCK_H heads of one sequence are the M side of every MMA: one latent tile serves them all (halves: each
    program keeps half of the 512 output columns)."""
    args = "part_o_ptr, part_lse_ptr, S, H, split_len, qk_scale" if split else "o_ptr, S, H, qk_scale"
    extra = (", NUM_STAGES: tl.constexpr" if "num_stages" in p else "") + (", NUM_SPLITS: tl.constexpr" if split else "")
    call = ("acc, m_i, l_i = _attend(acc, m_i, l_i, q_mine, q_other, q_pe, kv_base, {} + offs_n, S, offs_mine, "
            "offs_other, offs_r, KV_LORA, ROPE, {})" if halves else
            "acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_pe, kv_base, {} + offs_n, S, offs_c, offs_r, KV_LORA, ROPE, {})")
    if not peel:
        body = f"    for start in range(lo, {stop or 'hi'}, BLOCK_N):\n        {call.format('start', 'True')}"
    else:
        rng = (f"tl.range(lo, {stop or 'hi_full'}, BLOCK_N, num_stages=NUM_STAGES)" if "num_stages" in p
               else f"range(lo, {stop or 'hi_full'}, BLOCK_N)")
        body = (f"    hi_full = tl.maximum(lo, lo + (hi - lo) // BLOCK_N * BLOCK_N)\n"
                f"    for start in {rng}:   # whole tiles: no predication\n        {call.format('start', 'False')}\n"
                f"    if hi_full < hi:   # the ragged last tile is the only masked one\n"
                f"        {call.format('hi_full', 'True')}")
    if split:   # split_len is a multiple of BLOCK_N: only the last split has a ragged end, at S
        bounds = "split = tl.program_id(2)\n    lo = split * split_len\n    hi = tl.minimum(lo + split_len, S)"
        epilogue = """    # partial result of this split: normalised output and its log2-sum-exp (empty split: weight 0)
    part = (b * H + offs_h).to(tl.int64) * NUM_SPLITS + split
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    tl.store(part_o_ptr + part[:, None] * KV_LORA + offs_c[None, :], acc / l_safe[:, None], mask=mask_h[:, None])
    tl.store(part_lse_ptr + part, tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf")), mask=mask_h)"""
    else:
        bounds = "lo = 0\n    hi = S"
        epilogue = f"""    o_rows = o_ptr + (b * H + offs_h).to(tl.int64)[:, None] * KV_LORA
    tl.store(o_rows + {"offs_mine" if halves else "offs_c"}[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=mask_h[:, None])"""
    attend = ATTEND_HALF if halves else ATTEND.replace("EXP", exp)
    return attend + f'''

@triton.jit
def mla_decode_kernel(q_ptr, kv_ptr, {args}, KV_LORA: tl.constexpr, ROPE: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr{extra}):
    b = tl.program_id(0)
{HALF_QUERY if halves else WHOLE_QUERY}
    kv_base = kv_ptr + b.to(tl.int64) * S * (KV_LORA + ROPE)
    {bounds}
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, KV_LORA{" // 2" if halves else ""}], dtype=tl.float32)
{body}
{epilogue}
'''


def head_block_tl_dot_src(p, task, scale="SM_SCALE", **state):
    return single(p, task, "exp", False, scale, state)


def exp2_tail_peel_src(p, task, scale="SM_SCALE * LOG2E", **state):
    return single(p, task, "exp2", True, scale, state)


def latent_halves_src(p, task, scale="SM_SCALE * LOG2E", **state):
    return single(p, task, "exp2", True, scale, state, halves=True)


def single(p, task, exp, peel, scale, state, halves=False):
    """The one-pass rungs: tiled kernel plus a wrapper launching one program per (batch, head block), or per
    (batch, head block, half of the latent columns)."""
    stages = "NUM_STAGES=NUM_STAGES, num_stages=NUM_STAGES" if "num_stages" in p else "num_stages=1"
    grid = "(B, triton.cdiv(H, BLOCK_H) * 2)   # x 2: each half of the 512 latent columns" if halves else "(B, triton.cdiv(H, BLOCK_H))"
    return tiled(p, exp, peel, False, halves=halves, **state) + f'''

{ENTRY.py_def(task)}:
    B, H, _ = q.shape
    q, kv_cache = q.contiguous(), kv_cache.contiguous()
    out = torch.empty((B, H, KV_LORA), device=q.device, dtype=q.dtype)
    grid = {grid}
    mla_decode_kernel[grid](q, kv_cache, out, kv_cache.shape[1], H, {scale}, KV_LORA=KV_LORA, ROPE=ROPE,
                            BLOCK_N=BLOCK_N, BLOCK_H=BLOCK_H, num_warps=NUM_WARPS, {stages})
    return out
'''



def split_kv_src(p, task, nxt="offs_s", scale="SM_SCALE * LOG2E"):
    return tiled(p, "exp2", True, True) + f'''

@triton.jit
def mla_combine_kernel(part_o_ptr, part_lse_ptr, o_ptr, NUM_SPLITS: tl.constexpr, KV_LORA: tl.constexpr):
    # one program per (batch, head): merge the splits weighted by exp2(lse_s - max lse)
    row = tl.program_id(0).to(tl.int64)
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_c = tl.arange(0, KV_LORA)
    lse = tl.load(part_lse_ptr + row * NUM_SPLITS + offs_s)
    w = tl.exp2(lse - tl.max(lse, 0))
    parts = tl.load(part_o_ptr + (row * NUM_SPLITS + {nxt})[:, None] * KV_LORA + offs_c[None, :])
    tl.store(o_ptr + row * KV_LORA + offs_c, (tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)).to(o_ptr.dtype.element_ty))


{ENTRY.py_def(task)}:
    B, H, _ = q.shape
    S = kv_cache.shape[1]
    q, kv_cache = q.contiguous(), kv_cache.contiguous()
    out = torch.empty((B, H, KV_LORA), device=q.device, dtype=q.dtype)
    part_o = torch.empty((B, H, NUM_SPLITS, KV_LORA), device=q.device, dtype=torch.float32)
    part_lse = torch.empty((B, H, NUM_SPLITS), device=q.device, dtype=torch.float32)
    split_len = triton.cdiv(triton.cdiv(S, NUM_SPLITS), BLOCK_N) * BLOCK_N   # whole tiles per split
    grid = (B, triton.cdiv(H, BLOCK_H), NUM_SPLITS)
    mla_decode_kernel[grid](q, kv_cache, part_o, part_lse, S, H, split_len, {scale}, KV_LORA=KV_LORA,
                            ROPE=ROPE, BLOCK_N=BLOCK_N, BLOCK_H=BLOCK_H, NUM_STAGES=NUM_STAGES, NUM_SPLITS=NUM_SPLITS,
                            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    mla_combine_kernel[(B * H,)](part_o, part_lse, out, NUM_SPLITS=NUM_SPLITS, KV_LORA=KV_LORA, num_warps=4)
    return out
'''


def consts(p, task) -> dict:
    """The constants the render defines at module level (the kernels' constexprs among them)."""
    return {k.upper(): v for k, v in sorted({**p, "num_warps": warps(p)}.items())}


PEEL_EARLY = {"off_by_one": {"stop": "hi_full - BLOCK_N"}}
PIPELINED = (BLOCK_H, BLOCK_N, WARPS, Param("num_stages", (1, 2, 3), 2))
PEELED_BUGS = {"missing_scale": {"scale": "SM_SCALE"}, **PEEL_EARLY}     # exp2: the log2(e) factor forgotten


def halves_launch(p, task):
    return tiled_launch(p, task, halves=2)


class MlaDecodeTriton(MlaDecodeSpec):
    impl = "triton"
    variants = (
        Rung("naive_two_pass", "one program per (batch, head); CUDA-core dots; pass 1 max/sum, pass 2 weights",
             (Param("BLOCK_N", (8, 16, 32), 16), Param("num_warps", (2, 4, 8), 4)),
             path="fp32", compute_eff=0.08, memory_eff=0.4, launch=naive_launch, render=naive_two_pass_src,
             consts=consts, bugs={"missing_scale": {"scale": ""}, "off_by_one": {"stop": "S - BLOCK_N"}}, bug_tasks=TAIL_KEYS_WEIGH),
        Rung("head_block_tl_dot", "BLOCK_H heads per program share each latent tile: tl.dot + online softmax",
             (BLOCK_H, BLOCK_N, WARPS), path="fp16", compute_eff=0.36, memory_eff=0.5, smem="dynamic",
             launch=tiled_launch, render=head_block_tl_dot_src, consts=consts,
             bugs={"missing_scale": {"scale": "1.0"}, "off_by_one": {"stop": "hi - BLOCK_N"}}),          # natural exp: no scale at all
        Rung("exp2_tail_peel", "log2e folded into the scale, exp2, unmasked steady loop + one masked tail block",
             (BLOCK_H, BLOCK_N, WARPS), path="fp16", compute_eff=0.42, memory_eff=0.55, smem="dynamic",
             launch=tiled_launch, render=exp2_tail_peel_src, consts=consts,
             bugs={"missing_scale": {"scale": "SM_SCALE"}, **PEEL_EARLY}),     # exp2: the log2(e) factor forgotten
        Rung("pipelined_stages", "tl.range(num_stages=...) multi-buffers the latent tiles behind the MMAs",
             PIPELINED, path="fp16", compute_eff=0.46, memory_eff=0.6, smem="dynamic", launch=tiled_launch,
             render=exp2_tail_peel_src, consts=consts, bugs=PEELED_BUGS),
        Rung("split_kv", "sequence split over NUM_SPLITS programs, partial (o, lse) merged by a combine kernel",
             (Param("num_splits", (2, 4, 8, 16, 32), 8), BLOCK_H, Param("BLOCK_N", (32, 64, 128), 32),
              Param("num_stages", (1, 2, 3), 2)), path="fp16", compute_eff=0.46, memory_eff=STREAM_EFF,
             smem="dynamic", launch=tiled_launch, render=split_kv_src, consts=consts,
             bugs={"bad_combine_index": {"nxt": "(offs_s + 1) % NUM_SPLITS"}, "missing_scale": {"scale": "SM_SCALE"}}),
        # off the menus (KERNELSTRAIN_DEVICE_UNCHECKED=1): the H100 ran it correct with its bugs failing, but behind
        # pipelined_stages' best at each shape (measurements/h100_roomT_r1.json): 681.7 us against 433.0 at B=128
        # H=128 (64 heads x 64 keys, 8 warps), 297.6 against 271.1 at B=32 (32 heads, 4 warps), as modelled (610.5 /
        # 407.0): the halved [64, 256] accumulator (255 regs + 368 B of stack against 896 on sm_90a) does not pay for
        # re-scoring the 576-wide row twice
        *unchecked(Rung("latent_halves", "pipelined_stages with the 512 latent output columns over two programs, "
                        "each scoring the whole row and accumulating its half", PIPELINED, path="fp16",
                        compute_eff=0.46, memory_eff=0.6, smem="dynamic", launch=halves_launch,
                        render=latent_halves_src, consts=consts, bugs=PEELED_BUGS, fit_as="pipelined_stages")),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        defs = "".join(f"{k} = {v}\n" for k, v in variant.consts(params, task).items())
        return (f"{TRITON_PRELUDE}\nKV_LORA, ROPE = {KV_LORA}, {ROPE}\nSM_SCALE = {SM_SCALE!r}\n"
                f"LOG2E = 1.4426950408889634\n{defs}{kernel}")

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        stages, split = params.get("num_stages", 1), "num_splits" in params
        const = {"KV_LORA": KV_LORA, "ROPE": ROPE, "BLOCK_N": params["BLOCK_N"]}
        out = {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32"} if split else {"o_ptr": ptr}
        sig = {"q_ptr": ptr, "kv_ptr": ptr, **out, "S": "i32", "H": "i32", **({"split_len": "i32"} if split else {}),
               "qk_scale": "fp32"}
        const.update({k.upper(): params[k] for k in ("BLOCK_H", "num_stages", "num_splits") if k in params})
        specs = [KernelSpec("mla_decode_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const, warps(params),
                            stages)]
        if split:
            specs.append(KernelSpec("mla_combine_kernel", {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "o_ptr": ptr,
                                    "NUM_SPLITS": "constexpr", "KV_LORA": "constexpr"},
                                    {"NUM_SPLITS": params["num_splits"], "KV_LORA": KV_LORA}, 4, 1))
        return specs
