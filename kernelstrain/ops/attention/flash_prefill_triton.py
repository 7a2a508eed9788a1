"""Causal attention prefill in Triton (FlashAttention-2 forward).

Ladder: scores materialised in global memory (QK^T, row softmax over the full row, PV: three
kernels) -> fused blocked online softmax with tl.dot over every key block -> causal block
skipping (mask only the diagonal band) -> software-pipelined K/V loads (num_stages) and
exp2 -> persistent programs walking query tiles heavy-first.
"""
from ..base import KernelSpec, Launch, Param, Task, Variant, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr
from .flash_prefill_spec import LOG2E, FlashPrefillSpec, causal_balance, causal_work

BM = Param("BLOCK_M", (64, 128), 128)
BN = Param("BLOCK_N", (32, 64), 64)
WARPS = Param("num_warps", (4, 8), 4)
# Triton's tl.dot flash kernel against this ladder's best: no warp specialisation on Hopper,
# and MFMA scheduling on CDNA3 leaves more of the peak unused.
ARCH_SCALE = {"sm_90a": 0.75, "gfx942": 0.6}


class FlashPrefillTriton(FlashPrefillSpec):
    impl = "triton"
    entry = None   # not converted yet: the spec's entry is for the CUDA module only so far
    variants = (
        Variant("materialized_scores", "QK^T to a global fp32 buffer, full-row softmax kernel, PV kernel",
                (Param("BLOCK_M", (64, 128), 64), Param("BLOCK_N", (64, 128), 64), WARPS), path="fp16",
                compute_eff=0.45, memory_eff=0.85, smem="dynamic", bugs=("missing_scale", "off_by_one")),
        Variant("online_softmax", "one fused kernel: running max/sum, tl.dot over every key block, masked",
                (BM, BN, WARPS), path="fp16", compute_eff=0.45, smem="dynamic", bugs=("missing_scale", "wrong_init")),
        Variant("causal_block_skip", "keys past the diagonal skipped; the mask only on the diagonal band",
                (BM, BN, WARPS), path="fp16", compute_eff=0.47, smem="dynamic", bugs=("off_by_one", "wrong_init")),
        Variant("pipelined", "num_stages-deep cp.async K/V ring, exp2 with log2(e) folded into the scale",
                (BM, Param("BLOCK_N", (32, 64, 128), 64), WARPS, Param("num_stages", (2, 3, 4), 2)), path="fp16",
                compute_eff=0.62, smem="dynamic", bugs=("off_by_one", "missing_scale")),
        Variant("persistent", "one program per SM slot loops over query tiles, longest (last) rows first",
                (BM, Param("BLOCK_N", (64, 128), 64), WARPS, Param("num_stages", (2, 3), 2),
                 Param("PROGRAMS_PER_SM", (1, 2), 2)), path="fp16", compute_eff=0.64, smem="dynamic",
                bugs=("wrong_init", "missing_scale")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, s, d, elt = task["B"], task["H"], task["S"], task["D"], DTYPE_BYTES[task.dtype]
        bm, bn, warps = params["BLOCK_M"], params["BLOCK_N"], params["num_warps"]
        threads, arch = warps * task.gpu.warp, ARCH_SCALE.get(task.gpu.arch, 1.0)
        if variant.tag != "materialized_scores" and bm == 64:
            arch *= 0.82                     # 64-row tiles: K/V smem reads amortised over half the rows
        regs = min(255, 64 + (bm * d + bm * bn) // (warps * 32))    # fp32 acc and score tiles per thread
        tiles, slots = b * h * cdiv(s, bm), task.gpu.sms
        if variant.tag == "materialized_scores":
            heads = max(1, (1 << 30) // (s * s * 6))               # heads per 1 GB scratch chunk
            scratch = 12 * s * s / (4 * s * d * elt)              # fp32 S write+read, fp16 P write+read
            return Launch(grid=b * h * cdiv(s, bm) * cdiv(s, bn), threads=threads, smem_bytes=(bm + bn) * d * elt,
                          regs=regs, bytes_per_access=16, traffic=1 + scratch, compute_scale=arch * 0.5,
                          launches=3 * cdiv(b * h, heads))
        stages = params.get("num_stages", 1)
        smem = self._smem(task, bm, bn, stages)
        if variant.tag == "online_softmax":
            return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16,
                          compute_scale=arch * causal_balance(tiles, cdiv(s, bm), slots, False),
                          tile_quant=causal_work(s, bm, bn, False), traffic=1 + cdiv(s, bm) / 16)
        work = causal_work(s, bm, bn, True)
        reread = 1 + cdiv(s, bm) / 32                            # K/V re-read per query tile, mostly from L2
        if variant.tag in ("causal_block_skip", "pipelined"):
            deep = 1.0 if stages >= 3 else 0.9 if stages == 2 else 0.8
            return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16,
                          compute_scale=arch * deep * causal_balance(tiles, cdiv(s, bm), slots, False),
                          tile_quant=work, traffic=reread)
        grid = min(tiles, slots * params["PROGRAMS_PER_SM"])
        return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16, traffic=reread,
                      compute_scale=arch * causal_balance(tiles, cdiv(s, bm), grid, True), tile_quant=work)

    @staticmethod
    def _smem(task: Task, bm: int, bn: int, stages: int) -> int:
        """Shared memory Triton allocates (measured with 16-byte-aligned pointers, as at run time)."""
        tile = bn * task["D"] * DTYPE_BYTES[task.dtype]
        if task.is_hip:                       # q stays in registers; the stream pipeliner buffers <= 2
            return (stages - 1 if 1 < stages <= 3 else 1) * 2 * tile
        if stages <= 1:                       # q tile plus one K or V tile, reused
            return bm * task["D"] * DTYPE_BYTES[task.dtype] + tile
        # cp.async ring of K and V: stages - 1 buffers each; Hopper's TMA-style pipeliner keeps stages
        bufs = stages if task.gpu.triton_full_stage_rows else stages - 1
        return bm * task["D"] * DTYPE_BYTES[task.dtype] + bufs * 2 * tile

    def signature(self, task: Task) -> str:
        return "def flash_prefill(q, k, v, scale) -> o    # q, k, v, o [B, H, S, D], causal"

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr, d = triton_ptr(task.dtype, task), task["D"]
        consts = {"HEAD_DIM": d, "BLOCK_M": params["BLOCK_M"], "BLOCK_N": params["BLOCK_N"]}
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "qk_scale": "fp32",
               "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        warps, stages = params["num_warps"], params.get("num_stages", 1)
        if variant.tag == "persistent":
            sig = {**sig, "BH": "i32"}
        if variant.tag != "materialized_scores":
            return [KernelSpec("flash_prefill_kernel", sig, consts, warps, stages)]
        scores = {"q_ptr": ptr, "k_ptr": ptr, "s_ptr": "*fp32", "S": "i32", "scale": "fp32",
                  "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        soft = {"s_ptr": "*fp32", "p_ptr": ptr, "S": "i32", "BLOCK": "constexpr"}
        pv = {"p_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "HEAD_DIM": "constexpr",
              "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        return [KernelSpec("attn_scores_kernel", scores, consts, warps, 1),
                KernelSpec("attn_softmax_kernel", soft, {"BLOCK": 1 << (task["S"] - 1).bit_length()}, 8, 1),
                KernelSpec("flash_prefill_kernel", pv, consts, warps, 1)]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        return TRITON_PRELUDE + getattr(self, "_" + variant.tag)(params, task, bug)

    def _materialized_scores(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * scale"
        causal = ">" if bug == "off_by_one" else ">="
        return f'''
@triton.jit
def attn_scores_kernel(q_ptr, k_ptr, s_ptr, S, scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    # one [BLOCK_M, BLOCK_N] tile of S = QK^T * scale, future keys set to -inf, stored as fp32
    bh = tl.program_id(2).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    k = tl.load(k_ptr + bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
    s = tl.dot(q, tl.trans(k)){scale}
    s = tl.where(offs_m[:, None] {causal} offs_n[None, :], s, float("-inf"))
    tl.store(s_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :], s)


@triton.jit
def attn_softmax_kernel(s_ptr, p_ptr, S, BLOCK: tl.constexpr):
    # one program per score row: the whole row (next power of two >= S) in registers
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    s = tl.load(s_ptr + row * S + offs, mask=offs < S, other=float("-inf"))
    e = tl.exp(s - tl.max(s, 0))
    tl.store(p_ptr + row * S + offs, (e / tl.sum(e, 0)).to(p_ptr.dtype.element_ty), mask=offs < S)


@triton.jit
def flash_prefill_kernel(p_ptr, v_ptr, o_ptr, S, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    # O = P V for one [BLOCK_M, HEAD_DIM] tile; P is zero past the diagonal but still multiplied
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        p = tl.load(p_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :])
        v = tl.load(v_ptr + bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        acc += tl.dot(p, v)
    tl.store(o_ptr + bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(o_ptr.dtype.element_ty))


def flash_prefill(q, k, v, scale):
    B, H, S, D = q.shape
    BLOCK_M, BLOCK_N = {p["BLOCK_M"]}, {p["BLOCK_N"]}
    assert S % BLOCK_M == 0 and S % BLOCK_N == 0
    q, k, v = (t.reshape(B * H, S, D) for t in (q, k, v))
    o = torch.empty_like(q)
    chunk = max(1, (1 << 30) // (S * S * 6))      # heads per pass: fp32 scores + fp16 probs <= 1 GB
    scores = torch.empty(chunk, S, S, dtype=torch.float32, device=q.device)
    probs = torch.empty(chunk, S, S, dtype=q.dtype, device=q.device)
    for h0 in range(0, B * H, chunk):
        n = min(chunk, B * H - h0)
        attn_scores_kernel[(S // BLOCK_M, S // BLOCK_N, n)](q[h0:], k[h0:], scores, S, scale, HEAD_DIM=D,
                                                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps={p["num_warps"]})
        attn_softmax_kernel[(n * S,)](scores, probs, S, BLOCK=triton.next_power_of_2(S), num_warps=8)
        flash_prefill_kernel[(S // BLOCK_M, n)](probs, v[h0:], o[h0:], S, HEAD_DIM=D, BLOCK_M=BLOCK_M,
                                                BLOCK_N=BLOCK_N, num_warps={p["num_warps"]})
    return o.view(B, H, S, D)
'''

    @staticmethod
    def _attend(bug, exp="tl.exp", causal=">="):
        rescale = "" if bug == "missing_scale" else " * alpha[:, None]"
        return f'''
@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, lo, hi, qk_scale, HEAD_DIM: tl.constexpr,
            BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    # key blocks [lo, hi): S = QK^T on the tensor cores, running max/sum, O += P V
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            s = tl.where(offs_m[:, None] {causal} offs_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = {exp}(m_i - m_new)
        p = {exp}(s - m_new[:, None])
        v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        acc = acc{rescale} + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    return acc, l_i, m_i
'''

    _PROLOGUE = '''    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = bh * S * HEAD_DIM                      # int64: B*H*S*D can pass 2**31
    q = tl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], {m0}, tl.float32)
    l_i = tl.full([BLOCK_M], {l0}, tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
'''
    _EPILOGUE = '''    o = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], o.to(o_ptr.dtype.element_ty))
'''
    _SPLIT_LOOP = '''    # keys left of the diagonal band need no mask; only the band does. It starts on a BLOCK_N
    # boundary, so BLOCK_N may exceed BLOCK_M: keys past the tile's last row are masked out
    band = start_m * BLOCK_M // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, 0, band,
                            qk_scale, HEAD_DIM, BLOCK_N, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, band,
                            (start_m + 1) * BLOCK_M, qk_scale, HEAD_DIM, BLOCK_N, True)
'''

    def _kernel(self, p, body, wrong_init=False, persistent=False):
        # wrong_init starts (m, l) at (0, 1) instead of (-inf, 0): a phantom key of score 0 and value 0
        m0, l0 = ("0.0", "1.0") if wrong_init else ('float("-inf")', "0.0")
        head = '''
@triton.jit
def flash_prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr{extra}):
'''.format(extra=", BH" if persistent else "")
        if not persistent:
            head += "    start_m = tl.program_id(0)\n    bh = tl.program_id(1).to(tl.int64)\n"
        scale = "scale * %r" % LOG2E if p.get("num_stages") else "scale"
        grid = "(S // BLOCK_M, B * H)"
        extra = ""
        if persistent:
            grid = "(min(num_tiles, torch.cuda.get_device_properties(q.device).multi_processor_count * " \
                   f"{p['PROGRAMS_PER_SM']}),)"
            extra = ", BH=B * H"
        stages = f", num_stages={p['num_stages']}" if p.get("num_stages") else ""
        return head + body.format(m0=m0, l0=l0) + f'''

def flash_prefill(q, k, v, scale):
    B, H, S, D = q.shape
    BLOCK_M, BLOCK_N = {p["BLOCK_M"]}, {p["BLOCK_N"]}
    assert S % BLOCK_M == 0 and S % BLOCK_N == 0, "tiles must divide the sequence"
    o = torch.empty_like(q)
    num_tiles = S // BLOCK_M * B * H
    flash_prefill_kernel[{grid}](q, k, v, o, S, {scale}{extra}, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                         num_warps={p["num_warps"]}{stages})
    return o
'''

    def _online_softmax(self, p, task, bug):
        return self._attend(bug) + self._kernel(p, self._PROLOGUE + '''\
    # every key block is visited; the causal mask zeroes the upper triangle inside each one
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, 0, S, qk_scale,
                            HEAD_DIM, BLOCK_N, True)
''' + self._EPILOGUE, bug == "wrong_init")

    def _causal_block_skip(self, p, task, bug):
        return self._attend(None, causal=">" if bug == "off_by_one" else ">=") + self._kernel(
            p, self._PROLOGUE + self._SPLIT_LOOP + self._EPILOGUE, bug == "wrong_init")

    def _pipelined(self, p, task, bug):
        # qk_scale arrives with log2(e) folded in, so exp2 is exact and one MUFU instruction
        return self._attend(bug, "tl.exp2", ">" if bug == "off_by_one" else ">=") + self._kernel(
            p, self._PROLOGUE + self._SPLIT_LOOP + self._EPILOGUE)

    def _persistent(self, p, task, bug):
        body = self._PROLOGUE + self._SPLIT_LOOP + self._EPILOGUE
        body = "\n".join("    " + line if line else line for line in body.split("\n"))
        loop = f'''    # persistent: the grid fills the SMs once; tile ids run heavy-first (LPT) so the
    # cheap query blocks near the top of the causal triangle fill the tail
    num_m = S // BLOCK_M
    num_tiles = num_m * BH
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        start_m = num_m - 1 - tile // BH
        bh = (tile % BH).to(tl.int64)
'''
        return self._attend(bug, "tl.exp2") + self._kernel(p, loop + body, bug == "wrong_init", persistent=True)
