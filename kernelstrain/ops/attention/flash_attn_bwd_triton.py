"""Causal flash-attention backward in Triton: dQ, dK, dV from q, k, v, o, dO and the forward's
log-sum-exp, recomputing P = exp(QK^T * scale - lse) tile by tile instead of storing it.

Ladder: one kernel per key block over every query block, delta = rowsum(dO * O) recomputed
inline, dQ through fp32 atomics -> delta in its own preprocess kernel -> causal block
skipping (only diagonal tiles masked) -> dK/dV kernel + separate dQ kernel, no atomics ->
exp2, big resident block with small streamed steps, software pipelining.
"""
from functools import partialmethod

from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE,
                    kernelbench_program, triton_ptr)

BLOCK = Param("BLOCK", (32, 64, 128), 64)
WARPS = Param("num_warps", (4, 8), 8)


class FlashAttnBwdTriton(OpModule):
    op, impl, family = "flash_attn_bwd", "triton", "attention"
    title = "Flash attention backward (causal)"
    desc = ("Given q, k, v, o, dO [B, H, S, D] and lse [B, H, S] (fp32, natural log) of causal softmax attention "
            "with scale D^-0.5, compute dQ, dK, dV [B, H, S, D]: P = exp(QK^T*scale - lse), dV = P^T dO, "
            "dS = P * (dO V^T - rowsum(dO*O)), dQ = scale dS K, dK = scale dS^T Q. S is a multiple of 128.")
    dims = {"B": "batch", "H": "heads", "S": "sequence length", "D": "head dim"}
    shapes = ({"B": 4, "H": 32, "S": 2048, "D": 128}, {"B": 2, "H": 32, "S": 4096, "D": 128},
              {"B": 1, "H": 32, "S": 8192, "D": 128}, {"B": 8, "H": 16, "S": 1024, "D": 64},
              {"B": 16, "H": 16, "S": 512, "D": 64}, {"B": 2, "H": 16, "S": 4096, "D": 64})
    dtypes = ("bf16", "fp16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("naive_atomic_dq", "per key block over all query blocks; delta recomputed inline; dQ by atomics",
                (BLOCK, WARPS), path="fp16", compute_eff=0.3, memory_eff=0.7, smem="dynamic",
                bugs=("racy_update", "off_by_one")),
        Variant("delta_preprocess", "delta = rowsum(dO*O) once in a preprocess kernel; main kernel as before",
                (BLOCK, WARPS), path="fp16", compute_eff=0.33, memory_eff=0.75, smem="dynamic",
                bugs=("missing_scale", "racy_update")),
        Variant("causal_block_skip", "query loop starts at the diagonal; only the diagonal tile is masked",
                (BLOCK, WARPS), path="fp16", compute_eff=0.36, memory_eff=0.8, smem="dynamic",
                bugs=("off_by_one", "racy_update")),
        Variant("split_dkdv_dq", "dK/dV kernel per key block + dQ kernel per query block: no atomics, P recomputed",
                (BLOCK, WARPS), path="fp16", compute_eff=0.42, memory_eff=0.85, smem="dynamic",
                bugs=("missing_scale", "off_by_one")),
        Variant("pipelined_tuned", "exp2 on log2-scaled lse; BIG resident block, SMALL streamed steps; num_stages",
                (Param("BLOCK_BIG", (64, 128), 128), Param("BLOCK_SMALL", (16, 32, 64), 32), WARPS,
                 Param("num_stages", (1, 2, 3), 2)), path="fp16", compute_eff=0.46, memory_eff=0.88,
                smem="dynamic", bugs=("missing_scale", "off_by_one")),
    )

    def cost(self, task: Task) -> Cost:   # 5 matmuls over the S(S+1)/2 causal pairs
        b, h, s, d = (task[k] for k in ("B", "H", "S", "D"))
        return Cost(flops=10 * b * h * d * s * (s + 1) // 2, bytes=8 * b * h * s * d * DTYPE_BYTES[task.dtype] + 4 * b * h * s)

    # -- launch model --------------------------------------------------------------
    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, s, d = (task[k] for k in ("B", "H", "S", "D"))
        gpu, e, tag = task.gpu, DTYPE_BYTES[task.dtype], variant.tag
        threads = params["num_warps"] * gpu.warp
        big, small = params.get("BLOCK_BIG", params.get("BLOCK")), params.get("BLOCK_SMALL", params.get("BLOCK"))
        stages, n = params.get("num_stages", 1), s // big
        # resident: K, V (or Q, dO) of the big block + two fp32 accumulators; streamed: two small tiles
        regs = 40 + 2 * big * d // threads + big * d * e // 2 // threads + 2 * big * small // threads
        spill = max(0, regs - 255)
        stream = 2 * small * d * e                        # Q + dO (or K + V) of one step
        smem = (big * d * e * (0 if task.is_hip else 2) + stream * max(1, stages - (0 if "wgmma" in gpu.features else 1))
                + big * small * e)
        reuse = min(1.0, big * small / (big + small) / (128 * 64 / 192)) ** 0.35
        # wgmma wants 64-row M sides; only the K-major tuned kernel keeps M = BLOCK_BIG in every MMA
        m_side = big if tag == "pipelined_tuned" else min(big, small)
        mma = reuse * (1.0 if (m_side >= 64 or "wgmma" not in gpu.features) else 0.75) * (0.65 if task.is_hip else 1)
        mma *= 1.0 if m_side // params["num_warps"] >= 16 else 0.55   # < 16 rows per warp: half-empty MMAs
        overlap = {1: 0.7, 2: 0.9, 3: 1.0}[stages]
        useful, base = s * (s + 1) / 2, self.cost(task).bytes
        worked = s * s if tag in ("naive_atomic_dq", "delta_preprocess") else n * (n + 1) / 2 * big * big
        if tag in ("split_dkdv_dq", "pipelined_tuned"):
            # no atomics, but the dQ kernel recomputes QK^T and dO V^T: 7 matmuls instead of 5
            scale, launches, traffic = 5 / 7, 3, 1.0 + (n - 1) * 0.02
        else:
            # fp32 read-modify-write of dQ at L2 once per (key block, query block) pair
            scale, launches = 0.55, 3 + (tag != "naive_atomic_dq")
            traffic = 1.0 + worked / (big * s) * 0.05 * b * h * s * d * 8 / base + b * h * s * d * 8 / base
            if tag == "naive_atomic_dq":                  # O re-read and rowsum(dO*O) per key block
                scale, traffic = scale * 0.85, traffic + n * 0.05 * b * h * s * d * e / base
        return Launch(grid=n * b * h, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                      bytes_per_access=max(16, stream * max(1, stages - 1) // threads // 2), traffic=traffic + spill / 128,
                      compute_scale=scale * mma * overlap * 255 / (255 + 2 * spill), tile_quant=useful / worked,
                      launches=launches)

    def signature(self, task: Task) -> str:
        return "def flash_attn_bwd(q, k, v, o, lse, do) -> (dq, dk, dv): q, k, v, o, do [B, H, S, D], lse fp32 [B, H, S]"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, k, v, o, lse, do",
            body="q, k, v = (t.detach().requires_grad_() for t in (q, k, v))\n"
                 "        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
                 "        out.backward(do)\n"
                 "        return q.grad, k.grad, v.grad",
            # o and lse come from the same causal forward the kernel differentiates
            inputs="[q := torch.randn(B, H, S, D, dtype=DTYPE, device='cuda'), k := torch.randn_like(q),\n"
                   "            v := torch.randn_like(q), torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),\n"
                   "            (q.float() @ k.float().transpose(-1, -2) * D ** -0.5).masked_fill(\n"
                   "                torch.ones(S, S, dtype=torch.bool, device='cuda').triu(1), float('-inf')).logsumexp(-1),\n"
                   "            torch.randn_like(q)]")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
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

    # -- renders -------------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(params.items()))
        return (f"{TRITON_PRELUDE}\nLOG2E = tl.constexpr(1.4426950408889634)  # a constexpr global: usable in @triton.jit\n"
                f"{consts}" + getattr(self, "_" + variant.tag)(params, bug))

    def _helper(self, bug, exp="exp"):
        keep = "offs_m[:, None] > offs_n[None, :]" if bug == "off_by_one" else "offs_m[:, None] >= offs_n[None, :]"
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

    _PRE = '''

@triton.jit
def attn_bwd_preprocess(o_ptr, do_ptr, delta_ptr, S, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    # delta_i = rowsum(dO_i * O_i), once per row instead of once per (row, key block)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    off = bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    delta = tl.sum(tl.load(o_ptr + off).to(tl.float32) * tl.load(do_ptr + off).to(tl.float32), 1)
    tl.store(delta_ptr + bh * S + offs_m, delta)
'''

    def _dkdv(self, bug, name, naive=False, skip=True, atomic=True, tuned=False):
        """The key-block kernel: K, V of one BLOCK_N block resident, dK and dV in registers, Q and dO
        streamed in BLOCK_M steps; with `atomic` it also pushes dQ contributions to an fp32 buffer."""
        qk = "sm_scale * LOG2E" if tuned and bug != "missing_scale" else "sm_scale"
        dk_scale = "" if bug == "missing_scale" and not tuned else " * sm_scale"
        srcs = ("o_ptr, " if naive else "delta_ptr, ") + ("dq32_ptr, " if atomic else "")
        delta = ("tl.sum(do.to(tl.float32) * tl.load(o_ptr + q_off).to(tl.float32), 1)   # redone per key block"
                 if naive else "tl.load(delta_ptr + bh * S + offs_m)")
        if tuned:   # K-major: every MMA has the resident BLOCK_N rows as its M side (wgmma-sized)
            keep = "offs_m[None, :] > offs_n[:, None]" if bug == "off_by_one" else "offs_m[None, :] >= offs_n[:, None]"
            body = f"""    pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])          # P^T [BLOCK_N, BLOCK_M]
    if MASKED:
        pT = tl.where({keep}, pT, 0.0)
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
            body += ("    tl.store(dq32_ptr + q_off, tl.load(dq32_ptr + q_off) + tl.dot(ds.to(k.dtype), k) * qk_scale)\n"
                     if bug == "racy_update" else "    tl.atomic_add(dq32_ptr + q_off, tl.dot(ds.to(k.dtype), k) * qk_scale)\n")
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

    _WRAP = '''

def flash_attn_bwd(q, k, v, o, lse, do):
    B, H, S, D = q.shape
    assert S % BLOCK_BIG == 0 and S % 128 == 0, "S must be a multiple of the block size"
    q, k, v, o, do, lse = (t.contiguous() for t in (q, k, v, o, do, lse))
    dk, dv = torch.empty_like(k), torch.empty_like(v)
'''
    _DELTA = '''    delta = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    attn_bwd_preprocess[(S // 128, B * H)](o, do, delta, S, HEAD_DIM=D, BLOCK=128, num_warps=4)
'''

    def _atomic(self, p, bug, naive=False, skip=False):
        """One kernel per key block; dQ accumulated in fp32 through atomics, cast afterwards."""
        return (self._helper(bug) + ("" if naive else self._PRE) + self._dkdv(bug, "attn_bwd_kernel", naive, skip)
                + self._WRAP.replace("BLOCK_BIG", "BLOCK") + ("" if naive else self._DELTA) + f'''\
    dq32 = torch.zeros((B, H, S, D), device=q.device, dtype=torch.float32)
    attn_bwd_kernel[(S // BLOCK, B * H)](q, k, v, do, lse, {"o" if naive else "delta"}, dq32, dk, dv, S, D ** -0.5,
                                         HEAD_DIM=D, BLOCK_M=BLOCK, BLOCK_N=BLOCK, num_warps=NUM_WARPS, num_stages=1)
    return dq32.to(q.dtype), dk, dv
''')

    _naive_atomic_dq = partialmethod(_atomic, naive=True)
    _delta_preprocess = partialmethod(_atomic)
    _causal_block_skip = partialmethod(_atomic, skip=True)

    def _two_kernels(self, p, bug, tuned=False):
        """dK/dV kernel per key block + dQ kernel per query block: no atomics, P recomputed in each."""
        qk = "sm_scale * LOG2E" if tuned and bug != "missing_scale" else "sm_scale"
        rng = "tl.range(0, start_m, BLOCK_N, num_stages=NUM_STAGES)" if tuned else "range(0, start_m, BLOCK_N)"
        kw = ("NUM_STAGES=NUM_STAGES, num_warps=NUM_WARPS, num_stages=NUM_STAGES" if tuned
              else "num_warps=NUM_WARPS, num_stages=1")
        small, big = ("BLOCK_SMALL", "BLOCK_BIG") if tuned else ("BLOCK", "BLOCK")
        return self._helper(bug, "exp2" if tuned else "exp") + self._PRE + self._dkdv(
            bug, "attn_bwd_dkdv_kernel", atomic=False, tuned=tuned) + f'''

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
''' + self._WRAP.replace("BLOCK_BIG", big) + self._DELTA + f'''\
    dq = torch.empty_like(q)
    attn_bwd_dkdv_kernel[(S // {big}, B * H)](q, k, v, do, lse, delta, dk, dv, S, D ** -0.5, HEAD_DIM=D,
                                              BLOCK_M={small}, BLOCK_N={big}, {kw})
    attn_bwd_dq_kernel[(S // {big}, B * H)](q, k, v, do, lse, delta, dq, S, D ** -0.5, HEAD_DIM=D,
                                            BLOCK_M={big}, BLOCK_N={small}, {kw})
    return dq, dk, dv
'''

    _split_dkdv_dq = partialmethod(_two_kernels, tuned=False)
    _pipelined_tuned = partialmethod(_two_kernels, tuned=True)
