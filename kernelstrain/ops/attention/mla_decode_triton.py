"""DeepSeek MLA decode in Triton, absorbed weights: all H heads' queries live in the 512-wide
latent space (+64 RoPE), so they attend to ONE shared cache row [c_kv | k_pe] per token, and
c_kv doubles as the value. Ladder: per-head two-pass CUDA-core kernel -> heads as the M side
of tl.dot, online softmax -> exp2, peeled masked tail -> pipelined latent tiles -> split-KV.
"""
from functools import partialmethod

from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE,
                    cdiv, kernelbench_program, triton_ptr)

KV_LORA, ROPE = 512, 64
DIM = KV_LORA + ROPE
SM_SCALE = 192 ** -0.5            # DeepSeek-V2/V3: 1/sqrt(qk_nope 128 + qk_rope 64)
BLOCK_H = Param("BLOCK_H", (16, 32, 64), 16)
BLOCK_N = Param("BLOCK_N", (16, 32, 64), 32)
WARPS = Param("num_warps", (4, 8), 4)


class MlaDecodeTriton(OpModule):
    op, impl, family = "mla_decode", "triton", "attention"
    title = "MLA decode attention (latent KV, absorbed weights)"
    desc = ("out[b, h, :] = softmax(q[b, h, :] . kv[b, :, :]^T * 192^-0.5) @ kv[b, :, :512]: q [B, H, 576] "
            "(absorbed q_nope 512 | q_pe 64), kv [B, S, 576] latent cache (c_kv 512 | k_pe 64) shared by all "
            "heads; out [B, H, 512] in the latent space; fp32 softmax.")
    dims = {"B": "batch (decode sequences)", "H": "query heads", "S": "cached tokens per sequence"}
    shapes = ({"B": 1, "H": 128, "S": 4000}, {"B": 32, "H": 128, "S": 4000}, {"B": 64, "H": 16, "S": 8000},
              {"B": 8, "H": 16, "S": 32700}, {"B": 128, "H": 128, "S": 2000}, {"B": 4, "H": 128, "S": 65000})
    dtypes = ("bf16", "fp16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("naive_two_pass", "one program per (batch, head); CUDA-core dots; pass 1 max/sum, pass 2 weights",
                (Param("BLOCK_N", (8, 16, 32), 16), Param("num_warps", (2, 4, 8), 4)),
                path="fp32", compute_eff=0.08, memory_eff=0.4, bugs=("missing_scale", "half_accumulator")),
        Variant("head_block_tl_dot", "BLOCK_H heads per program share each latent tile: tl.dot + online softmax",
                (BLOCK_H, BLOCK_N, WARPS), path="fp16", compute_eff=0.36, memory_eff=0.5, smem="dynamic",
                bugs=("missing_scale", "half_accumulator")),
        Variant("exp2_tail_peel", "log2e folded into the scale, exp2, unmasked steady loop + one masked tail block",
                (BLOCK_H, BLOCK_N, WARPS), path="fp16", compute_eff=0.42, memory_eff=0.55, smem="dynamic",
                bugs=("missing_scale", "half_accumulator")),
        Variant("pipelined_stages", "tl.range(num_stages=...) multi-buffers the latent tiles behind the MMAs",
                (BLOCK_H, BLOCK_N, WARPS, Param("num_stages", (1, 2, 3), 2)), path="fp16", compute_eff=0.46,
                memory_eff=0.6, smem="dynamic", bugs=("missing_scale", "half_accumulator")),
        Variant("split_kv", "sequence split over NUM_SPLITS programs, partial (o, lse) merged by a combine kernel",
                (Param("num_splits", (2, 4, 8, 16, 32), 8), BLOCK_H, Param("BLOCK_N", (32, 64), 32),
                 Param("num_stages", (1, 2), 2)), path="fp16", compute_eff=0.46, memory_eff=0.65, smem="dynamic",
                bugs=("bad_combine_index", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        b, h, s, e = task["B"], task["H"], task["S"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * b * h * s * (DIM + KV_LORA), bytes=(b * s * DIM + b * h * (DIM + KV_LORA)) * e)

    def _warps(self, variant, p):   # split_kv: 8 warps for 64-head blocks
        return (8 if p["BLOCK_H"] >= 64 else 4) if variant.tag == "split_kv" else p["num_warps"]

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        gpu, b, h, s, e, bn = task.gpu, task["B"], task["H"], task["S"], DTYPE_BYTES[task.dtype], params["BLOCK_N"]
        threads = self._warps(variant, params) * gpu.warp
        if variant.tag == "naive_two_pass":
            # every head re-streams its batch's cache twice; siblings running together hit in L2 (~6% miss)
            regs = 40 + bn * DIM // threads
            return Launch(grid=b * h, threads=threads, regs=min(regs, 255), bytes_per_access=16,
                          traffic=2 * (1 + (h - 1) * 0.06), compute_scale=2176 / 3328 * (1 if regs <= 255 else 0.5))
        bh, stages, splits = params["BLOCK_H"], params.get("num_stages", 1), params.get("num_splits", 1)
        tile = bn * DIM * e                               # one latent tile: K and V at once
        # pipelined: num_stages - 1 tiles in flight; else the tile sits in two layouts (K^T, V); AMD: q in registers
        smem = tile * max(1, stages - 1) if task.is_hip else \
            bh * DIM * e + tile * (2 if stages == 1 else stages - 1 + (bh >= 64)) + 1024
        regs = 48 + bh * KV_LORA // threads + bh * DIM * e // 4 // threads + bh * bn // threads   # acc [BLOCK_H, 512]
        spill = max(0, regs - 255)
        # wgmma on sm_90 only for 64-row tiles (else mma.sync); Triton MFMA attention lags on MI300X
        mma = (1.0 if (bh >= 64 or "wgmma" not in gpu.features) else 0.65) * (0.65 if task.is_hip else 1.0)
        overlap = {1: 0.72, 2: 0.92, 3: 1.0}[stages] if variant.tag in ("pipelined_stages", "split_kv") else 0.72
        traffic = 1 + (cdiv(h, bh) - 1) * 0.05 + spill / 255
        if splits > 1:                                    # fp32 partial outputs written then re-read
            traffic += 2 * b * h * splits * (KV_LORA + 1) * 4 / self.cost(task).bytes
        tail = s / (cdiv(cdiv(s, splits), bn) * bn * splits)
        return Launch(grid=b * cdiv(h, bh) * splits, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                      bytes_per_access=max(16, tile * max(1, stages - 1) // threads // 2), traffic=traffic,
                      compute_scale=mma * overlap * 255 / (255 + 2 * spill), tile_quant=h / (cdiv(h, bh) * bh) * tail,
                      launches=2 if splits > 1 else 1)

    def signature(self, task: Task) -> str:
        return "def mla_decode(q: Tensor[B, H, 576], kv_cache: Tensor[B, S, 576]) -> Tensor[B, H, 512]"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, kv_cache",
            body="s = torch.einsum('bhd,bsd->bhs', q.float(), kv_cache.float()) * self.sm_scale\n"
                 "        p = torch.softmax(s, dim=-1)\n"
                 "        return torch.einsum('bhs,bsc->bhc', p, kv_cache[..., :512].float()).to(q.dtype)",
            init="self.sm_scale = 192 ** -0.5",
            inputs="[torch.randn(B, H, 576, dtype=DTYPE, device='cuda'), torch.randn(B, S, 576, dtype=DTYPE, device='cuda')]")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        warps, stages = self._warps(variant, params), params.get("num_stages", 1)
        const = {"KV_LORA": KV_LORA, "ROPE": ROPE, "BLOCK_N": params["BLOCK_N"]}
        split = variant.tag == "split_kv"
        out = {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32"} if split else {"o_ptr": ptr}
        sig = {"q_ptr": ptr, "kv_ptr": ptr, **out, "S": "i32", "H": "i32", **({"split_len": "i32"} if split else {}),
               "qk_scale": "fp32"}
        const.update({k.upper(): params[k] for k in ("BLOCK_H", "num_stages", "num_splits") if k in params})
        specs = [KernelSpec("mla_decode_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const, warps, stages)]
        if split:
            specs.append(KernelSpec("mla_combine_kernel", {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "o_ptr": ptr,
                                    "NUM_SPLITS": "constexpr", "KV_LORA": "constexpr"},
                                    {"NUM_SPLITS": params["num_splits"], "KV_LORA": KV_LORA}, 4, 1))
        return specs

    # -- renders -------------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        p = {**params, "num_warps": self._warps(variant, params)}
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(p.items()))
        head = f"{TRITON_PRELUDE}\nKV_LORA, ROPE = {KV_LORA}, {ROPE}\nSM_SCALE = {SM_SCALE!r}\nLOG2E = 1.4426950408889634\n{consts}"
        return head + getattr(self, "_" + variant.tag)(p, bug)

    def _naive_two_pass(self, p, bug):
        l_t, scale = ("q_ptr.dtype.element_ty" if bug == "half_accumulator" else "tl.float32",
                      "" if bug == "missing_scale" else " * qk_scale")
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
    l_i = tl.full([], 0.0, {l_t})
    for start in range(0, S, BLOCK_N):
        s, kv = _scores(q_nope, q_pe, start + offs_n, S, kv_base, offs_c, offs_r, KV_LORA, ROPE)
        m_new = tl.maximum(m_i, tl.max(s, 0))
        l_i = (l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new), 0)).to({l_t})
        m_i = m_new
    # pass 2: recompute the scores, weight the latent rows (c_kv is also the value)
    acc = tl.zeros([KV_LORA], dtype=tl.float32)
    for start in range(0, S, BLOCK_N):
        s, kv = _scores(q_nope, q_pe, start + offs_n, S, kv_base, offs_c, offs_r, KV_LORA, ROPE)
        p = tl.exp(s - m_i) / l_i
        acc += tl.sum(p[:, None] * kv, 0)
    tl.store(o_ptr + pid.to(tl.int64) * KV_LORA + offs_c, acc.to(o_ptr.dtype.element_ty))


def mla_decode(q, kv_cache):
    B, H, _ = q.shape
    q, kv_cache = q.contiguous(), kv_cache.contiguous()
    out = torch.empty((B, H, KV_LORA), device=q.device, dtype=q.dtype)
    mla_decode_kernel[(B * H,)](q, kv_cache, out, kv_cache.shape[1], H, SM_SCALE,
                                KV_LORA=KV_LORA, ROPE=ROPE, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
    return out
'''

    _ATTEND = '''

@triton.jit
def _attend(acc, m_i, l_i, q_nope, q_pe, kv_base, rows, S, offs_c, offs_r,
            KV_LORA: tl.constexpr, ROPE: tl.constexpr, MASKED: tl.constexpr):
    # One BLOCK_N slice of the latent cache: c_kv is K for the scores and V for the output.
    ptrs = kv_base + rows[:, None] * (KV_LORA + ROPE)
    if MASKED:
        kv = tl.load(ptrs + offs_c[None, :], mask=(rows < S)[:, None], other=0.0)
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :], mask=(rows < S)[:, None], other=0.0)
    else:
        kv = tl.load(ptrs + offs_c[None, :])
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :])
    s = tl.dot(q_nope, tl.trans(kv)) + tl.dot(q_pe, tl.trans(k_pe))
    if MASKED:
        s = tl.where((rows < S)[None, :], s, float("-inf"))
    # online softmax: rescale what was accumulated under the old running max
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.EXP(m_i - m_new)
    p = tl.EXP(s - m_new[:, None])
    l_i = (l_i * alpha + tl.sum(p, 1)).to(l_i.dtype)
    acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)
    return acc, m_new, l_i
'''

    def _tiled(self, p, bug, exp, peel, split):
        """BLOCK_H heads of one sequence are the M side of every MMA: one latent tile serves them all."""
        l_type = "q_ptr.dtype.element_ty" if bug == "half_accumulator" else "tl.float32"
        args = "part_o_ptr, part_lse_ptr, S, H, split_len, qk_scale" if split else "o_ptr, S, H, qk_scale"
        extra = (", NUM_STAGES: tl.constexpr" if "num_stages" in p else "") + (", NUM_SPLITS: tl.constexpr" if split else "")
        call = "acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_pe, kv_base, {} + offs_n, S, offs_c, offs_r, KV_LORA, ROPE, {})"
        if not peel:
            body = f"    for start in range(lo, hi, BLOCK_N):\n        {call.format('start', 'True')}"
        else:
            rng = ("tl.range(lo, hi_full, BLOCK_N, num_stages=NUM_STAGES)" if "num_stages" in p
                   else "range(lo, hi_full, BLOCK_N)")
            body = (f"    hi_full = tl.maximum(lo, lo + (hi - lo) // BLOCK_N * BLOCK_N)\n"
                    f"    for start in {rng}:   # whole tiles: no predication\n        {call.format('start', 'False')}\n"
                    f"    if hi_full < hi:   # the ragged last tile is the only masked one\n"
                    f"        {call.format('hi_full', 'False' if bug == 'no_bounds_check' else 'True')}")
        if split:   # split_len is a multiple of BLOCK_N: only the last split has a ragged end, at S
            bounds = "split = tl.program_id(2)\n    lo = split * split_len\n    hi = tl.minimum(lo + split_len, S)"
            epilogue = """    # partial result of this split: normalised output and its log2-sum-exp (empty split: weight 0)
    part = (b * H + offs_h).to(tl.int64) * NUM_SPLITS + split
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    tl.store(part_o_ptr + part[:, None] * KV_LORA + offs_c[None, :], acc / l_safe[:, None], mask=mask_h[:, None])
    tl.store(part_lse_ptr + part, tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf")), mask=mask_h)"""
        else:
            bounds = "lo = 0\n    hi = S"
            epilogue = """    o_rows = o_ptr + (b * H + offs_h).to(tl.int64)[:, None] * KV_LORA
    tl.store(o_rows + offs_c[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=mask_h[:, None])"""
        return self._ATTEND.replace("EXP", exp) + f'''

@triton.jit
def mla_decode_kernel(q_ptr, kv_ptr, {args}, KV_LORA: tl.constexpr, ROPE: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr{extra}):
    b = tl.program_id(0)
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = offs_h < H
    offs_c = tl.arange(0, KV_LORA)
    offs_r = tl.arange(0, ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = q_ptr + (b * H + offs_h).to(tl.int64)[:, None] * (KV_LORA + ROPE)
    # the softmax scale is folded into the query once (fp32 multiply, back to the MMA type)
    q_nope = (tl.load(q_rows + offs_c[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)
    q_pe = (tl.load(q_rows + KV_LORA + offs_r[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)
    kv_base = kv_ptr + b.to(tl.int64) * S * (KV_LORA + ROPE)
    {bounds}
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype={l_type})
    acc = tl.zeros([BLOCK_H, KV_LORA], dtype=tl.float32)
{body}
{epilogue}
'''

    def _single(self, p, bug, exp, peel):
        scale = {"exp": "SM_SCALE", "exp2": "SM_SCALE * LOG2E"}[exp]
        if bug == "missing_scale":   # natural exp: no scale at all; exp2: the log2(e) factor forgotten
            scale = "1.0" if exp == "exp" else "SM_SCALE"
        stages = "NUM_STAGES=NUM_STAGES, num_stages=NUM_STAGES" if "num_stages" in p else "num_stages=1"
        return self._tiled(p, bug, exp, peel, False) + f'''

def mla_decode(q, kv_cache):
    B, H, _ = q.shape
    q, kv_cache = q.contiguous(), kv_cache.contiguous()
    out = torch.empty((B, H, KV_LORA), device=q.device, dtype=q.dtype)
    grid = (B, triton.cdiv(H, BLOCK_H))
    mla_decode_kernel[grid](q, kv_cache, out, kv_cache.shape[1], H, {scale}, KV_LORA=KV_LORA, ROPE=ROPE,
                            BLOCK_N=BLOCK_N, BLOCK_H=BLOCK_H, num_warps=NUM_WARPS, {stages})
    return out
'''

    _head_block_tl_dot = partialmethod(_single, exp="exp", peel=False)
    _exp2_tail_peel = partialmethod(_single, exp="exp2", peel=True)
    _pipelined_stages = _exp2_tail_peel

    def _split_kv(self, p, bug):
        nxt = "(offs_s + 1) % NUM_SPLITS" if bug == "bad_combine_index" else "offs_s"
        scale = "SM_SCALE" if bug == "missing_scale" else "SM_SCALE * LOG2E"
        return self._tiled(p, bug, "exp2", True, True) + f'''

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


def mla_decode(q, kv_cache):
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
