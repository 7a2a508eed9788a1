"""Speculative-decoding tree attention in Triton (Medusa / EAGLE verification): N draft tokens
in a tree attend to the cached prefix plus their ancestors (bit j of the int64 tree_mask[b, i]:
node j is node i or an ancestor). Ladder: one program per node on CUDA cores -> all nodes of a
head as one tl.dot tile (prefix read once per head) -> exp2, unmasked prefix loop + ragged tail
-> pipelined prefix tiles -> split-KV over the prefix + LSE combine (B*H programs can't fill a GPU).
"""
from .._triton_smem import triton_mma_sync
from ..base import Launch, Param, Rung, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE, cdiv, triton_ptr
from ._flash_tiles import PIPELINE_OVERLAP, flash_smem, mfma_eff, wgmma_eff
from .tree_attention_spec import ENTRY, TreeAttentionSpec, cost_of, nodes_pad

BLOCK_N = Param("BLOCK_N", (32, 64, 128), 64)
WARPS = Param("num_warps", (4, 8), 4)
LOG2_SCALE = "D ** -0.5 * LOG2E"
BIT = "(bits[:, None] >> offs_j[None, :]) & 1"
OFF_BIT = {"bit": "(bits[:, None] >> (offs_j[None, :] + 1)) & 1"}   # reads the next node's bit
NO_LOG2E = {"scale": "D ** -0.5"}                        # exp2 rungs: the log2(e) factor forgotten
# The prefix stream's efficiency, the same for the three tl.dot tile rungs: they load the same 16-byte K/V tiles, and
# what pipelining changes is in tile_launch (bytes in flight, PIPELINE_OVERLAP). H100, held out (s91331, s92442,
# s93553, s94664, s98282): at N=16 / 32 the unpipelined tree_tile_tl_dot and unmasked_prefix_exp2 ran level with
# pipelined_stages (187-193 against 193-200 us at B=32 P=1021, 95-107 against 96-101 at B=8 P=2011), where memory_eff
# 0.75 / 0.8 timed them 1.18-1.47x slow; where the dots bind (B=1 P=4093 N=64) the stream's efficiency moves nothing
STREAM_EFF = 0.88


def row_launch(p, task):
    # every node re-streams its head's prefix; the N programs of a head share it through L2
    b, h, pl, n, d = (task[k] for k in ("B", "H", "P", "N", "D"))
    bn, threads = p["BLOCK_N"], p["num_warps"] * task.gpu.warp
    regs = 40 + 2 * bn * d // threads
    prefix_bytes = 2 * b * h * pl * d * DTYPE_BYTES[task.dtype]
    return Launch(grid=b * h * n, threads=threads, regs=min(regs, 255), bytes_per_access=16,
                  traffic=1 + (n - 1) * 0.03 * prefix_bytes / cost_of(task).bytes,
                  compute_scale=1.0 if regs <= 255 else 0.5)


def tile_launch(p, task):
    b, h, pl, n, d = (task[k] for k in ("B", "H", "P", "N", "D"))
    e, bn, threads = DTYPE_BYTES[task.dtype], p["BLOCK_N"], p["num_warps"] * task.gpu.warp
    bm, stages, splits = nodes_pad(n), p.get("num_stages", 1), p.get("num_splits", 1)
    kv_tile, smem = 2 * bn * d * e, flash_smem(task, bm, bn, d, e, stages, shared_kv=True, warps=p["num_warps"])
    if bm <= 16 and triton_mma_sync(task):
        smem -= bm * d * e    # a 16-node Q tile stays in registers on mma.sync (A10: 16 x 64 x 4 stages, KV + P)
    regs = 40 + bm * d // threads + bm * bn * 3 // 2 // threads + bm * d * e // 4 // threads
    spill = max(0, regs - 255)
    mma = wgmma_eff(task, bm) * mfma_eff(task)
    overlap, chunk, traffic = PIPELINE_OVERLAP[stages], cdiv(cdiv(pl, splits), bn) * bn, 1 + spill / 128
    if splits > 1:                                    # fp32 partials written, then read by the combine
        traffic += 2 * b * h * n * splits * (d + 1) * 4 / cost_of(task).bytes
    return Launch(grid=b * h * splits, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                  bytes_per_access=max(16, kv_tile * max(1, stages - 1) // threads // 2), traffic=traffic,
                  compute_scale=mma * overlap * 255 / (255 + 2 * spill),
                  tile_quant=n / bm * pl / (chunk * splits), launches=2 if splits > 1 else 1)


def wrapper(task, grid, args, kw, pre="", post=""):
    return f'''

{ENTRY.py_def(task)}:
    (B, H, N, D), P = q.shape, k_cache.shape[2]
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    k_tree, v_tree, tree_mask = k_tree.contiguous(), v_tree.contiguous(), tree_mask.contiguous()
    o = torch.empty_like(q)
{pre}    tree_attn_kernel[{grid}](q, k_cache, v_cache, k_tree, v_tree, tree_mask, {args}, HEAD_DIM=D, {kw})
{post}    return o
'''

def row_per_program_src(p, task, scale=" * qk_scale"):
    return f'''

@triton.jit
def _row_update(acc, m_i, l_i, s, v):
    m_new = tl.maximum(m_i, tl.max(s, 0))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new)
    return acc * alpha + tl.sum(p[:, None] * v, 0), m_new, (l_i * alpha + tl.sum(p, 0)).to(l_i.dtype)


@triton.jit
def tree_attn_kernel(q_ptr, kc_ptr, vc_ptr, kt_ptr, vt_ptr, mask_ptr, o_ptr, P, N, H, qk_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per (batch*head, draft node): each node streams the whole prefix on CUDA cores.
    node, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    offs_d, offs_n = tl.arange(0, HEAD_DIM), tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + (bh * N + node) * HEAD_DIM + offs_d).to(tl.float32){scale}
    m_i, l_i = tl.full([], float("-inf"), tl.float32), tl.full([], 0.0, tl.float32)
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(0, P, BLOCK_N):             # the prefix: visible to every node
        cols = start + offs_n
        off = bh * P * HEAD_DIM + cols[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(kc_ptr + off, mask=(cols < P)[:, None], other=0.0).to(tl.float32)
        s = tl.where(cols < P, tl.sum(k * q[None, :], 1), float("-inf"))
        v = tl.load(vc_ptr + off, mask=(cols < P)[:, None], other=0.0).to(tl.float32)
        acc, m_i, l_i = _row_update(acc, m_i, l_i, s, v)
    node_bits = tl.load(mask_ptr + (bh // H) * N + node)   # tree key j only where bit j is set
    for start in range(0, N, BLOCK_N):
        j = start + offs_n
        off = bh * N * HEAD_DIM + j[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(kt_ptr + off, mask=(j < N)[:, None], other=0.0).to(tl.float32)
        # j & 63: at BLOCK_N 128, j reaches 64..127, an int64 shift past its width (LLVM poison, which
        # spoils `keep` even where j < N rules those lanes out: rel err 0.4-0.6 or NaN on an H200)
        keep = (j < N) & (((node_bits >> (j & 63)) & 1) != 0)
        s = tl.where(keep, tl.sum(k * q[None, :], 1), float("-inf"))
        v = tl.load(vt_ptr + off, mask=(j < N)[:, None], other=0.0).to(tl.float32)
        acc, m_i, l_i = _row_update(acc, m_i, l_i, s, v)
    tl.store(o_ptr + (bh * N + node) * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + wrapper(task, "(N, B * H)", "o, P, N, H, D ** -0.5", "BLOCK_N=BLOCK_N, num_warps=NUM_WARPS")

def blocks(exp, bit=BIT):   # prefix-block and tree-block updates shared by the tiled variants
    return f'''

@triton.jit
def _softmax_step(acc, m_i, l_i, s, v):
    # online softmax: rescale what was accumulated under the old running max
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.{exp}(m_i - m_new)
    p = tl.{exp}(s - m_new[:, None])
    return acc * alpha[:, None] + tl.dot(p.to(v.dtype), v), m_new, (l_i * alpha + tl.sum(p, 1)).to(l_i.dtype)


@triton.jit
def _prefix_block(acc, m_i, l_i, q, kc_ptr, vc_ptr, base, cols, hi, offs_d, HEAD_DIM: tl.constexpr,
                  MASKED: tl.constexpr):
    off = base + cols[:, None] * HEAD_DIM + offs_d[None, :]
    if MASKED:
        k = tl.load(kc_ptr + off, mask=(cols < hi)[:, None], other=0.0)
        s = tl.where((cols < hi)[None, :], tl.dot(q, tl.trans(k)), float("-inf"))
        return _softmax_step(acc, m_i, l_i, s, tl.load(vc_ptr + off, mask=(cols < hi)[:, None], other=0.0))
    k = tl.load(kc_ptr + off)
    return _softmax_step(acc, m_i, l_i, tl.dot(q, tl.trans(k)), tl.load(vc_ptr + off))


@triton.jit
def _tree_block(acc, m_i, l_i, q, kt_ptr, vt_ptr, mask_ptr, bh, H, N, offs_m, offs_d, HEAD_DIM: tl.constexpr,
                NODES: tl.constexpr):
    # draft keys: node i sees key j iff bit j of tree_mask[b, i] is set (its ancestors and itself)
    offs_j = tl.arange(0, NODES)
    off = bh * N * HEAD_DIM + offs_j[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(kt_ptr + off, mask=(offs_j < N)[:, None], other=0.0)
    bits = tl.load(mask_ptr + (bh // H) * N + offs_m, mask=offs_m < N, other=0)
    keep = ({bit}) != 0
    s = tl.where(keep & (offs_j < N)[None, :], tl.dot(q, tl.trans(k)), float("-inf"))
    return _softmax_step(acc, m_i, l_i, s, tl.load(vt_ptr + off, mask=(offs_j < N)[:, None], other=0.0))
'''

LOAD_Q = '''    offs_m, offs_n, offs_d = tl.arange(0, NODES), tl.arange(0, BLOCK_N), tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (bh * N + offs_m)[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < N)[:, None], other=0.0)
    q = (q * qk_scale).to(q_ptr.dtype.element_ty)     # the softmax scale (x log2 e for exp2) folded in once
    m_i, l_i = tl.full([NODES], float("-inf"), tl.float32), tl.zeros([NODES], dtype=tl.float32)
    acc = tl.zeros([NODES, HEAD_DIM], dtype=tl.float32)
'''

STORE = '''    o_off = (bh * N + offs_m)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptr + o_off, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=(offs_m < N)[:, None])
'''

def prefix_loop(p, lo, hi, peel=True):
    call = ("acc, m_i, l_i = _prefix_block(acc, m_i, l_i, q, kc_ptr, vc_ptr, bh * P * HEAD_DIM, {} + offs_n, "
                f"{hi},\n                                      offs_d, HEAD_DIM, {{}})")
    if not peel:   # every prefix block predicated on cols < P
        return f"    for start in range({lo}, {hi}, BLOCK_N):\n        {call.format('start', True)}\n"
    rng = f"tl.range({lo}, hi_full, BLOCK_N, num_stages=NUM_STAGES)" if "num_stages" in p else f"range({lo}, hi_full, BLOCK_N)"
    return (f"    hi_full = {lo} + tl.maximum({hi} - {lo}, 0) // BLOCK_N * BLOCK_N\n"
                f"    for start in {rng}:    # whole prefix blocks: no masks\n        {call.format('start', False)}\n"
                f"    if hi_full < {hi}:    # ragged end of the prefix\n"
                f"        {call.format('hi_full', True)}\n")

def single(p, task, exp, peel, scale, bit):
    stages = ", NUM_STAGES: tl.constexpr" if "num_stages" in p else ""
    kw = "BLOCK_N=BLOCK_N, NODES=NODES, num_warps=NUM_WARPS, " + (
        "NUM_STAGES=NUM_STAGES, num_stages=NUM_STAGES" if "num_stages" in p else "num_stages=1")
    return blocks(exp, bit) + f'''

@triton.jit
def tree_attn_kernel(q_ptr, kc_ptr, vc_ptr, kt_ptr, vt_ptr, mask_ptr, o_ptr, P, N, H, qk_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NODES: tl.constexpr{stages}):
    bh = tl.program_id(0).to(tl.int64)
{LOAD_Q}{prefix_loop(p, "0", "P", peel)}    acc, m_i, l_i = _tree_block(acc, m_i, l_i, q, kt_ptr, vt_ptr, mask_ptr, bh, H, N, offs_m, offs_d, HEAD_DIM, NODES)
{STORE}''' + wrapper(task, "(B * H,)", f"o, P, N, H, {scale}", kw)


def tree_tile_tl_dot_src(p, task, scale="D ** -0.5", bit=BIT):
    return single(p, task, "exp", False, scale, bit)


def unmasked_prefix_exp2_src(p, task, scale=LOG2_SCALE, bit=BIT):
    return single(p, task, "exp2", True, scale, bit)


def split_kv_src(p, task, part="offs_s", scale=LOG2_SCALE):
    return blocks("exp2") + f'''

@triton.jit
def tree_attn_kernel(q_ptr, kc_ptr, vc_ptr, kt_ptr, vt_ptr, mask_ptr, part_o_ptr, part_lse_ptr, P, N, H, qk_scale,
                     split_len, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NODES: tl.constexpr,
                     NUM_STAGES: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # program (batch*head, split): prefix keys [split * split_len, +split_len) (a multiple of
    # BLOCK_N, so only the last split has a ragged end); the last split also attends the tree.
    bh, split = tl.program_id(0).to(tl.int64), tl.program_id(1)
{LOAD_Q}    lo = split * split_len
    hi = tl.minimum(lo + split_len, P)
{prefix_loop(p, "lo", "hi")}    if split == NUM_SPLITS - 1:
        acc, m_i, l_i = _tree_block(acc, m_i, l_i, q, kt_ptr, vt_ptr, mask_ptr, bh, H, N, offs_m, offs_d, HEAD_DIM,
                                    NODES)
    l_safe = tl.where(l_i > 0, l_i, 1.0)                 # an empty split gets weight 0 in the combine
    row = (bh * NUM_SPLITS + split) * N + offs_m
    tl.store(part_o_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc / l_safe[:, None], mask=(offs_m < N)[:, None])
    tl.store(part_lse_ptr + row, tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf")), mask=offs_m < N)


@triton.jit
def tree_combine_kernel(part_o_ptr, part_lse_ptr, o_ptr, N, NUM_SPLITS: tl.constexpr, HEAD_DIM: tl.constexpr):
    # one program per (node, batch*head): merge the splits with weights exp2(lse_s - max lse)
    node, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    lse = tl.load(part_lse_ptr + (bh * NUM_SPLITS + offs_s) * N + node)
    w = tl.exp2(lse - tl.max(lse, 0))
    parts = tl.load(part_o_ptr + ((bh * NUM_SPLITS + {part}) * N + node)[:, None] * HEAD_DIM + offs_d[None, :])
    out = tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)
    tl.store(o_ptr + (bh * N + node) * HEAD_DIM + offs_d, out.to(o_ptr.dtype.element_ty))
''' + wrapper(
        task, "(B * H, NUM_SPLITS)", f"part_o, part_lse, P, N, H, {scale}, split_len",
            "BLOCK_N=BLOCK_N, NODES=NODES, NUM_STAGES=NUM_STAGES, NUM_SPLITS=NUM_SPLITS, num_warps=NUM_WARPS,\n"
            "                                     num_stages=NUM_STAGES",
            pre="    part_o = torch.empty((B * H, NUM_SPLITS, N, D), device=q.device, dtype=torch.float32)\n"
                "    part_lse = torch.empty((B * H, NUM_SPLITS, N), device=q.device, dtype=torch.float32)\n"
                "    split_len = triton.cdiv(triton.cdiv(P, NUM_SPLITS), BLOCK_N) * BLOCK_N   # whole blocks per split\n",
            post="    tree_combine_kernel[(N, B * H)](part_o, part_lse, o, N, NUM_SPLITS=NUM_SPLITS, HEAD_DIM=D, num_warps=4)\n")


class TreeAttentionTriton(TreeAttentionSpec):
    impl = "triton"
    variants = (
        Rung("row_per_program", "one program per (head, draft node): CUDA-core dots over prefix + tree bits",
             (Param("BLOCK_N", (32, 64, 128), 64), Param("num_warps", (2, 4, 8), 4)), path="fp32",
             compute_eff=0.07, memory_eff=0.6, launch=row_launch, render=row_per_program_src,
             # (half_accumulator dropped here and from unmasked_prefix_exp2: a 16-bit softmax denominator,
             # rounded once per BLOCK_N keys, stays within tolerance at short prefixes: 6e-4 on an H200)
             bugs={"missing_scale": {"scale": ""}}),
        Rung("tree_tile_tl_dot", "all draft nodes of a head as the M side of tl.dot; prefix read once per head",
             (BLOCK_N, WARPS), path="fp16", compute_eff=0.4, memory_eff=STREAM_EFF, smem="dynamic", launch=tile_launch,
             render=tree_tile_tl_dot_src, bugs={"missing_scale": {"scale": "1.0"}, "off_by_one": OFF_BIT}),
        Rung("unmasked_prefix_exp2", "exp2 with log2e folded in; whole prefix blocks unmasked, ragged tail masked",
             (BLOCK_N, WARPS), path="fp16", compute_eff=0.45, memory_eff=STREAM_EFF, smem="dynamic", launch=tile_launch,
             render=unmasked_prefix_exp2_src, bugs={"missing_scale": NO_LOG2E}),
        Rung("pipelined_stages", "tl.range(num_stages) keeps prefix K/V tiles in flight behind the MMAs",
             (BLOCK_N, WARPS, Param("num_stages", (2, 3, 4), 2)), path="fp16", compute_eff=0.48,
             memory_eff=STREAM_EFF, smem="dynamic", launch=tile_launch, render=unmasked_prefix_exp2_src,
             bugs={"missing_scale": NO_LOG2E, "off_by_one": OFF_BIT}),
        Rung("split_kv", "prefix split over NUM_SPLITS programs (last one adds the tree); LSE combine kernel",
             (Param("num_splits", (2, 4, 8, 16, 32), 8), Param("BLOCK_N", (32, 64), 64), WARPS,
              Param("num_stages", (2, 3, 4), 2)), path="fp16", compute_eff=0.48, memory_eff=0.9, smem="dynamic",
             launch=tile_launch, render=split_kv_src,
             bugs={"bad_combine_index": {"part": "(offs_s + 1) % NUM_SPLITS"}, "missing_scale": NO_LOG2E}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(params.items()))
        return (f"{TRITON_PRELUDE}\nLOG2E = 1.4426950408889634\n{consts}"
                f"NODES = {nodes_pad(task['N'])}  # N padded for tl.dot\n" + kernel)

    def triton_kernels(self, variant, params, task) -> list:
        ptr, split = triton_ptr(task.dtype, task), "num_splits" in params
        out = {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32"} if split else {"o_ptr": ptr}
        sig = {"q_ptr": ptr, "kc_ptr": ptr, "vc_ptr": ptr, "kt_ptr": ptr, "vt_ptr": ptr, "mask_ptr": "*i64", **out,
               "P": "i32", "N": "i32", "H": "i32", "qk_scale": "fp32"}
        const = {"HEAD_DIM": task["D"], "BLOCK_N": params["BLOCK_N"],
                 **({} if variant.path == "fp32" else {"NODES": nodes_pad(task["N"])}),
                 **{k.upper(): params[k] for k in ("num_stages", "num_splits") if k in params}}
        if split:
            sig["split_len"] = "i32"
        specs = [KernelSpec("tree_attn_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const, params["num_warps"],
                            params.get("num_stages", 1))]
        if split:
            specs.append(KernelSpec("tree_combine_kernel", {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32",
                                    "o_ptr": ptr, "N": "i32", "NUM_SPLITS": "constexpr", "HEAD_DIM": "constexpr"},
                                    {"NUM_SPLITS": params["num_splits"], "HEAD_DIM": task["D"]}, 4, 1))
        return specs
