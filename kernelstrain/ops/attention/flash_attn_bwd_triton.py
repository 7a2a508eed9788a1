"""Causal flash-attention backward in Triton: dQ, dK, dV from q, k, v, o, dO and the forward's
log-sum-exp, recomputing P = exp(QK^T * scale - lse) tile by tile instead of storing it.

Ladder: one kernel per key block over every query block, delta = rowsum(dO * O) recomputed
inline, dQ through fp32 atomics -> delta in its own preprocess kernel -> causal block
skipping (only diagonal tiles masked) -> dK/dV kernel + separate dQ kernel, no atomics ->
exp2, big resident block with small streamed steps, software pipelining.
"""
from .._triton_smem import flash_bwd_smem
from ..base import Launch, Param, Rung, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE, triton_ptr
from .flash_attn_bwd_spec import ENTRY, FlashAttnBwdSpec, cost_of

BLOCK = Param("BLOCK", (32, 64, 128), 64)
WARPS = Param("num_warps", (4, 8), 8)
KEEP, KEEP_T = "offs_m[:, None] >= offs_n[None, :]", "offs_m[None, :] >= offs_n[:, None]"
OFF_KEEP = {"keep": "offs_m[:, None] > offs_n[None, :]"}      # off_by_one: the diagonal itself masked out
DK_SCALE = " * sm_scale"
ATOMIC = "    tl.atomic_add(dq32_ptr + q_off, tl.dot(ds.to(k.dtype), k) * qk_scale)\n"
RACY = {"dq_add": "    tl.store(dq32_ptr + q_off, tl.load(dq32_ptr + q_off) + tl.dot(ds.to(k.dtype), k) * qk_scale)\n"}


def bwd_launch(kind: str):
    """kind: naive (delta inline, atomics, all query blocks), atomic (delta preprocessed), skip
    (atomics, causal skip), split (dK/dV + dQ kernels) or tuned (split, K-major, pipelined)."""
    return lambda p, task: _bwd_launch(p, task, kind)


def _bwd_launch(params, task, kind):
    b, h, s, d = (task[k] for k in ("B", "H", "S", "D"))
    gpu, e = task.gpu, DTYPE_BYTES[task.dtype]
    threads = params["num_warps"] * gpu.warp
    big, small = params.get("BLOCK_BIG", params.get("BLOCK")), params.get("BLOCK_SMALL", params.get("BLOCK"))
    stages, n = params.get("num_stages", 1), s // big
    # resident: K, V (or Q, dO) of the big block + two fp32 accumulators; streamed: two small tiles
    regs = 40 + 2 * big * d // threads + big * d * e // 2 // threads + 2 * big * small // threads
    spill = max(0, regs - 255)
    stream = 2 * small * d * e                        # Q + dO (or K + V) of one step
    smem = flash_bwd_smem(task, kind, big, small, d, e, stages)
    reuse = min(1.0, big * small / (big + small) / (128 * 64 / 192)) ** 0.35
    # wgmma wants 64-row M sides; only the K-major tuned kernel keeps M = BLOCK_BIG in every MMA
    m_side = big if kind == "tuned" else min(big, small)
    mma = reuse * (1.0 if m_side >= gpu.triton_full_stage_rows else gpu.triton_small_tile_scale) * gpu.triton_dot_scale
    mma *= 1.0 if m_side // params["num_warps"] >= 16 else 0.55   # < 16 rows per warp: half-empty MMAs
    overlap = {1: 0.7, 2: 0.9, 3: 1.0}[stages]
    useful, base = s * (s + 1) / 2, cost_of(task).bytes
    worked = s * s if kind in ("naive", "atomic") else n * (n + 1) / 2 * big * big
    if kind in ("split", "tuned"):
        # no atomics, but the dQ kernel recomputes QK^T and dO V^T: 7 matmuls instead of 5
        scale, launches, traffic = 5 / 7, 3, 1.0 + (n - 1) * 0.02
    else:
        # fp32 read-modify-write of dQ at L2 once per (key block, query block) pair
        scale, launches = 0.55, 3 + (kind != "naive")
        traffic = 1.0 + worked / (big * s) * 0.05 * b * h * s * d * 8 / base + b * h * s * d * 8 / base
        if kind == "naive":                           # O re-read and rowsum(dO*O) per key block
            scale, traffic = scale * 0.85, traffic + n * 0.05 * b * h * s * d * e / base
    return Launch(grid=n * b * h, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                  bytes_per_access=max(16, stream * max(1, stages - 1) // threads // 2), traffic=traffic + spill / 128,
                  compute_scale=scale * mma * overlap * 255 / (255 + 2 * spill), tile_quant=useful / worked,
                  launches=launches)


def helper(keep=KEEP, exp="exp"):
    return f'''

@triton.jit
def _p_and_ds(q, k, v, do, lse, delta, offs_m, offs_n, qk_scale, MASKED: tl.constexpr):
    # recompute P from the saved log-sum-exp (no S x S matrix is ever stored), then
    # dS = P * (dO V^T - delta), delta_i = rowsum(dO_i * O_i)
    p = tl.{exp}(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
    if MASKED:                      # the diagonal tile: query i sees keys j <= i
        p = tl.where({keep}, p, 0.0)
    ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
    return p, ds
'''

PRE = '''

@triton.jit
def attn_bwd_preprocess(o_ptr, do_ptr, delta_ptr, S, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    # delta_i = rowsum(dO_i * O_i), once per row instead of once per (row, key block)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    off = bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    delta = tl.sum(tl.load(o_ptr + off).to(tl.float32) * tl.load(do_ptr + off).to(tl.float32), 1)
    tl.store(delta_ptr + bh * S + offs_m, delta)
'''

def dkdv(name, naive=False, skip=True, atomic=True, tuned=False, qk="sm_scale", dk_scale=DK_SCALE, keep_t=KEEP_T,
         dq_add=ATOMIC):
    """The key-block kernel: K, V of one BLOCK_N block resident, dK and dV in registers, Q and dO
    streamed in BLOCK_M steps; with `atomic` it also pushes dQ contributions to an fp32 buffer."""
    srcs = ("o_ptr, " if naive else "delta_ptr, ") + ("dq32_ptr, " if atomic else "")
    delta = ("tl.sum(do.to(tl.float32) * tl.load(o_ptr + q_off).to(tl.float32), 1)   # redone per key block"
             if naive else "tl.load(delta_ptr + bh * S + offs_m)")
    if tuned:   # K-major: every MMA has the resident BLOCK_N rows as its M side (wgmma-sized)
        body = f"""    pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])          # P^T [BLOCK_N, BLOCK_M]
    if MASKED:
        pT = tl.where({keep_t}, pT, 0.0)
    dsT = pT * (tl.dot(v, tl.trans(do)) - delta[None, :])
    dv += tl.dot(pT.to(do.dtype), do)
    dk += tl.dot(dsT.to(q.dtype), q)
"""
    else:
        body = """    p, ds = _p_and_ds(q, k, v, do, lse, delta, offs_m, offs_n, qk_scale, MASKED)
    dv += tl.dot(tl.trans(p.to(do.dtype)), do)
    dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
"""
    if atomic:   # every key block adds into the same dQ rows: fp32 atomics at L2 (qk_scale == sm_scale here)
        body += dq_add
    call = (f"dk, dv = _dkdv_step(dk, dv, k, v, {{}}, q_ptr, do_ptr, lse_ptr, {srcs}bh, S, offs_n, offs_d, {qk},\n"
            f"                            HEAD_DIM, BLOCK_M, {{}})")
    below = "tl.range(start_n + BLOCK_N, S, BLOCK_M, num_stages=NUM_STAGES)" if tuned else "range(start_n + BLOCK_N, S, BLOCK_M)"
    loop = (f"    for start_m in range(start_n, start_n + BLOCK_N, BLOCK_M):    # diagonal steps: masked\n"
                f"        {call.format('start_m', True)}\n"
                f"    for start_m in {below}:    # below the diagonal: no mask\n"
                f"        {call.format('start_m', False)}") if skip else (
                f"    for start_m in range(0, S, BLOCK_M):    # every query block, each one masked (none skipped)\n"
                f"        {call.format('start_m', True)}")
    return f'''

@triton.jit
def _dkdv_step(dk, dv, k, v, start_m, q_ptr, do_ptr, lse_ptr, {srcs}bh, S, offs_n, offs_d, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr):
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q_off = bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_ptr + q_off)
    do = tl.load(do_ptr + q_off)
    lse = tl.load(lse_ptr + bh * S + offs_m){" * LOG2E" if tuned else ""}
    delta = {delta}
{body}    return dk, dv


@triton.jit
def {name}(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, {srcs}dk_ptr, dv_ptr, S, sm_scale, HEAD_DIM: tl.constexpr,
{" " * (len(name) + 5)}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr{", NUM_STAGES: tl.constexpr" if tuned else ""}):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_off = bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(k_ptr + kv_off)
    v = tl.load(v_ptr + kv_off)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
{loop}
    tl.store(dk_ptr + kv_off, (dk{dk_scale}).to(dk_ptr.dtype.element_ty))
    tl.store(dv_ptr + kv_off, dv.to(dv_ptr.dtype.element_ty))
'''

WRAP = '''

DEF_LINE:
    B, H, S, D = q.shape
    assert S % BLOCK_BIG == 0 and S % 128 == 0, "S must be a multiple of the block size"
    q, k, v, o, do, lse = (t.contiguous() for t in (q, k, v, o, do, lse))
    dk, dv = torch.empty_like(k), torch.empty_like(v)
'''


def wrap(task, big: str) -> str:
    return WRAP.replace("BLOCK_BIG", big).replace("DEF_LINE", ENTRY.py_def(task))


DELTA = '''    delta = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    attn_bwd_preprocess[(S // 128, B * H)](o, do, delta, S, HEAD_DIM=D, BLOCK=128, num_warps=4)
'''

def atomic(p, task, naive=False, skip=False, keep=KEEP, dk_scale=DK_SCALE, dq_add=ATOMIC):
    """One kernel per key block; dQ accumulated in fp32 through atomics, cast afterwards."""
    return (helper(keep) + ("" if naive else PRE) + dkdv("attn_bwd_kernel", naive, skip, dk_scale=dk_scale, dq_add=dq_add)
            + wrap(task, "BLOCK") + ("" if naive else DELTA) + f'''\
    dq32 = torch.zeros((B, H, S, D), device=q.device, dtype=torch.float32)
    attn_bwd_kernel[(S // BLOCK, B * H)](q, k, v, do, lse, {"o" if naive else "delta"}, dq32, dk, dv, S, D ** -0.5,
                                         HEAD_DIM=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK, num_warps=NUM_WARPS, num_stages=1)
    return dq32.to(q.dtype), dk, dv
''')


def naive_atomic_dq_src(p, task, keep=KEEP, dq_add=ATOMIC):
    return atomic(p, task, naive=True, keep=keep, dq_add=dq_add)


def delta_preprocess_src(p, task, dk_scale=DK_SCALE, dq_add=ATOMIC):
    return atomic(p, task, dk_scale=dk_scale, dq_add=dq_add)


def causal_block_skip_src(p, task, keep=KEEP, dq_add=ATOMIC):
    return atomic(p, task, skip=True, keep=keep, dq_add=dq_add)


def two_kernels(p, task, tuned=False, qk="sm_scale", dk_scale=DK_SCALE, keep=KEEP, keep_t=KEEP_T):
    """dK/dV kernel per key block + dQ kernel per query block: no atomics, P recomputed in each."""
    rng = "tl.range(0, start_m, BLOCK_N, num_stages=NUM_STAGES)" if tuned else "range(0, start_m, BLOCK_N)"
    kw = ("NUM_STAGES=NUM_STAGES, num_warps=NUM_WARPS, num_stages=NUM_STAGES" if tuned
          else "num_warps=NUM_WARPS, num_stages=1")
    small, big = ("BLOCK_SMALL", "BLOCK_BIG") if tuned else ("BLOCK", "BLOCK")
    return helper(keep, "exp2" if tuned else "exp") + PRE + dkdv(
        "attn_bwd_dkdv_kernel", atomic=False, tuned=tuned, qk=qk, dk_scale=dk_scale, keep_t=keep_t) + f'''

@triton.jit
def _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, bh, S, start_n, offs_m, offs_d, qk_scale,
             HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    kv_off = bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(k_ptr + kv_off)
    p, ds = _p_and_ds(q, k, tl.load(v_ptr + kv_off), do, lse, delta, offs_m, offs_n, qk_scale, MASKED)
    return dq + tl.dot(ds.to(k.dtype), k)


@triton.jit
def attn_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, S, sm_scale, HEAD_DIM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr{", NUM_STAGES: tl.constexpr" if tuned else ""}):
    # Q, dO of one BLOCK_M query block stay resident; K, V stream past in BLOCK_N steps up to the
    # diagonal. P and dP are recomputed here rather than exchanged through atomics.
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_off = bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_ptr + q_off)
    do = tl.load(do_ptr + q_off)
    lse = tl.load(lse_ptr + bh * S + offs_m){" * LOG2E" if tuned else ""}
    delta = tl.load(delta_ptr + bh * S + offs_m)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in {rng}:    # keys left of the tile: no mask
        dq = _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, bh, S, start_n, offs_m, offs_d, {qk}, HEAD_DIM, BLOCK_N, False)
    for start_n in range(start_m, start_m + BLOCK_M, BLOCK_N):    # the diagonal: masked
        dq = _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, bh, S, start_n, offs_m, offs_d, {qk}, HEAD_DIM, BLOCK_N, True)
    tl.store(dq_ptr + q_off, (dq * sm_scale).to(dq_ptr.dtype.element_ty))
''' + wrap(task, big) + DELTA + f'''\
    dq = torch.empty_like(q)
    attn_bwd_dkdv_kernel[(S // {big}, B * H)](q, k, v, do, lse, delta, dk, dv, S, D ** -0.5, HEAD_DIM=D,
                                              BLOCK_M={small}, BLOCK_N={big}, {kw})
    attn_bwd_dq_kernel[(S // {big}, B * H)](q, k, v, do, lse, delta, dq, S, D ** -0.5, HEAD_DIM=D,
                                            BLOCK_M={big}, BLOCK_N={small}, {kw})
    return dq, dk, dv
'''


def split_dkdv_dq_src(p, task, dk_scale=DK_SCALE, keep=KEEP):
    return two_kernels(p, task, dk_scale=dk_scale, keep=keep)


def pipelined_tuned_src(p, task, qk="sm_scale * LOG2E", keep=KEEP, keep_t=KEEP_T):
    return two_kernels(p, task, tuned=True, qk=qk, keep=keep, keep_t=keep_t)


class FlashAttnBwdTriton(FlashAttnBwdSpec):
    impl = "triton"
    variants = (
        Rung("naive_atomic_dq", "per key block over all query blocks; delta recomputed inline; dQ by atomics",
             (BLOCK, WARPS), path="fp16", compute_eff=0.3, memory_eff=0.7, smem="dynamic", launch=bwd_launch("naive"),
             render=naive_atomic_dq_src, bugs={"racy_update": RACY, "off_by_one": OFF_KEEP}),
        Rung("delta_preprocess", "delta = rowsum(dO*O) once in a preprocess kernel; main kernel as before",
             (BLOCK, WARPS), path="fp16", compute_eff=0.33, memory_eff=0.75, smem="dynamic",
             launch=bwd_launch("atomic"), render=delta_preprocess_src,
             bugs={"missing_scale": {"dk_scale": ""}, "racy_update": RACY}),
        Rung("causal_block_skip", "query loop starts at the diagonal; only the diagonal tile is masked",
             (BLOCK, WARPS), path="fp16", compute_eff=0.36, memory_eff=0.8, smem="dynamic", launch=bwd_launch("skip"),
             render=causal_block_skip_src, bugs={"off_by_one": OFF_KEEP, "racy_update": RACY}),
        Rung("split_dkdv_dq", "dK/dV kernel per key block + dQ kernel per query block: no atomics, P recomputed",
             (BLOCK, WARPS), path="fp16", compute_eff=0.42, memory_eff=0.85, smem="dynamic", launch=bwd_launch("split"),
             render=split_dkdv_dq_src, bugs={"missing_scale": {"dk_scale": ""}, "off_by_one": OFF_KEEP}),
        Rung("pipelined_tuned", "exp2 on log2-scaled lse; BIG resident block, SMALL streamed steps; num_stages",
             (Param("BLOCK_BIG", (64, 128), 128), Param("BLOCK_SMALL", (16, 32, 64), 32), WARPS,
              Param("num_stages", (1, 2, 3), 2)), path="fp16", compute_eff=0.46, memory_eff=0.88,
             smem="dynamic", launch=bwd_launch("tuned"), render=pipelined_tuned_src,
             bugs={"missing_scale": {"qk": "sm_scale"},
                   "off_by_one": {**OFF_KEEP, "keep_t": "offs_m[None, :] > offs_n[:, None]"}}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(params.items()))
        return (f"{TRITON_PRELUDE}\nLOG2E = tl.constexpr(1.4426950408889634)  # a constexpr global: usable in @triton.jit\n"
                f"{consts}" + kernel)

    def triton_kernels(self, variant, params, task) -> list:
        ptr, d, tag = triton_ptr(task.dtype, task), task["D"], variant.tag
        warps, stages = params["num_warps"], params.get("num_stages", 1)
        pre = KernelSpec("attn_bwd_preprocess", {"o_ptr": ptr, "do_ptr": ptr, "delta_ptr": "*fp32", "S": "i32",
                         "HEAD_DIM": "constexpr", "BLOCK": "constexpr"}, {"HEAD_DIM": d, "BLOCK": 128}, 4, 1)
        inputs = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "do_ptr": ptr, "lse_ptr": "*fp32", "delta_ptr": "*fp32"}
        if "BLOCK" in params and tag != "split_dkdv_dq":     # one kernel per key block, dQ by atomics
            if tag == "naive_atomic_dq":
                inputs = {("o_ptr" if k == "delta_ptr" else k): v if k != "delta_ptr" else ptr for k, v in inputs.items()}
            const = {"HEAD_DIM": d, "BLOCK_M": params["BLOCK"], "BLOCK_N": params["BLOCK"]}
            sig = {**inputs, "dq32_ptr": "*fp32", "dk_ptr": ptr, "dv_ptr": ptr, "S": "i32", "sm_scale": "fp32",
                   **dict.fromkeys(const, "constexpr")}
            main = KernelSpec("attn_bwd_kernel", sig, const, warps, 1)
            return [main] if tag == "naive_atomic_dq" else [pre, main]
        const = ({"HEAD_DIM": d, "BLOCK_M": params["BLOCK"], "BLOCK_N": params["BLOCK"]} if tag == "split_dkdv_dq" else
                 {"HEAD_DIM": d, "BLOCK_M": params["BLOCK_SMALL"], "BLOCK_N": params["BLOCK_BIG"], "NUM_STAGES": stages})
        tail = {"S": "i32", "sm_scale": "fp32", **dict.fromkeys(const, "constexpr")}
        dq_const = dict(const, BLOCK_M=const["BLOCK_N"], BLOCK_N=const["BLOCK_M"])  # dQ: big query block, small key steps
        return [pre, KernelSpec("attn_bwd_dkdv_kernel", {**inputs, "dk_ptr": ptr, "dv_ptr": ptr, **tail}, const, warps, stages),
                KernelSpec("attn_bwd_dq_kernel", {**inputs, "dq_ptr": ptr, **tail}, dq_const, warps, stages)]
