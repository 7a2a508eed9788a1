"""Chunked prefill attention in Triton: a [BLOCK_M] tile of the chunk's queries per program, keys of
the cached prefix and of the chunk (causal), grouped-query heads reading KV head h // GROUP.

Ladder: tl.dot tiles with an online softmax over every key block, the causal mask on all of them ->
prefix blocks unmasked, only the diagonal blocks masked, future blocks skipped -> exp2 with log2(e)
folded in and tl.range(num_stages) K/V pipelining -> persistent programs over the query tiles.
"""
from .._triton_smem import triton_mma_sync
from ..base import Launch, Param, Rung, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE, cdiv, triton_ptr
from ._flash_tiles import PIPELINE_OVERLAP, flash_smem, mma_eff
from .chunked_prefill_spec import ENTRY, ChunkedPrefillSpec, cost_of, keys_visited, pairs
from .sliding_window_triton import programs_per_sm

BLOCK_M = Param("BLOCK_M", (64, 128), 64)
BLOCK_N = Param("BLOCK_N", (32, 64, 128), 64)
WARPS = Param("num_warps", (4, 8), 4)
STAGES = Param("num_stages", (2, 3, 4), 3)
DIAG = "(P + start_m) // BLOCK_N * BLOCK_N"
LATE_DIAG = {"diag": "((P + start_m) // BLOCK_N + 1) * BLOCK_N"}   # off_by_one: a diagonal block left unmasked
LOG2E = 1.4426950408889634


def tile_launch(skip=True, persistent=False):
    """The query-tile rungs: every key block (skip False) or those up to the diagonal; persistent:
    one program per resident slot walking tiles heavy-first."""
    return lambda p, task: _tile_launch(p, task, skip, persistent)


def _tile_launch(p, task, skip, persistent):
    gpu, b, h, c, pf, d = task.gpu, task["B"], task["H"], task["C"], task["P"], task["D"]
    e, bm, bn, nw, stages = DTYPE_BYTES[task.dtype], p["BLOCK_M"], p["BLOCK_N"], p["num_warps"], p.get("num_stages", 1)
    threads = nw * gpu.warp
    # unpipelined on mma.sync targets (sm_8x, sm_120), K is read into registers before V lands, so
    # K and V share one buffer (A100 metadata.shared: Q + one tile); wgmma (sm_90) reads both from it
    smem = flash_smem(task, bm, bn, d, e, stages, shared_kv=triton_mma_sync(task))
    regs = 40 + bm * d // threads + bm * bn * 2 // threads + bm * d * e // 4 // threads
    spill = max(0, regs - 255)
    work, tiles = keys_visited(c, pf, bm, bn, skip), b * h * cdiv(c, bm)
    grid, l2_miss, prologue = tiles, 0.08, 1.0
    if persistent:
        grid, l2_miss, prologue = min(tiles, gpu.sms * programs_per_sm(p, task, smem, regs)), 0.05, 1.04
    # each query tile re-reads its KV head's prefix; later tiles and sibling heads mostly hit L2
    reread = b * h * (work // bm) * 2 * d * e / cost_of(task).bytes
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                  bytes_per_access=max(16, 2 * bn * d * e * max(1, stages - 1) // threads // 2),
                  traffic=1 + l2_miss * reread + spill / 128,
                  compute_scale=mma_eff(task, bm, bn, nw) * PIPELINE_OVERLAP[stages] * prologue * 255 / (255 + 2 * spill),
                  tile_quant=pairs(c, pf) / work)


persistent_launch = tile_launch(persistent=True)


def tile_fn(p, exp, skip, diag=DIAG, causal="<="):
    """The query-tile body: skip: unmasked blocks up to the diagonal, masked ones across it; else
    every key block of prefix and chunk, masked."""
    piped = "num_stages" in p
    loop = "tl.range(0, diag, BLOCK_N, num_stages=NUM_STAGES)" if piped else "range(0, diag, BLOCK_N)"
    call = ("acc, m_i, l_i = _kv_block(acc, m_i, l_i, q, k_ptr, v_ptr, kv, start_n, offs_m, offs_n, offs_d,\n"
            "                                  P, qk_scale, HEAD_DIM, {})")
    if skip:
        body = f"""    # keys [0, diag) are visible to every row of the tile (prefix and earlier chunk tokens): no mask;
    # [diag, P + start_m + BLOCK_M) cross the causal diagonal; later chunk blocks are never touched
    diag = {diag}
    for start_n in {loop}:
        {call.format("False")}
    for start_n in range(diag, P + start_m + BLOCK_M, BLOCK_N):
        {call.format("True")}"""
    else:
        body = f"""    for start_n in range(0, P + C, BLOCK_N):     # every key block loaded and multiplied; causality a mask
        {call.format("True")}"""
    return f'''

@triton.jit
def _kv_block(acc, m_i, l_i, q, k_ptr, v_ptr, kv, start_n, offs_m, offs_n, offs_d, P, qk_scale,
              HEAD_DIM: tl.constexpr, MASKED: tl.constexpr):
    cols = start_n + offs_n
    kv_off = kv + cols[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(k_ptr + kv_off)
    v = tl.load(v_ptr + kv_off)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:   # query offs_m sits at position P + offs_m of the sequence
        s = tl.where(cols[None, :] {causal} (P + offs_m)[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.{exp}(m_i - m_new)
    p = tl.{exp}(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _query_tile(q_ptr, k_ptr, v_ptr, o_ptr, bh, start_m, C, P, qk_scale, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr{", NUM_STAGES: tl.constexpr" if piped else ""}):
    q_base = bh.to(tl.int64) * C * HEAD_DIM
    kv = (bh // GROUP).to(tl.int64) * (P + C) * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
{body}
    acc = acc / l_i[:, None]
    tl.store(o_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(o_ptr.dtype.element_ty))
'''


def wrapper(task, p, grid, scale, extra_args="", pre=""):
    piped = "num_stages" in p
    kw = (f"GROUP=H // KVH, HEAD_DIM=D, BLOCK_M={p['BLOCK_M']}, BLOCK_N={p['BLOCK_N']},\n"
          f"        num_warps={p['num_warps']}, " +
          (f"NUM_STAGES={p['num_stages']}, num_stages={p['num_stages']}" if piped else "num_stages=1"))
    return f'''

{ENTRY.py_def(task)}:
    B, H, C, D = q.shape
    KVH, P = k.shape[1], k.shape[2] - C
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
{pre}    chunked_prefill_kernel[{grid}](q, k, v, o, C, P, {scale}{extra_args},
        {kw})
    return o
'''


def launcher(p, task, scale, exp="exp2", skip=True, **state):
    """One program per (query tile, b * h)."""
    piped = "num_stages" in p
    return tile_fn(p, exp, skip, **state) + f'''

@triton.jit
def chunked_prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, C, P, qk_scale, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr{", NUM_STAGES: tl.constexpr" if piped else ""}):
    _query_tile(q_ptr, k_ptr, v_ptr, o_ptr, tl.program_id(1), tl.program_id(0) * BLOCK_M, C, P, qk_scale, GROUP,
                HEAD_DIM, BLOCK_M, BLOCK_N{", NUM_STAGES" if piped else ""})
''' + wrapper(task, p, "(triton.cdiv(C, BLOCK_M), B * H)".replace("BLOCK_M", str(p["BLOCK_M"])), scale)


def online_softmax_src(p, task, scale="D ** -0.5", **state):      # scores in natural units
    return launcher(p, task, scale, exp="exp", skip=False, **state)


def causal_block_skip_src(p, task, scale="D ** -0.5", **state):
    return launcher(p, task, scale, exp="exp", **state)


def pipelined_stages_src(p, task, scale=f"D ** -0.5 * {LOG2E}", **state):
    return launcher(p, task, scale, **state)


def persistent_src(p, task, scale=f"D ** -0.5 * {LOG2E}", **state):
    launch = persistent_launch(p, task)
    per_sm = programs_per_sm(p, task, launch.smem_bytes, launch.regs)
    return f"PROGRAMS_PER_SM = {per_sm}  # resident programs per SM at this tile size\n" + tile_fn(p, "exp2", True, **state) + '''

@triton.jit
def chunked_prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, C, P, qk_scale, num_tiles, num_m_tiles, GROUP: tl.constexpr,
                           HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           NUM_STAGES: tl.constexpr):
    # persistent: program pid walks tiles pid, pid + grid, ...; each head's last (heaviest) query tiles
    # come first, the light ones fill the tail; a KV head's prefix stays hot in L2 for its siblings
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        bh = tile % (num_tiles // num_m_tiles)
        m_tile = num_m_tiles - 1 - tile // (num_tiles // num_m_tiles)
        _query_tile(q_ptr, k_ptr, v_ptr, o_ptr, bh, m_tile * BLOCK_M, C, P, qk_scale, GROUP, HEAD_DIM, BLOCK_M,
                    BLOCK_N, NUM_STAGES)
''' + wrapper(task, p, "(min(num_tiles, PROGRAMS_PER_SM * sms),)", scale, ", num_tiles, num_m_tiles",
              f"    num_m_tiles = triton.cdiv(C, {p['BLOCK_M']})\n    num_tiles = B * H * num_m_tiles\n"
              "    sms = torch.cuda.get_device_properties(q.device).multi_processor_count\n")


class ChunkedPrefillTriton(ChunkedPrefillSpec):
    impl = "triton"
    variants = (
        Rung("online_softmax", "BLOCK_M query tile, tl.dot QK^T and PV, online softmax over every key block, "
             "all masked", (BLOCK_M, BLOCK_N, WARPS), path="fp16", compute_eff=0.45, memory_eff=0.75,
             smem="dynamic", launch=tile_launch(skip=False), render=online_softmax_src,
             bugs={"missing_scale": {"scale": "1.0"}, "off_by_one": {"causal": "<"}}),
        Rung("causal_block_skip", "prefix blocks without a mask, the diagonal blocks masked, future blocks skipped",
             (BLOCK_M, BLOCK_N, WARPS), path="fp16", compute_eff=0.5, memory_eff=0.8, smem="dynamic",
             launch=tile_launch(), render=causal_block_skip_src,
             bugs={"off_by_one": LATE_DIAG, "missing_scale": {"scale": "1.0"}}),
        Rung("pipelined_stages", "exp2 with log2e folded into the scale, tl.range(num_stages) K/V pipelining",
             (Param("BLOCK_M", (64, 128), 128), BLOCK_N, Param("num_warps", (4, 8), 8), STAGES), path="fp16",
             compute_eff=0.5, memory_eff=0.85, smem="dynamic", launch=tile_launch(), render=pipelined_stages_src,
             bugs={"missing_scale": {"scale": "D ** -0.5"}, "off_by_one": LATE_DIAG}),
        Rung("persistent", "SM-count programs looping over query tiles, heaviest first, heads interleaved",
             (Param("BLOCK_M", (64, 128), 128), BLOCK_N, Param("num_warps", (4, 8), 8), Param("num_stages", (2, 3, 4), 2)),
             path="fp16", compute_eff=0.5, memory_eff=0.87, smem="dynamic", launch=persistent_launch,
             render=persistent_src, bugs={"missing_scale": {"scale": "D ** -0.5"}, "off_by_one": LATE_DIAG}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "C": "i32", "P": "i32", "qk_scale": "fp32"}
        const = {"GROUP": task["H"] // task["KVH"], "HEAD_DIM": task["D"], "BLOCK_M": params["BLOCK_M"],
                 "BLOCK_N": params["BLOCK_N"]}
        if "num_stages" in params:
            const["NUM_STAGES"] = params["num_stages"]
        if variant.launch is persistent_launch:
            sig.update(num_tiles="i32", num_m_tiles="i32")
        return [KernelSpec("chunked_prefill_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const,
                           params["num_warps"], params.get("num_stages", 1))]
