"""Paged-KV decode attention in Triton (vLLM-style block table, grouped-query heads).

Ladder: one token per loop trip -> one page per trip -> several pages gathered per trip ->
all query heads of a KV group in one program (tl.dot, KV read once) -> split-KV over the
sequence with a combine kernel.
"""
from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, launch_stages, triton_ptr
from . import _kv_pipeline as kv_pipeline
from ._attn_check import HALF, triton_check
from ._flash_tiles import split_weights
from ._paged_tiles import key_launch, tile_launch, tile_shape
from .paged_decode_spec import ENTRY, PagedDecodeSpec, cost_of

WARPS = Param("num_warps", (2, 4, 8), 4)
TILE = Param("BLOCK_N", (32, 64, 128), 64)
# the tl.dot rungs' warps: 2 run the padded 16-row group on mma.sync (no wgmma warpgroup) with twice the programs an SM
DOT_WARPS = Param("num_warps", (2, 4, 8), 4)
LOG2E = 1.4426950408889634
NO_SCALE = {"scale": ""}


def dot_launch(p, task):
    b, h, kvh, s, d, elt = task["B"], task["H"], task["KVH"], task["S"], task["D"], DTYPE_BYTES[task.dtype]
    threads, block_n, tile, regs = tile_shape(p, task)
    group = h // kvh
    gpad = max(16, 1 << (group - 1).bit_length())     # tl.dot needs M >= 16: pad the head group
    # one dot operand tile staged in shared memory (plus q and a reduction scratch on NVIDIA). The launch names
    # no num_stages, so on NVIDIA Triton pipelines the tile loop at its default (base.launch_stages): the gathered
    # K/V tile gets a second buffer and the block-table indices one (Triton 3.9 metadata.shared at 3 stages
    # over 1, sm_80/86/89/90a/120a, D=64/128, 32-128 keys, 4/8 warps: + BLOCK_N x D x 2 + BLOCK_N x 4 exact;
    # H100 D=128 BLOCK_N=128: 74,240 B where the model said 40,960)
    smem = block_n * d * elt + (0 if task.gpu.triton_q_in_registers else gpad * d * elt + block_n * 32)
    if launch_stages(p, task) > 1:
        smem += block_n * d * elt + block_n * 4
    useful = group / gpad                             # padded rows run on the tensor cores too
    if "NUM_SPLITS" not in p:
        return Launch(grid=b * kvh, threads=threads, smem_bytes=smem, regs=regs + 32, bytes_per_access=tile,
                      tile_quant=useful)
    splits = p["NUM_SPLITS"]
    used = min(splits, cdiv(s, block_n))
    partials = b * h * splits * (d + 2) * 4 * 2
    return Launch(grid=b * kvh * used, threads=threads, smem_bytes=smem, regs=regs + 32, bytes_per_access=tile,
                  traffic=1 + partials / cost_of(task).bytes, tile_quant=useful, launches=2)


SIG = '''
@triton.jit
def paged_decode_kernel(q_ptr, k_cache, v_cache, block_table, seq_lens, o_ptr, scale, max_pages,
                        NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                        PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr{extra}):
'''
PER_HEAD = '''    # grid (H, B): the sibling query heads of one KV head run next to each other and share L2
    h = tl.program_id(0)
    b = tl.program_id(1)
    kvh = h // GROUP
    seq_len = tl.load(seq_lens + b)
    pages = block_table + b * max_pages
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (b * NUM_KV_HEADS * GROUP + h) * HEAD_DIM + offs_d).to(tl.float32)
    m_i = -float("inf")
    l_i = {l0}
    acc = tl.zeros([HEAD_DIM], dtype={acc_t})
'''
ONLINE = '''        s = tl.where(mask_n, tl.sum(k.to(tl.float32) * q[None, :], 1){scale}, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_cache + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        acc = acc{rescale} + tl.sum(p[:, None] * v.to(tl.float32), 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_new
    tl.store(o_ptr + (b * NUM_KV_HEADS * GROUP + h) * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
'''


def launch_depth(p) -> str:       # the tl.dot rungs' launch depth where a candidate names one (base.launch_stages)
    return f", num_stages={p['num_stages']}" if "num_stages" in p else ""

def wrapper(p, task, grid, extra=""):
    return f'''

{ENTRY.py_def(task)}:
    B, H, D = q.shape
    _, P, KVH, _ = k_cache.shape
    o = torch.empty_like(q)
    paged_decode_kernel[{grid}](q, k_cache, v_cache, block_table, seq_lens, o, scale, block_table.shape[1],
                              NUM_KV_HEADS=KVH, GROUP=H // KVH, HEAD_DIM=D, PAGE_SIZE=P,
                              BLOCK_N={p.get("BLOCK_N", "P")}{extra}, num_warps={p["num_warps"]})
    return o
'''


def key_per_iteration_src(p, task, scale=" * scale", acc_t="tl.float32", l0="0.0", rnd=""):
    return SIG.format(extra="") + PER_HEAD.format(l0=l0, acc_t=acc_t) + f'''\
    for t in range(0, seq_len):
        page = tl.load(pages + t // PAGE_SIZE).to(tl.int64)   # int64: page * P * KVH * D can pass 2**31
        row = (page * PAGE_SIZE + t % PAGE_SIZE) * NUM_KV_HEADS + kvh
        k = tl.load(k_cache + row * HEAD_DIM + offs_d).to(tl.float32)
        s = tl.sum(k * q, 0){scale}
        m_new = tl.maximum(m_i, s)
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_cache + row * HEAD_DIM + offs_d).to(tl.float32)
        acc = (acc * alpha + p * v){rnd}
        l_i = (l_i * alpha + p){rnd}
        m_i = m_new
    tl.store(o_ptr + (b * NUM_KV_HEADS * GROUP + h) * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + wrapper(p, task, "(H, B)")



def page_tile_src(p, task, scale=" * scale"):
    return SIG.format(extra="") + PER_HEAD.format(l0="0.0", acc_t="tl.float32") + '''\
    # BLOCK_N == PAGE_SIZE: one scalar table lookup, then P contiguous-per-row K/V rows
    for start in ''' + kv_pipeline.tile_loop(p, "0, seq_len, BLOCK_N") + ''':
        page = tl.load(pages + start // PAGE_SIZE).to(tl.int64)
        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < seq_len
        rows = (page * PAGE_SIZE + tl.arange(0, BLOCK_N)) * NUM_KV_HEADS + kvh
        k = tl.load(k_cache + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
''' + ONLINE.format(scale=scale, rescale=" * alpha") + wrapper(p, task, "(H, B)")



GATHER = '''        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < {hi}
        # BLOCK_N / PAGE_SIZE pages per trip: one vector load of table entries, then a row gather
        page = tl.load(pages + offs_n // PAGE_SIZE, mask=mask_n, other=0).to(tl.int64)
        rows = (page * PAGE_SIZE + offs_n % PAGE_SIZE) * NUM_KV_HEADS + kvh
        k = tl.load(k_cache + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
'''



def multi_page_tile_src(p, task, rescale=" * alpha"):
    return SIG.format(extra="") + PER_HEAD.format(l0="0.0", acc_t="tl.float32") + \
        f"    for start in {kv_pipeline.tile_loop(p, '0, seq_len, BLOCK_N')}:\n" + \
        GATHER.format(hi="seq_len") + \
        ONLINE.format(scale=" * scale", rescale=rescale) + wrapper(p, task, "(H, B)")



def gqa_body(scale=" * qk_scale", lo="0", hi="seq_len"):
    return f'''    # one program per (KV head, b): the GROUP query heads sharing it form the M side of tl.dot,
    # padded to GROUP_PAD >= 16 rows, so each K/V tile is read from DRAM once for the whole group
    kvh = tl.program_id(0)
    b = tl.program_id(1)
    seq_len = tl.load(seq_lens + b)
    pages = block_table + b * max_pages
    offs_d = tl.arange(0, HEAD_DIM)
    offs_g = tl.arange(0, GROUP_PAD)
    heads = b * NUM_KV_HEADS * GROUP + kvh * GROUP + offs_g
    mask_g = offs_g < GROUP
    q = tl.load(q_ptr + heads[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_g[:, None], other=0.0)
    qk_scale = scale * {LOG2E}             # exp2 with log2(e) folded into the scale
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for start in range({lo}, {hi}, BLOCK_N):
''' + GATHER.format(hi=hi) + f'''\
        s = tl.dot(q, tl.trans(k)){scale}
        s = tl.where(mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        v = tl.load(v_cache + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
'''


def gqa_dot_src(p, task, scale=" * qk_scale"):
    return SIG.format(extra=", GROUP_PAD: tl.constexpr") + gqa_body(scale) + '''\
    o = acc / l_i[:, None]
    tl.store(o_ptr + heads[:, None] * HEAD_DIM + offs_d[None, :], o.to(o_ptr.dtype.element_ty), mask=mask_g[:, None])
''' + wrapper(p, task, "(KVH, B)", ", GROUP_PAD=max(16, triton.next_power_of_2(H // KVH))" + launch_depth(p))


def split_kv_src(p, task, combine="(bh * NUM_SPLITS + offs_s)", scale=" * qk_scale"):
    head = SIG.format(extra=", GROUP_PAD: tl.constexpr,\n                        ml_ptr, "
                                  "NUM_SPLITS: tl.constexpr")
    body = gqa_body(scale, "lo", "hi")
    body = body.replace("    for start in range(lo, hi, BLOCK_N):\n", '''\
    # split program_id(2) owns whole tiles [lo, hi) of this sequence
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    lo = tl.program_id(2) * split_len
    hi = tl.minimum(lo + split_len, seq_len)
    for start in range(lo, hi, BLOCK_N):
''')
    return head + body + f'''\
    part = heads * NUM_SPLITS + tl.program_id(2)       # o_ptr: fp32 partials [B * H * NUM_SPLITS, D]
    tl.store(o_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=mask_g[:, None])
    tl.store(ml_ptr + part * 2, m_i, mask=mask_g)
    tl.store(ml_ptr + part * 2 + 1, l_i, mask=mask_g)


@triton.jit
def paged_decode_combine_kernel(part_ptr, ml_ptr, o_ptr, HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # merge one head's splits with weights 2^(m_s - m_max); empty splits (m = -inf) weigh 0
{split_weights(combine)}
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)).to(o_ptr.dtype.element_ty))


{ENTRY.py_def(task)}:
    B, H, D = q.shape
    _, P, KVH, _ = k_cache.shape
    NUM_SPLITS = {p["NUM_SPLITS"]}
    part = torch.empty(B * H * NUM_SPLITS, D, dtype=torch.float32, device=q.device)
    ml = torch.empty(B * H * NUM_SPLITS, 2, dtype=torch.float32, device=q.device)
    paged_decode_kernel[(KVH, B, NUM_SPLITS)](
        q, k_cache, v_cache, block_table, seq_lens, part, scale, block_table.shape[1], NUM_KV_HEADS=KVH,
        GROUP=H // KVH, HEAD_DIM=D, PAGE_SIZE=P, BLOCK_N={p["BLOCK_N"]},
        GROUP_PAD=max(16, triton.next_power_of_2(H // KVH)), ml_ptr=ml, NUM_SPLITS=NUM_SPLITS,
        num_warps={p["num_warps"]}{launch_depth(p)})
    o = torch.empty_like(q)
    paged_decode_combine_kernel[(B * H,)](part, ml, o, HEAD_DIM=D, NUM_SPLITS=NUM_SPLITS, num_warps=4)
    return o
'''


class PagedDecodeTriton(PagedDecodeSpec):
    impl = "triton"
    check_adapter = staticmethod(triton_check)
    variants = (
        Rung("key_per_iteration", "program per (b, h); a block-table lookup and one K/V row per loop trip",
             (Param("num_warps", (1, 2, 4), 1),), memory_eff=0.3, launch=key_launch, render=key_per_iteration_src,
             bugs={"missing_scale": NO_SCALE, "half_accumulator": HALF}),
        Rung("page_tile", "one block-table entry per trip: a whole [P, D] page tile, online softmax",
             (WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.75, launch=tile_launch, render=page_tile_src,
             bugs={"missing_scale": NO_SCALE}),
        Rung("multi_page_tile", "BLOCK_N tokens across several pages gathered per trip (vector table load)",
             (TILE, WARPS, kv_pipeline.LOOP_STAGES), memory_eff=0.86, launch=tile_launch,
             render=multi_page_tile_src,
             bugs={"missing_scale": {"rescale": ""}}),
        Rung("gqa_dot", "program per (b, KV head): the group's query heads as one tl.dot operand, KV read once",
             (TILE, DOT_WARPS), path="fp16", compute_eff=0.3, memory_eff=0.9, smem="dynamic",
             launch=dot_launch, render=gqa_dot_src, bugs={"missing_scale": NO_SCALE}),
        Rung("split_kv", "gqa_dot split over the sequence; partials merged by a combine kernel",
             (Param("NUM_SPLITS", (2, 4, 8, 16, 32), 4), TILE, DOT_WARPS), path="fp16",
             compute_eff=0.3, memory_eff=0.92, smem="dynamic", launch=dot_launch, render=split_kv_src,
             bugs={"bad_combine_index": {"combine": "(bh + offs_s)"}, "missing_scale": NO_SCALE}),
    )

    def assemble(self, kernel, variant, params, task) -> str:
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"q_ptr": ptr, "k_cache": ptr, "v_cache": ptr, "block_table": "*i32", "seq_lens": "*i32", "o_ptr": ptr,
               "scale": "fp32", "max_pages": "i32", "NUM_KV_HEADS": "constexpr", "GROUP": "constexpr",
               "HEAD_DIM": "constexpr", "PAGE_SIZE": "constexpr", "BLOCK_N": "constexpr"}
        consts = {"NUM_KV_HEADS": task["KVH"], "GROUP": task["H"] // task["KVH"], "HEAD_DIM": task["D"],
                  "PAGE_SIZE": task["P"], "BLOCK_N": params.get("BLOCK_N", task["P"])}
        if variant.path == "fp16":                 # the tl.dot rungs pad the head group
            sig["GROUP_PAD"] = "constexpr"
            consts["GROUP_PAD"] = max(16, 1 << (consts["GROUP"] - 1).bit_length())
        warps = params["num_warps"]
        # the compile spec is what the launch runs: the tl.dot rungs at Triton's default depth on NVIDIA
        stages = launch_stages(params, task) if variant.path == "fp16" else 1
        if "NUM_SPLITS" not in params:
            return [KernelSpec("paged_decode_kernel", sig, consts, warps, stages)]
        sig = {**sig, "o_ptr": "*fp32", "ml_ptr": "*fp32", "NUM_SPLITS": "constexpr"}
        consts["NUM_SPLITS"] = params["NUM_SPLITS"]
        comb = {"part_ptr": "*fp32", "ml_ptr": "*fp32", "o_ptr": ptr, "HEAD_DIM": "constexpr", "NUM_SPLITS": "constexpr"}
        return [KernelSpec("paged_decode_kernel", sig, consts, warps, stages),
                KernelSpec("paged_decode_combine_kernel", comb,
                           {"HEAD_DIM": task["D"], "NUM_SPLITS": params["NUM_SPLITS"]}, 4, 1)]
