"""Speculative-decoding tree attention in Triton (Medusa / EAGLE verification): N draft tokens
in a tree attend to the cached prefix plus their ancestors (bit j of the int64 tree_mask[b, i]:
node j is node i or an ancestor). Ladder: one program per node on CUDA cores -> all nodes of a
head as one tl.dot tile (prefix read once per head) -> exp2, unmasked prefix loop + ragged tail
-> pipelined prefix tiles -> split-KV over the prefix + LSE combine (B*H programs can't fill a GPU).
"""
from functools import partialmethod

from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, KernelSpec, TRITON_PRELUDE,
                    cdiv, kernelbench_program, triton_ptr)
from ._flash_tiles import PIPELINE_OVERLAP, flash_smem, mfma_eff, wgmma_eff

BLOCK_N = Param("BLOCK_N", (32, 64, 128), 64)
WARPS = Param("num_warps", (4, 8), 4)


def _nodes_pad(n: int) -> int:   # rows of the node tile: N up to a power of two, >= 16 (tl.dot's minimum M)
    return max(16, 1 << (n - 1).bit_length())


def _tree_pairs(n: int) -> int:   # (node, ancestor-or-self) pairs of the reference's heap-ordered binary tree
    return sum((i + 1).bit_length() for i in range(n))


class TreeAttentionTriton(OpModule):
    op, impl, family = "tree_attention", "triton", "attention"
    title = "Speculative-decoding tree attention"
    desc = ("o[b, h, i] = softmax(q[b, h, i] . [k_cache[b, h]; k_tree[b, h]]^T / sqrt(D)) [v_cache; v_tree] where "
            "draft node i sees all P prefix keys and tree key j only if bit j of tree_mask[b, i] (int64) is set; "
            "q, k_tree, v_tree, o [B, H, N, D], k_cache, v_cache [B, H, P, D].")
    dims = {"B": "batch", "H": "heads", "P": "cached prefix length", "N": "draft tree nodes (<= 64)", "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "P": 4093, "N": 64, "D": 128}, {"B": 8, "H": 32, "P": 2011, "N": 32, "D": 128},
              {"B": 32, "H": 32, "P": 1021, "N": 16, "D": 128}, {"B": 4, "H": 32, "P": 16001, "N": 64, "D": 128},
              {"B": 16, "H": 32, "P": 8190, "N": 8, "D": 128}, {"B": 2, "H": 40, "P": 31999, "N": 64, "D": 128})
    dtypes = ("bf16", "fp16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("row_per_program", "one program per (head, draft node): CUDA-core dots over prefix + tree bits",
                (Param("BLOCK_N", (32, 64, 128), 64), Param("num_warps", (2, 4, 8), 4)), path="fp32",
                compute_eff=0.07, memory_eff=0.6, bugs=("missing_scale", "half_accumulator")),
        Variant("tree_tile_tl_dot", "all draft nodes of a head as the M side of tl.dot; prefix read once per head",
                (BLOCK_N, WARPS), path="fp16", compute_eff=0.4, memory_eff=0.75, smem="dynamic",
                bugs=("missing_scale", "off_by_one")),
        Variant("unmasked_prefix_exp2", "exp2 with log2e folded in; whole prefix blocks unmasked, ragged tail masked",
                (BLOCK_N, WARPS), path="fp16", compute_eff=0.45, memory_eff=0.8, smem="dynamic",
                bugs=("missing_scale", "half_accumulator")),
        Variant("pipelined_stages", "tl.range(num_stages) keeps prefix K/V tiles in flight behind the MMAs",
                (BLOCK_N, WARPS, Param("num_stages", (2, 3, 4), 2)), path="fp16", compute_eff=0.48,
                memory_eff=0.88, smem="dynamic", bugs=("missing_scale", "off_by_one")),
        Variant("split_kv", "prefix split over NUM_SPLITS programs (last one adds the tree); LSE combine kernel",
                (Param("num_splits", (2, 4, 8, 16, 32), 8), Param("BLOCK_N", (32, 64), 64), WARPS,
                 Param("num_stages", (2, 3), 2)), path="fp16", compute_eff=0.48, memory_eff=0.9, smem="dynamic",
                bugs=("bad_combine_index", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        b, h, p, n, d = (task[k] for k in ("B", "H", "P", "N", "D"))
        return Cost(flops=4 * b * h * d * (n * p + _tree_pairs(n)), bytes=(2 * p + 4 * n) * b * h * d * DTYPE_BYTES[task.dtype] + b * n * 8)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, p, n, d = (task[k] for k in ("B", "H", "P", "N", "D"))
        gpu, e, bn = task.gpu, DTYPE_BYTES[task.dtype], params["BLOCK_N"]
        threads, prefix_bytes = params["num_warps"] * gpu.warp, 2 * b * h * p * d * e
        if variant.tag == "row_per_program":
            # every node re-streams its head's prefix; the N programs of a head share it through L2
            regs = 40 + 2 * bn * d // threads
            return Launch(grid=b * h * n, threads=threads, regs=min(regs, 255), bytes_per_access=16,
                          traffic=1 + (n - 1) * 0.03 * prefix_bytes / self.cost(task).bytes,
                          compute_scale=1.0 if regs <= 255 else 0.5)
        bm, stages, splits = _nodes_pad(n), params.get("num_stages", 1), params.get("num_splits", 1)
        kv_tile, smem = 2 * bn * d * e, flash_smem(task, bm, bn, d, e, stages, shared_kv=True)
        regs = 40 + bm * d // threads + bm * bn * 3 // 2 // threads + bm * d * e // 4 // threads
        spill = max(0, regs - 255)
        mma = wgmma_eff(task, bm) * mfma_eff(task)
        overlap, chunk, traffic = PIPELINE_OVERLAP[stages], cdiv(cdiv(p, splits), bn) * bn, 1 + spill / 128
        if splits > 1:                                    # fp32 partials written, then read by the combine
            traffic += 2 * b * h * n * splits * (d + 1) * 4 / self.cost(task).bytes
        return Launch(grid=b * h * splits, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                      bytes_per_access=max(16, kv_tile * max(1, stages - 1) // threads // 2), traffic=traffic,
                      compute_scale=mma * overlap * 255 / (255 + 2 * spill),
                      tile_quant=n / bm * p / (chunk * splits), launches=2 if splits > 1 else 1)

    def signature(self, task: Task) -> str:
        return "def tree_attention(q, k_cache, v_cache, k_tree, v_tree, tree_mask) -> o: q/k_tree/v_tree/o [B, H, N, D], caches [B, H, P, D], tree_mask int64 [B, N]"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, k_cache, v_cache, k_tree, v_tree, tree_mask",
            body="tree = ((tree_mask[:, :, None] >> torch.arange(N, device=q.device)) & 1).bool()      # [B, N, N]\n"
                 "        keep = torch.cat([torch.ones(B, N, P, dtype=torch.bool, device=q.device), tree], 2)[:, None]\n"
                 "        k, v = torch.cat([k_cache, k_tree], 2), torch.cat([v_cache, v_tree], 2)\n"
                 "        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)",
            # draft tree in binary-heap order: the ancestors of node n (1-based) are n >> s
            inputs="[torch.randn(B, H, n, D, dtype=DTYPE, device='cuda') for n in (N, P, P, N, N)] + [\n"
                   "            (((torch.arange(1, N + 1)[:, None, None] >> torch.arange(7)[None, :, None])\n"
                   "              == torch.arange(1, N + 1)[None, None, :]).any(1).long() << torch.arange(N))\n"
                   "            .sum(1).expand(B, N).contiguous().cuda()]")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        out = {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32"} if variant.tag == "split_kv" else {"o_ptr": ptr}
        sig = {"q_ptr": ptr, "kc_ptr": ptr, "vc_ptr": ptr, "kt_ptr": ptr, "vt_ptr": ptr, "mask_ptr": "*i64", **out,
               "P": "i32", "N": "i32", "H": "i32", "qk_scale": "fp32"}
        const = {"HEAD_DIM": task["D"], "BLOCK_N": params["BLOCK_N"],
                 **({} if variant.tag == "row_per_program" else {"NODES": _nodes_pad(task["N"])}),
                 **{k.upper(): params[k] for k in ("num_stages", "num_splits") if k in params}}
        if variant.tag == "split_kv":
            sig["split_len"] = "i32"
        specs = [KernelSpec("tree_attn_kernel", {**sig, **dict.fromkeys(const, "constexpr")}, const, params["num_warps"],
                            params.get("num_stages", 1))]
        if variant.tag == "split_kv":
            specs.append(KernelSpec("tree_combine_kernel", {"part_o_ptr": "*fp32", "part_lse_ptr": "*fp32",
                                    "o_ptr": ptr, "N": "i32", "NUM_SPLITS": "constexpr", "HEAD_DIM": "constexpr"},
                                    {"NUM_SPLITS": params["num_splits"], "HEAD_DIM": task["D"]}, 4, 1))
        return specs

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        consts = "".join(f"{k.upper()} = {v}\n" for k, v in sorted(params.items()))
        head = f"{TRITON_PRELUDE}\nLOG2E = 1.4426950408889634\n{consts}NODES = {_nodes_pad(task['N'])}  # N padded for tl.dot\n"
        return head + getattr(self, "_" + variant.tag)(params, bug)

    def _wrapper(self, grid, args, kw, pre="", post=""):
        return f'''

def tree_attention(q, k_cache, v_cache, k_tree, v_tree, tree_mask):
    (B, H, N, D), P = q.shape, k_cache.shape[2]
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    k_tree, v_tree, tree_mask = k_tree.contiguous(), v_tree.contiguous(), tree_mask.contiguous()
    o = torch.empty_like(q)
{pre}    tree_attn_kernel[{grid}](q, k_cache, v_cache, k_tree, v_tree, tree_mask, {args}, HEAD_DIM=D, {kw})
{post}    return o
'''

    def _row_per_program(self, p, bug):
        scale = "" if bug == "missing_scale" else " * qk_scale"
        l_type = "q_ptr.dtype.element_ty" if bug == "half_accumulator" else "tl.float32"
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
    m_i, l_i = tl.full([], float("-inf"), tl.float32), tl.full([], 0.0, {l_type})
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
        keep = (j < N) & (((node_bits >> j) & 1) != 0)
        s = tl.where(keep, tl.sum(k * q[None, :], 1), float("-inf"))
        v = tl.load(vt_ptr + off, mask=(j < N)[:, None], other=0.0).to(tl.float32)
        acc, m_i, l_i = _row_update(acc, m_i, l_i, s, v)
    tl.store(o_ptr + (bh * N + node) * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + self._wrapper("(N, B * H)", "o, P, N, H, D ** -0.5", "BLOCK_N=BLOCK_N, num_warps=NUM_WARPS")

    def _blocks(self, p, bug, exp):   # prefix-block and tree-block updates shared by the tiled variants
        bit = "(bits[:, None] >> (offs_j[None, :] + 1)) & 1" if bug == "off_by_one" else "(bits[:, None] >> offs_j[None, :]) & 1"
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

    def _load_q(self, bug):
        l_type = "q_ptr.dtype.element_ty" if bug == "half_accumulator" else "tl.float32"
        return f'''    offs_m, offs_n, offs_d = tl.arange(0, NODES), tl.arange(0, BLOCK_N), tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (bh * N + offs_m)[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < N)[:, None], other=0.0)
    q = (q * qk_scale).to(q_ptr.dtype.element_ty)     # the softmax scale (x log2 e for exp2) folded in once
    m_i, l_i = tl.full([NODES], float("-inf"), tl.float32), tl.zeros([NODES], dtype={l_type})
    acc = tl.zeros([NODES, HEAD_DIM], dtype=tl.float32)
'''

    _STORE = '''    o_off = (bh * N + offs_m)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptr + o_off, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=(offs_m < N)[:, None])
'''

    def _prefix_loop(self, p, bug, lo, hi, peel=True):
        call = ("acc, m_i, l_i = _prefix_block(acc, m_i, l_i, q, kc_ptr, vc_ptr, bh * P * HEAD_DIM, {} + offs_n, "
                f"{hi},\n                                      offs_d, HEAD_DIM, {{}})")
        if not peel:   # every prefix block predicated on cols < P
            return f"    for start in range({lo}, {hi}, BLOCK_N):\n        {call.format('start', True)}\n"
        rng = f"tl.range({lo}, hi_full, BLOCK_N, num_stages=NUM_STAGES)" if "num_stages" in p else f"range({lo}, hi_full, BLOCK_N)"
        return (f"    hi_full = {lo} + tl.maximum({hi} - {lo}, 0) // BLOCK_N * BLOCK_N\n"
                f"    for start in {rng}:    # whole prefix blocks: no masks\n        {call.format('start', False)}\n"
                f"    if hi_full < {hi}:    # ragged end of the prefix\n"
                f"        {call.format('hi_full', bug != 'no_bounds_check')}\n")

    def _single(self, p, bug, exp="exp2", peel=True):
        stages = ", NUM_STAGES: tl.constexpr" if "num_stages" in p else ""
        kw = "BLOCK_N=BLOCK_N, NODES=NODES, num_warps=NUM_WARPS, " + (
            "NUM_STAGES=NUM_STAGES, num_stages=NUM_STAGES" if "num_stages" in p else "num_stages=1")
        scale = self._scale(bug, exp)
        return self._blocks(p, bug, exp) + f'''

@triton.jit
def tree_attn_kernel(q_ptr, kc_ptr, vc_ptr, kt_ptr, vt_ptr, mask_ptr, o_ptr, P, N, H, qk_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NODES: tl.constexpr{stages}):
    bh = tl.program_id(0).to(tl.int64)
{self._load_q(bug)}{self._prefix_loop(p, bug, "0", "P", peel)}    acc, m_i, l_i = _tree_block(acc, m_i, l_i, q, kt_ptr, vt_ptr, mask_ptr, bh, H, N, offs_m, offs_d, HEAD_DIM, NODES)
{self._STORE}''' + self._wrapper("(B * H,)", f"o, P, N, H, {scale}", kw)

    _tree_tile_tl_dot = partialmethod(_single, exp="exp", peel=False)
    _unmasked_prefix_exp2 = _pipelined_stages = partialmethod(_single)

    def _scale(self, bug, exp="exp2"):   # missing_scale: no scale at all (exp) / log2(e) forgotten (exp2)
        return {"exp": ("D ** -0.5", "1.0"), "exp2": ("D ** -0.5 * LOG2E", "D ** -0.5")}[exp][bug == "missing_scale"]

    def _split_kv(self, p, bug):
        part = "(offs_s + 1) % NUM_SPLITS" if bug == "bad_combine_index" else "offs_s"
        scale = self._scale(bug)
        return self._blocks(p, bug, "exp2") + f'''

@triton.jit
def tree_attn_kernel(q_ptr, kc_ptr, vc_ptr, kt_ptr, vt_ptr, mask_ptr, part_o_ptr, part_lse_ptr, P, N, H, qk_scale,
                     split_len, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NODES: tl.constexpr,
                     NUM_STAGES: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # program (batch*head, split): prefix keys [split * split_len, +split_len) (a multiple of
    # BLOCK_N, so only the last split has a ragged end); the last split also attends the tree.
    bh, split = tl.program_id(0).to(tl.int64), tl.program_id(1)
{self._load_q(bug)}    lo = split * split_len
    hi = tl.minimum(lo + split_len, P)
{self._prefix_loop(p, bug, "lo", "hi")}    if split == NUM_SPLITS - 1:
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
''' + self._wrapper(
            "(B * H, NUM_SPLITS)", f"part_o, part_lse, P, N, H, {scale}, split_len",
            "BLOCK_N=BLOCK_N, NODES=NODES, NUM_STAGES=NUM_STAGES, NUM_SPLITS=NUM_SPLITS, num_warps=NUM_WARPS,\n"
            "                                     num_stages=NUM_STAGES",
            pre="    part_o = torch.empty((B * H, NUM_SPLITS, N, D), device=q.device, dtype=torch.float32)\n"
                "    part_lse = torch.empty((B * H, NUM_SPLITS, N), device=q.device, dtype=torch.float32)\n"
                "    split_len = triton.cdiv(triton.cdiv(P, NUM_SPLITS), BLOCK_N) * BLOCK_N   # whole blocks per split\n",
            post="    tree_combine_kernel[(N, B * H)](part_o, part_lse, o, N, NUM_SPLITS=NUM_SPLITS, HEAD_DIM=D, num_warps=4)\n")

