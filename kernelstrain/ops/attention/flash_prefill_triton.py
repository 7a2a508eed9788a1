"""Causal attention prefill in Triton (FlashAttention-2 forward).

Ladder: scores materialised in global memory (QK^T, row softmax over the full row, PV: three
kernels) -> fused blocked online softmax with tl.dot over every key block -> causal block
skipping (mask only the diagonal band) -> software-pipelined K/V loads (num_stages) and
exp2 -> tensor descriptors (Q/K/V tiles by TMA into swizzled shared memory on Hopper, O stored
through one) -> persistent programs walking query tiles heavy-first.
"""
from dataclasses import replace

from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, launch_stages, triton_ptr
from ._attn_check import triton_check
from ._flash_materialized_triton import materialized_scores_src
from ._flash_tma_triton import tma_descriptors_src as tma_src
from ._flash_spill import spill_scale
from ._flash_tiles import mfma_p
from .flash_prefill_spec import ENTRY, LOG2E, FlashPrefillSpec, causal_balance, causal_work

BM = Param("BLOCK_M", (64, 128), 128)
BN = Param("BLOCK_N", (32, 64), 64)
WARPS = Param("num_warps", (4, 8), 4)
RESCALE = " * alpha[:, None]"
M0, L0 = 'float("-inf")', "0.0"
WRONG_INIT = {"m0": "0.0", "l0": "1.0"}   # (m, l) start at (0, 1): a phantom key of score 0 and value 0


def common(p, task) -> tuple:
    """(threads, Triton flash efficiency, regs, query tiles) of every rung."""
    bm, bn, warps, d = p["BLOCK_M"], p["BLOCK_N"], p["num_warps"], task["D"]
    regs = min(255, 64 + (bm * d + bm * bn) // (warps * 32))    # fp32 acc and score tiles per thread
    return warps * task.gpu.warp, task.gpu.triton_flash_scale, regs, task["B"] * task["H"] * cdiv(task["S"], bm)


def smem_of(task, bm: int, bn: int, stages: int, warps: int = 4) -> int:
    """Shared memory Triton allocates (measured with 16-byte-aligned pointers, as at run time)."""
    e = DTYPE_BYTES[task.dtype]
    tile = bn * task["D"] * e
    if task.gpu.triton_q_in_registers:     # q stays in registers; the stream pipeliner buffers <= 2
        return (stages - 1 if 1 < stages <= 3 else 1) * 2 * tile + (mfma_p(bm, bn, e, warps) if stages > 1 else 0)
    if stages <= 1:                       # q tile plus one K or V tile, reused
        return bm * task["D"] * DTYPE_BYTES[task.dtype] + tile
    # cp.async ring of K and V: stages - 1 buffers each; Hopper's TMA-style pipeliner keeps stages
    bufs = stages if task.gpu.triton_full_stage_rows else stages - 1
    return bm * task["D"] * DTYPE_BYTES[task.dtype] + bufs * 2 * tile


def materialized_launch(p, task):
    s, d, elt, bm, bn = task["S"], task["D"], DTYPE_BYTES[task.dtype], p["BLOCK_M"], p["BLOCK_N"]
    threads, arch, regs, _ = common(p, task)
    heads = max(1, (1 << 30) // (s * s * 6))               # heads per 1 GB scratch chunk
    scratch = 12 * s * s / (4 * s * d * elt)              # fp32 S write+read, fp16 P write+read
    # the scores kernel's Q and K tiles; gfx942 stages them in turn through one LDS buffer (MI300X)
    tiles = max(bm, bn) if "mfma" in task.gpu.features else bm + bn
    smem = tiles * d * elt
    stages = launch_stages(p, task)
    if stages > 1:
        # the PV kernel's loop is pipelined at the launch's depth: a V ring of num_stages tiles on Hopper (one
        # fewer elsewhere) and one P tile (Triton 3.9 metadata.shared at 3 stages, sm_80/86/90a/120a, D=64/128,
        # 64-128 rows and keys: exact; H100 BLOCK_M=BLOCK_N=128 D=128 131,072 B, the scores kernel's 65,536)
        bufs = stages if task.gpu.triton_full_stage_rows else stages - 1
        smem = max(smem, bufs * bn * d * elt + bm * bn * elt)
    return Launch(grid=task["B"] * task["H"] * cdiv(s, bm) * cdiv(s, bn), threads=threads,
                  smem_bytes=smem, regs=regs, bytes_per_access=16, traffic=1 + scratch,
                  compute_scale=arch * 0.5, launches=3 * cdiv(task["B"] * task["H"], heads))


# Hopper's Triton pipeliner (triton_full_stage_rows: the whole K/V ring buffered, the dots on wgmma), pointer loop:
# past 3 stages a ring adds no overlap, only size (the fit's num_stages term, from H200 rows, rewards depth: DEEP takes
# it back); 32-key tiles pay the softmax reductions and barrier twice per 64 keys; 128 rows on 4 warps (one warpgroup)
# hold 192+ fp32 registers a thread and issue both m64 halves in turn, where 8 warps split them over two warpgroups
# (the fit's num_warps term, from rows whose 8 warps split 64 rows, counts 8 slower: TWO_WG takes it back). H100 / H200
# rows (docs/roomA_device_h100_a1/, measurements/h*_gpucheck_*.json): B=1 H=32 S=2048 D=128, 64 x 64 tiles 121.8 /
# 104.3 / 131.2 us at 2 / 3 / 4 stages, 64 x 32 116.8 / 124.5 at 3 / 4, 128 x 32 133.0 / 133.7, 128 x 64 on 4 warps
# 121.5 / 124.5 at 2 / 3 and on 8 warps 111.8 at 3; D=64 (H200) 64 x 64 35.0 / 37.8 at 2 / 4 (B=16 H=12 S=512), 64.9
# / 70.0 at 3 / 4 (B=8 H=16 S=1024); a5's 15 configs at D=64 (H100). The pipelined + tma rows' within-shape Spearman
# 0.65 -> 0.78, pair order 0.81 -> 0.86 (58 rows; all 133: 0.82 / 0.86 -> 0.80 / 0.86; scripts/roomA_order.py).
HOPPER_DEEP, HOPPER_BN32, HOPPER_ONE_WG, HOPPER_TWO_WG = 0.8, 0.85, 0.9, 1.05


def hopper_ring(p, task, stages: int) -> float:
    """compute_scale of the pointer loop on Hopper-class GPUs (1.0 elsewhere and for causal_block_skip: no stages)."""
    if not task.gpu.triton_full_stage_rows or "num_stages" not in p:
        return 1.0
    wg = {4: HOPPER_ONE_WG, 8: HOPPER_TWO_WG}.get(p["num_warps"], 1.0) if p["BLOCK_M"] == 128 else 1.0
    return (HOPPER_DEEP if stages > 3 else 1.0) * (HOPPER_BN32 if p["BLOCK_N"] == 32 else 1.0) * wg


def fused_launch(skip: bool = True):
    """The fused rungs: every key block (skip False: online_softmax), the diagonal band only
    (causal_block_skip, pipelined), or persistent programs heavy-first (PROGRAMS_PER_SM)."""
    return lambda p, task: _fused_launch(p, task, skip)


def _fused_launch(p, task, skip):
    # online_softmax and causal_block_skip name no num_stages: on NVIDIA their K/V loop runs Triton's default 3
    # stages (metadata.shared at 3 stages = smem_of(3) on sm_80/86/90a/120a at D=64/128 but one D=64 tile 10%
    # over; H100 BLOCK_M=128 BLOCK_N=64 D=128: 131,072 B where the one-stage figure said 49,152)
    s, bm, bn, stages = task["S"], p["BLOCK_M"], p["BLOCK_N"], launch_stages(p, task)
    threads, arch, regs, tiles = common(p, task)
    # 64-row tiles: K/V smem reads amortised over half the rows; registers spilled into the loop (_flash_spill)
    arch *= (0.82 if bm == 64 else 1.0) * spill_scale(bm, bn, task["D"], threads)
    if bm < 16 * p["num_warps"]:
        # under 16 query rows a warp (a Hopper warpgroup under 64): the warps split the key / head-dim
        # side instead, and every row max and sum crosses warps through shared memory (H200: BLOCK_M
        # 64 on 8 warps ran 1.5-1.8x its 4-warp twin in every rung)
        arch *= 0.6
    smem, slots = smem_of(task, bm, bn, stages, p["num_warps"]), task.gpu.sms
    if not skip:
        return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16,
                      compute_scale=arch * causal_balance(tiles, cdiv(s, bm), slots, False),
                      tile_quant=causal_work(s, bm, bn, False), traffic=1 + cdiv(s, bm) / 16)
    work, reread = causal_work(s, bm, bn, True), 1 + cdiv(s, bm) / 32   # K/V re-read per query tile, mostly L2
    if "PROGRAMS_PER_SM" not in p:
        deep = (1.0 if stages >= 3 else 0.9 if stages == 2 else 0.8) * hopper_ring(p, task, stages)
        return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16,
                      compute_scale=arch * deep * causal_balance(tiles, cdiv(s, bm), slots, False),
                      tile_quant=work, traffic=reread)
    grid = min(tiles, slots * p["PROGRAMS_PER_SM"])
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=16, traffic=reread,
                  compute_scale=arch * causal_balance(tiles, cdiv(s, bm), grid, True), tile_quant=work)


def attend(rescale=RESCALE, exp="tl.exp", causal=">="):
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


PROLOGUE = '''    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = bh * S * HEAD_DIM                      # int64: B*H*S*D can pass 2**31
    q = tl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], {m0}, tl.float32)
    l_i = tl.full([BLOCK_M], {l0}, tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
'''
EPILOGUE = '''    o = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], o.to(o_ptr.dtype.element_ty))
'''
SPLIT_LOOP = '''    # keys left of the diagonal band need no mask; only the band does. It starts on a BLOCK_N
    # boundary, so BLOCK_N may exceed BLOCK_M: keys past the tile's last row are masked out
    band = start_m * BLOCK_M // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, 0, band,
                            qk_scale, HEAD_DIM, BLOCK_N, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, band,
                            (start_m + 1) * BLOCK_M, qk_scale, HEAD_DIM, BLOCK_N, True)
'''


def kernel(p, task, body, m0=M0, l0=L0, persistent=False):
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
        grid = f"(min(num_tiles, torch.cuda.get_device_properties(q.device).multi_processor_count * {p['PROGRAMS_PER_SM']}),)"
        extra = ", BH=B * H"
    stages = f", num_stages={p['num_stages']}" if p.get("num_stages") else ""
    return head + body.format(m0=m0, l0=l0) + f'''

{ENTRY.py_def(task)}:
    B, H, S, D = q.shape
    BLOCK_M, BLOCK_N = {p["BLOCK_M"]}, {p["BLOCK_N"]}
    assert S % BLOCK_M == 0 and S % BLOCK_N == 0, "tiles must divide the sequence"
    o = torch.empty_like(q)
    num_tiles = S // BLOCK_M * B * H
    flash_prefill_kernel[{grid}](q, k, v, o, S, {scale}{extra}, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                         num_warps={p["num_warps"]}{stages})
    return o
'''


def online_softmax_src(p, task, rescale=RESCALE, m0=M0, l0=L0):
    return attend(rescale) + kernel(p, task, PROLOGUE + '''\
    # every key block is visited; the causal mask zeroes the upper triangle inside each one
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, offs_m, 0, S, qk_scale,
                            HEAD_DIM, BLOCK_N, True)
''' + EPILOGUE, m0, l0)


def causal_block_skip_src(p, task, causal=">=", m0=M0, l0=L0):
    return attend(causal=causal) + kernel(p, task, PROLOGUE + SPLIT_LOOP + EPILOGUE, m0, l0)


def pipelined_src(p, task, causal=">=", rescale=RESCALE):
    # qk_scale arrives with log2(e) folded in, so exp2 is exact and one MUFU instruction
    return attend(rescale, "tl.exp2", causal) + kernel(p, task, PROLOGUE + SPLIT_LOOP + EPILOGUE)


def persistent_src(p, task, m0=M0, l0=L0, rescale=RESCALE):
    body = PROLOGUE + SPLIT_LOOP + EPILOGUE
    body = "\n".join("    " + line if line else line for line in body.split("\n"))
    loop = f'''    # persistent: the grid fills the SMs once; tile ids run heavy-first (LPT) so the
    # cheap query blocks near the top of the causal triangle fill the tail
    num_m = S // BLOCK_M
    num_tiles = num_m * BH
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        start_m = num_m - 1 - tile // BH
        bh = (tile % BH).to(tl.int64)
'''
    return attend(rescale, "tl.exp2") + kernel(p, task, loop + body, m0, l0, persistent=True)


# tensor descriptors: a Hopper load is one TMA copy into swizzled shared memory (no per-thread address math, no
# register staging); without TMA hardware Triton lowers a descriptor to pointer loads (as gemm_fp16_triton's
# persistent_tma rung, 0.93). H100 (plan a1, every value correct, every bug caught), B=1 H=32 S=2048 D=128, descriptor
# / pointer rung at the same tiles: 64x64 2 stages 131.1 / 121.8 us, 3 stages 110.2 / 104.3, 128x32 3 stages 134.9 /
# 133.0, 128x64 3 stages 143.6 / 124.5: 1.07x slower (geomean). Triton 3.9's pointer pipeliner already streams these
# tiles by cp.async; the rung stays as the technique an engineer tries and reverts here.
TMA_GAIN, NO_TMA = 0.92, 0.93


def tma_launch(p, task):
    """The pipelined rung's launch with K/V (and Q) tiles by descriptor: on Hopper the pipeliner keeps a full ring of
    stages (triton_full_stage_rows) and the copies leave the warps' load slots free."""
    launch = _fused_launch(p, task, True)
    gain = TMA_GAIN if "tma" in task.gpu.features else NO_TMA
    return replace(launch, compute_scale=launch.compute_scale * gain)


def tma_descriptors_src(p, task, causal=">=", rescale=RESCALE, m0=M0, l0=L0):
    return tma_src(p, task, causal, rescale, m0, l0)


class FlashPrefillTriton(FlashPrefillSpec):
    impl = "triton"
    check_adapter = staticmethod(triton_check)
    variants = (
        Rung("materialized_scores", "QK^T to a global fp32 buffer, full-row softmax kernel, PV kernel",
             (Param("BLOCK_M", (64, 128), 64), Param("BLOCK_N", (64, 128), 64), WARPS), path="fp16",
             compute_eff=0.45, memory_eff=0.85, smem="dynamic", launch=materialized_launch,
             render=materialized_scores_src, bugs={"missing_scale": {"scale": ""}, "off_by_one": {"causal": ">"}}),
        Rung("online_softmax", "one fused kernel: running max/sum, tl.dot over every key block, masked",
             (BM, BN, WARPS), path="fp16", compute_eff=0.45, smem="dynamic", launch=fused_launch(False),
             render=online_softmax_src, bugs={"missing_scale": {"rescale": ""}, "wrong_init": WRONG_INIT}),
        Rung("causal_block_skip", "keys past the diagonal skipped; the mask only on the diagonal band",
             (BM, BN, WARPS), path="fp16", compute_eff=0.47, smem="dynamic", launch=fused_launch(),
             render=causal_block_skip_src, bugs={"off_by_one": {"causal": ">"}, "wrong_init": WRONG_INIT}),
        Rung("pipelined", "num_stages-deep cp.async K/V ring, exp2 with log2(e) folded into the scale",
             (BM, Param("BLOCK_N", (32, 64, 128), 64), WARPS, Param("num_stages", (2, 3, 4), 2)), path="fp16",
             compute_eff=0.62, smem="dynamic", launch=fused_launch(), render=pipelined_src,
             bugs={"off_by_one": {"causal": ">"}, "missing_scale": {"rescale": ""}}),
        Rung("tma_descriptors", "Q/K/V tiles by tensor descriptor (TMA copies into swizzled smem on Hopper), O "
             "stored through one; the pipelined loop",
             (BM, Param("BLOCK_N", (32, 64), 64), WARPS, Param("num_stages", (2, 3), 2)), path="fp16", compute_eff=0.62, smem="dynamic", launch=tma_launch, render=tma_descriptors_src, fit_as="pipelined",
             bugs={"off_by_one": {"causal": ">"}, "wrong_init": WRONG_INIT}),
        Rung("persistent", "one program per SM slot loops over query tiles, longest (last) rows first",
             (BM, Param("BLOCK_N", (64, 128), 64), WARPS, Param("num_stages", (2, 3, 4), 2),
              Param("PROGRAMS_PER_SM", (1, 2), 2)), path="fp16", compute_eff=0.64, smem="dynamic",
             launch=fused_launch(), render=persistent_src, bugs={"wrong_init": WRONG_INIT, "missing_scale": {"rescale": ""}}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr, d = triton_ptr(task.dtype, task), task["D"]
        consts = {"HEAD_DIM": d, "BLOCK_M": params["BLOCK_M"], "BLOCK_N": params["BLOCK_N"]}
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "qk_scale": "fp32",
               "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        warps, stages = params["num_warps"], launch_stages(params, task)   # the compile spec is what the launch runs
        if "PROGRAMS_PER_SM" in params:
            sig = {**sig, "BH": "i32"}
        if variant.tag == "tma_descriptors":
            sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "BH": "i32", "qk_scale": "fp32",
                   "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        if variant.tag != "materialized_scores":
            return [KernelSpec("flash_prefill_kernel", sig, consts, warps, stages)]
        scores = {"q_ptr": ptr, "k_ptr": ptr, "s_ptr": "*fp32", "S": "i32", "scale": "fp32",
                  "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        soft = {"s_ptr": "*fp32", "p_ptr": ptr, "S": "i32", "BLOCK": "constexpr"}
        pv = {"p_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "HEAD_DIM": "constexpr",
              "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
        return [KernelSpec("attn_scores_kernel", scores, consts, warps, stages),
                KernelSpec("attn_softmax_kernel", soft, {"BLOCK": 1 << (task["S"] - 1).bit_length()}, 8, stages),
                KernelSpec("flash_prefill_kernel", pv, consts, warps, stages)]
