"""Sliding-window causal attention prefill in Triton (Mistral / Gemma local layers): query i
attends keys i - W < j <= i. Ladder: one program per query row on CUDA cores over all keys ->
tl.dot query tiles, online softmax, every key block masked -> only the blocks meeting the window,
masks on its two edges -> exp2 + software pipelining -> persistent programs over query tiles.
"""
from .._triton_smem import triton_mma_sync
from ..base import Launch, Param, Rung, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE, cdiv, triton_ptr
from ._flash_tiles import PIPELINE_OVERLAP, flash_smem, mma_eff
from .sliding_window_spec import ENTRY, SlidingWindowSpec, cost_of, pairs

BLOCK_M = Param("BLOCK_M", (64, 128), 64)
BLOCK_N = Param("BLOCK_N", (32, 64, 128), 32)
WARPS = Param("num_warps", (4, 8), 4)
STAGES = Param("num_stages", (2, 3, 4), 2)
M0, L0 = 'tl.full([BLOCK_M], float("-inf"), tl.float32)', "tl.zeros([BLOCK_M], dtype=tl.float32)"
DIAG = "start_m // BLOCK_N * BLOCK_N"
LOG2_SCALE = "D ** -0.5 * LOG2E"       # scores in log2 units: exp2 is one MUFU op
# wrong_init: (0, 1) is not the identity of (max, sum): a phantom score-0 key joins every row
WRONG_INIT = {"m0": "tl.zeros([BLOCK_M], dtype=tl.float32)", "l0": "tl.full([BLOCK_M], 1.0, tl.float32)"}
LATE_DIAG = {"diag": "(start_m // BLOCK_N + 1) * BLOCK_N"}   # off_by_one: the diagonal block left unmasked


def worked(skip, s, w, bm, bn):
    """Key positions a BLOCK_M tile program visits, summed over the tiles of one head."""
    if not skip:
        return cdiv(s, bm) * bm * cdiv(s, bn) * bn
    total = 0
    for start in range(0, s, bm):
        lo = max(start - w + 1, 0) // bn * bn
        total += bm * cdiv(min(start + bm, s) - lo, bn) * bn
    return total


def programs_per_sm(params, task, smem, regs):
    gpu, threads = task.gpu, params["num_warps"] * task.gpu.warp
    return max(1, min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // threads,
                      gpu.regs_per_sm // (threads * min(regs, 255)), gpu.smem_per_sm // max(1, smem)))


def row_launch(p, task):
    # every row walks all S keys; neighbouring rows share K/V through L2
    b, h, s, d, threads = task["B"], task["H"], task["S"], task["D"], p["num_warps"] * task.gpu.warp
    regs = 40 + p["BLOCK_N"] * d // threads * 2
    return Launch(grid=b * h * s, threads=threads, regs=min(regs, 255), bytes_per_access=16, traffic=2.0,
                  compute_scale=pairs(s, task["W"]) / (s * s) * (1 if regs <= 255 else 0.5))


def tile_launch(skip=True, persistent=False):
    """The tl.dot rungs: all key blocks (skip False) or those meeting the window; persistent: one
    program per resident slot, Q-tile setup amortised."""
    return lambda p, task: _tile_launch(p, task, skip, persistent)


def _tile_launch(p, task, skip, persistent):
    gpu, b, h, s, d, w = task.gpu, task["B"], task["H"], task["S"], task["D"], task["W"]
    e, bn, nw, useful = DTYPE_BYTES[task.dtype], p["BLOCK_N"], p["num_warps"], pairs(s, w)
    threads, bm, stages = nw * gpu.warp, p["BLOCK_M"], p.get("num_stages", 1)
    kv_tile = 2 * bn * d * e
    # unpipelined on sm_8x / sm_120, K is consumed from a layout-conversion scratch before V lands:
    # one K/V buffer (A100 metadata.shared at D=256: Q + V + P exact)
    smem = flash_smem(task, bm, bn, d, e, stages, shared_kv=triton_mma_sync(task), warps=nw)
    regs = 40 + bm * d // threads + bm * bn * 2 // threads + bm * d * e // 4 // threads
    spill = max(0, regs - 255)
    overlap = PIPELINE_OVERLAP[stages]
    work, tiles = worked(skip, s, w, bm, bn), b * h * cdiv(s, bm)
    grid, l2_miss, prologue, hidden = tiles, 0.08, 1.0, 1.0
    if persistent:
        per_sm = programs_per_sm(p, task, smem, regs)
        grid, l2_miss, prologue = min(tiles, gpu.sms * per_sm), 0.04, 1.04
        # A spilling program waits on its local-memory round trips; alone on its SM nothing covers them. H100
        # (measurements/h100_sim30_checks.json, 2026-12-06): BLOCK 128 x 64 on 4 warps (~300 registers a thread)
        # 223.6 / 297.5 us at 2 stages (two programs an SM) and 443.8 / 549.5 at 3 (one: 2.0x / 1.8x), the same
        # tile on 8 warps (no spill) 166.8-189.5 at either depth (h100_gpucheck_simgrid.json)
        hidden = min(1.0, per_sm / 2) if spill else 1.0
    # a spilled register's round trip is mostly an L1 hit: 255 / (255 + spill / 2) (was 2 spill: the 27 persistent
    # 128-row 4-warp rows measured (H100/H200 gpu-check, sim30) ran 1.29x faster than it timed them, geomean; now 0.98)
    # K/V re-reads by later query tiles mostly hit L2 (a head's window is a few MB)
    reread = b * h * (work // bm) * 2 * d * e / cost_of(task).bytes
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                  bytes_per_access=max(16, kv_tile * max(1, stages - 1) // threads // 2),
                  traffic=1 + l2_miss * reread + spill / 128,
                  compute_scale=mma_eff(task, bm, bn, nw) * overlap * prologue * hidden * 255 / (255 + spill // 2),
                  tile_quant=useful / work)


persistent_launch = tile_launch(persistent=True)


def wrapper(task, grid, scale, extra_args="", extra_kw=""):
    return f'''

{ENTRY.py_def(task)}:
    B, H, S, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    {grid}
    swa_kernel[grid](q, k, v, o, S, window, {scale}{extra_args}, HEAD_DIM=D{extra_kw})
    return o
'''

def row_per_program_src(p, task, scale=" * qk_scale", causal="cols <= i"):
    return f'''

@triton.jit
def swa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, W, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per query row: dots on CUDA cores, every key of the sequence visited and masked.
    i = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * HEAD_DIM
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + base + i * HEAD_DIM + offs_d).to(tl.float32){scale}
    m_i, l_i = tl.full([], float("-inf"), tl.float32), tl.full([], 0.0, tl.float32)
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(0, S, BLOCK_N):
        cols = start + offs_n
        in_seq = cols < S
        kv_off = base + cols[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=in_seq[:, None], other=0.0).to(tl.float32)
        s = tl.where(in_seq & ({causal}) & (cols > i - W), tl.sum(k * q[None, :], 1), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # no key of the window seen yet
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe)
        v = tl.load(v_ptr + kv_off, mask=in_seq[:, None], other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    tl.store(o_ptr + base + i * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + wrapper(task, "grid = (S, B * H)", "D ** -0.5", extra_kw=", BLOCK_N=BLOCK_N, num_warps=NUM_WARPS")

def tile_fn(p, exp, skip=True, m0=M0, l0=L0, diag=DIAG, causal="<="):
    """The query-tile body. skip: only key blocks meeting the window, edges masked; else all, masked."""
    loop = "tl.range(full, diag, BLOCK_N, num_stages=NUM_STAGES)" if "num_stages" in p else "range(full, diag, BLOCK_N)"
    stages = ", NUM_STAGES: tl.constexpr" if "num_stages" in p else ""
    call = ("acc, m_i, l_i = _window_block(acc, m_i, l_i, q, k_ptr, v_ptr, base, start_n, offs_m, offs_n, offs_d,\n"
            "                                      S, W, qk_scale, HEAD_DIM, {})")
    if skip:
        body = f"""    # key blocks: [lo, full) meet the window's left edge, [full, diag) are visible to every row of
    # the tile (no mask), [diag, hi) cross the causal diagonal. Blocks before lo are never touched.
    lo = tl.maximum(start_m - W + 1, 0) // BLOCK_N * BLOCK_N
    hi = tl.minimum(start_m + BLOCK_M, S)
    diag = tl.maximum({diag}, lo)
    full = tl.minimum(tl.maximum(tl.cdiv(start_m + BLOCK_M - W, BLOCK_N) * BLOCK_N, lo), diag)
    for start_n in range(lo, full, BLOCK_N):
        {call.format("True")}
    for start_n in {loop}:
        {call.format("False")}
    for start_n in range(diag, hi, BLOCK_N):
        {call.format("True")}"""
    else:
        body = f"""    for start_n in range(0, S, BLOCK_N):     # every key block is loaded and multiplied; the window is a mask
        {call.format("True")}"""
    return f'''

@triton.jit
def _window_block(acc, m_i, l_i, q, k_ptr, v_ptr, base, start_n, offs_m, offs_n, offs_d, S, W, qk_scale,
                  HEAD_DIM: tl.constexpr, MASKED: tl.constexpr):
    cols = start_n + offs_n
    kv_off = base + cols[:, None] * HEAD_DIM + offs_d[None, :]
    if MASKED:
        k = tl.load(k_ptr + kv_off, mask=(cols < S)[:, None], other=0.0)
        v = tl.load(v_ptr + kv_off, mask=(cols < S)[:, None], other=0.0)
    else:
        k = tl.load(k_ptr + kv_off)
        v = tl.load(v_ptr + kv_off)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:
        keep = (cols[None, :] {causal} offs_m[:, None]) & (cols[None, :] > offs_m[:, None] - W) & (cols < S)[None, :]
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = m_new
    if MASKED:   # rows whose window starts further right have seen no key yet
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.{exp}(m_i - m_use)
    p = tl.{exp}(s - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _window_tile(q_ptr, k_ptr, v_ptr, o_ptr, bh, start_m, S, W, qk_scale, HEAD_DIM: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr{stages}):
    base = bh.to(tl.int64) * S * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < S)[:, None], other=0.0)
    m_i = {m0}
    l_i = {l0}
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
{body}
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(offs_m < S)[:, None])
'''

def launcher(p, task, scale, exp="exp2", skip=True, **state):
    """One program per (query tile, batch*head)."""
    stages = "num_stages" in p
    sig, fwd = (", NUM_STAGES: tl.constexpr", ", NUM_STAGES") if stages else ("", "")
    kw = ", BLOCK_N=BLOCK_N, BLOCK_M=BLOCK_M, num_warps=NUM_WARPS, " + (
        "NUM_STAGES=NUM_STAGES, num_stages=NUM_STAGES" if stages else "num_stages=1")
    return tile_fn(p, exp, skip, **state) + f'''

@triton.jit
def swa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, W, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_M: tl.constexpr{sig}):
    _window_tile(q_ptr, k_ptr, v_ptr, o_ptr, tl.program_id(1), tl.program_id(0) * BLOCK_M, S, W, qk_scale,
                 HEAD_DIM, BLOCK_M, BLOCK_N{fwd})
''' + wrapper(task, "grid = (triton.cdiv(S, BLOCK_M), B * H)", scale, extra_kw=kw)


def blocked_online_softmax_src(p, task, scale="D ** -0.5", **state):   # scores in natural units
    return launcher(p, task, scale, exp="exp", skip=False, **state)


def window_block_skip_src(p, task, scale="D ** -0.5", **state):
    return launcher(p, task, scale, exp="exp", **state)


def pipelined_tiles_src(p, task, scale=LOG2_SCALE, **state):
    return launcher(p, task, scale, **state)


def persistent_tiles_src(p, task, scale=LOG2_SCALE, **state):
    launch = persistent_launch(p, task)
    per_sm = programs_per_sm(p, task, launch.smem_bytes, launch.regs)
    return f"PROGRAMS_PER_SM = {per_sm}  # resident programs per SM at this tile size\n" + tile_fn(p, "exp2", **state) + '''

@triton.jit
def swa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, W, qk_scale, num_tiles, num_m_tiles, HEAD_DIM: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, NUM_STAGES: tl.constexpr):
    # Persistent: one program per SM slot walks tiles pid, pid + P, ... from the last query tile down:
    # heavy (full-window) tiles first, cheap early ones fill the tail; a head's K/V stays hot in L2.
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        bh = tile // num_m_tiles
        m_tile = num_m_tiles - 1 - tile % num_m_tiles
        _window_tile(q_ptr, k_ptr, v_ptr, o_ptr, bh, m_tile * BLOCK_M, S, W, qk_scale, HEAD_DIM, BLOCK_M,
                     BLOCK_N, NUM_STAGES)
''' + wrapper(task, "num_m_tiles = triton.cdiv(S, BLOCK_M)\n    num_tiles = B * H * num_m_tiles\n"
                    "    sms = torch.cuda.get_device_properties(q.device).multi_processor_count\n"
                    "    grid = (min(num_tiles, PROGRAMS_PER_SM * sms),)", scale, ", num_tiles, num_m_tiles",
                    ", BLOCK_N=BLOCK_N, BLOCK_M=BLOCK_M, NUM_STAGES=NUM_STAGES, num_warps=NUM_WARPS, "
                    "num_stages=NUM_STAGES")


class SlidingWindowTriton(SlidingWindowSpec):
    impl = "triton"
    baseline = "blocked_online_softmax"   # a program per query row on CUDA-core dots is nobody's start
    variants = (
        Rung("row_per_program", "one program per query row, CUDA-core dots over every key, window as a mask",
             (Param("BLOCK_N", (32, 64, 128), 64), Param("num_warps", (2, 4, 8), 4)), path="fp32",
             compute_eff=0.07, memory_eff=0.6, launch=row_launch, render=row_per_program_src,
             bugs={"missing_scale": {"scale": ""}, "off_by_one": {"causal": "cols < i"}}),
        Rung("blocked_online_softmax", "BLOCK_M query tile, tl.dot QK^T and PV, online softmax, all keys masked",
             (BLOCK_M, Param("BLOCK_N", (32, 64), 32), WARPS), path="fp16", compute_eff=0.45, memory_eff=0.75,
             smem="dynamic", launch=tile_launch(skip=False), render=blocked_online_softmax_src,
             bugs={"wrong_init": WRONG_INIT, "off_by_one": {"causal": "<"}}),
        Rung("window_block_skip", "loop only over key blocks meeting the window; masks on edge blocks only",
             (BLOCK_M, Param("BLOCK_N", (32, 64), 32), WARPS), path="fp16", compute_eff=0.5, memory_eff=0.8,
             smem="dynamic", launch=tile_launch(), render=window_block_skip_src,
             bugs={"off_by_one": LATE_DIAG, "wrong_init": WRONG_INIT}),
        Rung("pipelined_tiles", "exp2 with log2e folded in, tl.range(num_stages) K/V pipelining, tuned tiles",
             (BLOCK_M, BLOCK_N, WARPS, STAGES), path="fp16", compute_eff=0.48, memory_eff=0.85, smem="dynamic",
             launch=tile_launch(), render=pipelined_tiles_src,
             bugs={"missing_scale": {"scale": "D ** -0.5"}, "off_by_one": LATE_DIAG}),
        Rung("persistent_tiles", "grid of SM-count programs, each looping over query tiles (heavy tiles first)",
             (Param("BLOCK_M", (64, 128), 128), Param("BLOCK_N", (32, 64), 64), WARPS, Param("num_stages", (2, 3, 4), 2)),
             path="fp16", compute_eff=0.48, memory_eff=0.87, smem="dynamic", launch=persistent_launch,
             render=persistent_tiles_src, bugs={"missing_scale": {"scale": "D ** -0.5"}, "wrong_init": WRONG_INIT}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(params.items()))
        return f"{TRITON_PRELUDE}\nLOG2E = 1.4426950408889634\n{consts}" + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "W": "i32", "qk_scale": "fp32"}
        const = {"HEAD_DIM": task["D"], **{k.upper(): params[k] for k in ("BLOCK_N", "BLOCK_M", "num_stages") if k in params}}
        if variant.launch is persistent_launch:
            sig.update(num_tiles="i32", num_m_tiles="i32")
        return [KernelSpec("swa_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const, params["num_warps"],
                           params.get("num_stages", 1))]
