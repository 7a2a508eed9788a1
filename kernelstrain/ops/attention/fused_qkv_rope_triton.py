"""Fused QKV projection + RoPE in Triton: y = x . w^T with tl.dot, q and k rotated in interleaved
pairs (a [BLOCK_M, BLOCK_N] tile reshaped to [.., BLOCK_N / 2, 2] and split), heads stored into q, k, v.

Ladder: tl.dot GEMM to an fp32 scratch plus a separate rope kernel -> rope fused into the GEMM's
epilogue -> GROUP_M program swizzle (L2 reuse of x panels) -> num_stages-pipelined loads, tuned
tiles and warps -> persistent programs fed by tensor descriptors (TMA on Hopper; Triton's persistent
matmul, gemm_fp16_triton's top rung). Launch models: gemm_fp16_triton's, on the task's GEMM view.
"""
import os
import textwrap
from dataclasses import replace

from ..base import KernelSpec, Param, Rung, TRITON_PRELUDE, triton_ptr
from .._triton_smem import dot_loop_smem, epilogue_scratch
from ..matmul.gemm_fp16_triton import STAGES, resident, tile_launch
from ._qkv_persistent_smem import persistent_smem
from .fused_qkv_rope_spec import ENTRY, FusedQkvRopeSpec, cost_of, gemm_view, qkv_cols

BLOCK_M = Param("BLOCK_M", (64, 128), 128)
BLOCK_N = Param("BLOCK_N", (64, 128), 128)
BLOCK_K = Param("BLOCK_K", (32, 64), 32)
# the launch's warps (4: Triton's default, what these rungs launched at): 8 halve the accumulator a thread holds
# (128 x 128 fp32: 128 -> 64 registers) and double the epilogue's conversion rounds on mma.sync
WARPS = Param("num_warps", (4, 8), 4)
# 8 warps on a 128 x 128 wgmma tile: the rope epilogue's pair split / join converts the fp32 accumulator through twice
# the shared memory (Triton 3.9 metadata.shared 65,536 B against 32,768 at 4 warps; 64-row or 64-column tiles keep
# their 4-warp figure). H100 (room_device_check_triton, 2026-12-06), T=1000 HID=2048: 128 x 128 fused_epilogue
# 89.1 -> 131.9 us, grouped_swizzle 88.7 -> 133.8 (1.48-1.51x); at 64 x 64, fused_epilogue 112.8 -> 120.4 (1.07x,
# KNOBT_SET=tuning2) and gemm_fp16_triton's grouped_swizzle, no rope epilogue, 514.9 -> 488.9 at 4096^3: no factor.
# dot_then_rope (84.2 -> 126.8 at 64 x 64) pays its fp32 scratch store at 8 warps in the model already (1.33x).
EIGHT_WARPS_ROPE_EPILOGUE = 0.68
# 64-wide wgmma tiles on the pipelined rung: gemm_fp16_triton's WGMMA_N64 (0.5: 1.43x at 4096^3) over-states the loss
# on these GEMMs. Measured (no new call; measurements/*.json): T=4096 HID=2048 H=16 KVH=16 D=64, 128 x 64 x 64 at 3
# stages 8 warps 175.9 us against 128 x 128's 149.7 on an H100 (1.17x; WGMMA_N64 modelled 2.08x); at T=1024 HID=3584
# H=28 KVH=4 the 64-wide pipelined tiles ran 120.6 us (H200) and 130.9 (H100) where the model said 258 / 251.
QKV_N64 = 0.86
# BLOCK_K 128 on the pipelined rung (room_table: the best at BLOCK_K 64, the list's end, in 8 of 8 kernelinfer
# episodes, seed 8383): H100 (plan a1), T=1000 HID=2048 H=16 KVH=4 D=128, 64 x 128 tiles at 3 stages 8 warps 51.4 us
# against BLOCK_K 64's 57.0 (model 34.0 / 36.9: the same order); half the K iterations, each a longer wgmma chain
ROT0 = "y0 * c - y1 * s"
NO_COS = {"rot0": "y0 - y1 * s"}           # missing_scale: the cos factor of the rotation dropped
ROW_MAJOR = """    pid_m = pid // num_pid_n                 # row-major order: a wave of programs streams all of w
    pid_n = pid % num_pid_n"""
GROUPED = """    # GROUP_M swizzle: GROUP_M tile rows walk the column tiles together, so resident programs
    # share x panels and w panels in L2
    in_group = GROUP_M * num_pid_n
    first_m = pid // in_group * GROUP_M
    group_m = {gsize}
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m"""
GSIZE = "tl.minimum(num_pid_m - first_m, GROUP_M)"


def dot_launch(l2_hit: float, mode: str = "dot", scratch: bool = False):
    def launch(p, task):
        lm = tile_launch(l2_hit, mode)(p, gemm_view(task))
        if mode == "pipelined" and p["BLOCK_N"] == 64 and "wgmma" in task.gpu.features:
            lm = replace(lm, compute_scale=lm.compute_scale * QKV_N64)
        # the epilogue's pair split / join converts the tile's layout through shared memory, after
        # the K loop (its buffers are free again): the whole 16-bit tile from wgmma's layout (H100
        # metadata.shared), in rounds on mma.sync (A100: 16 KB for 128 x 128 at 4 warps); unpipelined
        # on mma.sync, x and w tiles take turns in one buffer as in grouped_gemm (A10: 18 KB at BK 64)
        bm, bn, bk, stages = p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"], p.get("num_stages", 1)
        wgmma = bm >= task.gpu.triton_full_stage_rows > 0
        epilogue = bm * bn * 2 if wgmma else epilogue_scratch(bm, bn, 2, lm.threads)
        if mode == "persistent":
            return replace(lm, smem_bytes=persistent_smem(task, bm, bn, bk, stages, lm.threads))
        loop = dot_loop_smem(task, bm, bn, bk, 2, stages, gathered=True) if stages == 1 else lm.smem_bytes
        lm = replace(lm, smem_bytes=max(loop, epilogue))
        if stages == 1 and wgmma and bm == bn == 128 and p.get("num_warps", 4) == 8 and not scratch:
            lm = replace(lm, compute_scale=lm.compute_scale * EIGHT_WARPS_ROPE_EPILOGUE)
        if not scratch:
            return lm
        extra = task["T"] * qkv_cols(task) * 4 * 2 / cost_of(task).bytes    # fp32 y written, then read back
        return replace(lm, traffic=lm.traffic + extra, launches=2)
    return launch


def helpers(rot0=ROT0, k_end="HID") -> str:
    return tile_helper(k_end) + rope_helper(rot0)


def tile_helper(k_end="HID") -> str:
    return f'''

@triton.jit
def _qkv_tile(x_ptr, w_ptr, pid_m, pid_n, T, HID, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # one [BLOCK_M, BLOCK_N] tile of y = x . w^T: w rows are y columns (K-major, as nn.Linear keeps it)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * HID + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * HID + offs_k[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, {k_end}, BLOCK_K):          # HID is a multiple of BLOCK_K; the columns of BLOCK_N
        x = tl.load(x_ptrs, mask=(offs_m < T)[:, None], other=0.0)
        w = tl.load(w_ptrs)
        acc += tl.dot(x, tl.trans(w))
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    return acc, offs_m
'''


def rope_helper(rot0=ROT0) -> str:
    return f'''

@triton.jit
def _rope_store(y, offs_m, pid_n, q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, T, H: tl.constexpr, KVH: tl.constexpr,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # a column tile lies inside q, k or v (their widths are multiples of BLOCK_N); pairs (2i, 2i + 1)
    n0 = pid_n * BLOCK_N
    rows = (offs_m < T)[:, None]
    if n0 < (H + KVH) * HEAD_DIM:             # q and k columns rotate, v passes through
        pair = (n0 + 2 * tl.arange(0, BLOCK_N // 2)) % HEAD_DIM // 2
        tab = offs_m[:, None] * (HEAD_DIM // 2) + pair[None, :]
        c = tl.load(cos_ptr + tab, mask=rows, other=0.0)
        s = tl.load(sin_ptr + tab, mask=rows, other=0.0)
        y0, y1 = tl.split(tl.reshape(y, (BLOCK_M, BLOCK_N // 2, 2)))
        y = tl.reshape(tl.join({rot0}, y1 * c + y0 * s), (BLOCK_M, BLOCK_N))
    cols = n0 + tl.arange(0, BLOCK_N)
    if n0 < H * HEAD_DIM:
        dst = q_ptr + offs_m[:, None].to(tl.int64) * (H * HEAD_DIM) + cols[None, :]
    elif n0 < (H + KVH) * HEAD_DIM:
        dst = k_ptr + offs_m[:, None].to(tl.int64) * (KVH * HEAD_DIM) + (cols - H * HEAD_DIM)[None, :]
    else:
        dst = v_ptr + offs_m[:, None].to(tl.int64) * (KVH * HEAD_DIM) + (cols - (H + KVH) * HEAD_DIM)[None, :]
    tl.store(dst, y.to(q_ptr.dtype.element_ty), mask=rows)
'''


TILES = "triton.cdiv(T, BLOCK_M) * ((H + 2 * KVH) * D // BLOCK_N)"


def wrapper(task, p, launches: str, grid: str = f"    grid = ({TILES},)\n") -> str:
    return f'''

{ENTRY.py_def(task)}:
    T, HID = x.shape
    D = cos.shape[1] * 2
    q = torch.empty(T, H, D, dtype=x.dtype, device=x.device)
    k = torch.empty(T, KVH, D, dtype=x.dtype, device=x.device)
    v = torch.empty(T, KVH, D, dtype=x.dtype, device=x.device)
    BLOCK_M, BLOCK_N = {p['BLOCK_M']}, {p['BLOCK_N']}
{grid}{launches}    return q, k, v
'''


def kernel_head(name: str, args: str, order: str, extra="") -> str:
    return f'''

@triton.jit
def {name}({args}, T, HID, H: tl.constexpr, KVH: tl.constexpr, HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{extra}):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(T, BLOCK_M)
    num_pid_n = (H + 2 * KVH) * HEAD_DIM // BLOCK_N
{order}
'''


def call(name, args, p, extra=""):
    return (f"    {name}[grid]({args}, T, HID, H=H, KVH=KVH, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,\n"
            f"        BLOCK_K={p['BLOCK_K']}{extra}, num_warps={p.get('num_warps', 4)}, num_stages={p.get('num_stages', 1)})\n")


OUT_ARGS = "q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr"


def dot_then_rope_src(p, task, rot0=ROT0, k_end="HID"):
    return helpers(rot0, k_end) + kernel_head("qkv_gemm_kernel", "x_ptr, w_ptr, y_ptr", ROW_MAJOR) + '''\
    acc, offs_m = _qkv_tile(x_ptr, w_ptr, pid_m, pid_n, T, HID, BLOCK_M, BLOCK_N, BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y = y_ptr + offs_m[:, None].to(tl.int64) * (num_pid_n * BLOCK_N) + offs_n[None, :]
    tl.store(y, acc, mask=(offs_m < T)[:, None])       # fp32 scratch: the rope kernel reads it back
''' + kernel_head("fused_qkv_rope_kernel", "y_ptr, " + OUT_ARGS, ROW_MAJOR) + '''\
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y = tl.load(y_ptr + offs_m[:, None].to(tl.int64) * (num_pid_n * BLOCK_N) + offs_n[None, :],
                mask=(offs_m < T)[:, None], other=0.0)
    _rope_store(y, offs_m, pid_n, q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, T, H, KVH, HEAD_DIM, BLOCK_M, BLOCK_N)
''' + wrapper(task, p, "    y = torch.empty(T, (H + 2 * KVH) * D, dtype=torch.float32, device=x.device)\n"
              + call("qkv_gemm_kernel", "x, w, y", p) + call("fused_qkv_rope_kernel", "y, q, k, v, cos, sin", p))


def fused_src(order: str, grouped: bool):
    def render(p, task, rot0=ROT0, k_end="HID"):
        extra = ", GROUP_M: tl.constexpr" if grouped else ""
        kw = f", GROUP_M={p.get('GROUP_M', 8)}" if grouped else ""
        return helpers(rot0, k_end) + kernel_head("fused_qkv_rope_kernel", "x_ptr, w_ptr, " + OUT_ARGS,
                                                  order.format(gsize=GSIZE), extra) + '''\
    acc, offs_m = _qkv_tile(x_ptr, w_ptr, pid_m, pid_n, T, HID, BLOCK_M, BLOCK_N, BLOCK_K)
    _rope_store(acc, offs_m, pid_n, q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, T, H, KVH, HEAD_DIM, BLOCK_M, BLOCK_N)
''' + wrapper(task, p, call("fused_qkv_rope_kernel", "x, w, q, k, v, cos, sin", p, kw))
    return render


# persistent_tma: Triton's persistent matmul (gemm_fp16_triton's top rung, its launch model) with the rope epilogue.
# Where it stands (no device has timed it yet; plan a10): gemm_fp16_triton's persistent_tma ran 1.18-1.86x faster than
# its pipelined_stages on the H100 (measurements/h100_*: 2048^3 29.8 / 35.2 us, 4096^3 188.7 / 272.0, M=128 N=4096
# K=14336 58.4 / 108.4); modelled here from pipelined_stages' calibration (fit_as) with the persistent grid and the
# prior of gemm's rung, 1.1-1.5x at the menu's shapes. Its 128 x 256 tile (room_table, kernelinfer seed 5151: the
# pipelined best at BLOCK_N 128, the list's end, in 6 of 12 sessions) is Triton's Hopper GEMM tile: 128 accumulator
# registers a thread at 8 warps; H100 plan a1 timed fused_qkv_rope's pipelined 64 x 256 x 64 (3 stages, 8 warps) at
# 56.9 us against 64 x 128's 57.0 (T=1000 HID=2048). Lists kept to what fits somewhere: BLOCK_K 128 or a 5-deep ring
# of these tiles is over every card's cap but the A100's. Correct under TRITON_INTERPRET=1
# (scripts/roomA_interpret_room.py); Triton builds it for every target (scripts/roomA_compile_room.py --new-rung).
def persistent_tma_src(p, task, rot0=ROT0, k_end="HID"):
    """Persistent programs (the SMs' resident slots) striding over the GROUP_M-swizzled tiles, x and w tiles by
    tensor descriptor (one TMA copy each into swizzled shared memory on Hopper), the rope epilogue as the other rungs."""
    occ = resident(p, gemm_view(task))
    head = kernel_head("fused_qkv_rope_kernel", "x_ptr, w_ptr, " + OUT_ARGS, "", ", GROUP_M: tl.constexpr, "
                       "NUM_PROGS: tl.constexpr").replace("    pid = tl.program_id(0)\n", "").rstrip("\n") + "\n"
    return rope_helper(rot0) + head + f'''\
    N = num_pid_n * BLOCK_N
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[T, HID], strides=[HID, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, HID], strides=[HID, 1], block_shape=[BLOCK_N, BLOCK_K])
    num_tiles = num_pid_m * num_pid_n
    # persistent: NUM_PROGS resident programs stride over the tiles (one launch wave, the prologue paid once)
    for pid in tl.range(tl.program_id(0), num_tiles, NUM_PROGS, flatten=True):
{textwrap.indent(GROUPED.format(gsize=GSIZE), "    ")}
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, {k_end}, BLOCK_K):
            x = x_desc.load([pid_m * BLOCK_M, k0])     # rows past T arrive as zeros
            w = w_desc.load([pid_n * BLOCK_N, k0])     # w rows are y columns: a K-major tile
            acc = tl.dot(x, w.T, acc)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        _rope_store(acc, offs_m, pid_n, q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, T, H, KVH, HEAD_DIM, BLOCK_M, BLOCK_N)


def _alloc(size: int, alignment: int, stream):
    # device-side descriptors need a small global scratch buffer per program
    return torch.empty(size, device="cuda", dtype=torch.int8)
''' + wrapper(task, p, call("fused_qkv_rope_kernel", "x, w, q, k, v, cos, sin", p, ", GROUP_M=8, NUM_PROGS=num_progs"),
               "    triton.set_allocator(_alloc)\n"
               f"    # one program per resident slot: {occ} an SM fit this tile's shared memory and registers\n"
               f"    num_progs = torch.cuda.get_device_properties(x.device).multi_processor_count * {occ}\n"
               f"    grid = (min(num_progs, {TILES}),)\n")


SHORT_K = {"k_end": "HID - BLOCK_K"}


# Off the menus (roomT, 2026-12-07): the H100 ran this rung correct, both bugs failing (plan a10, roomA j2, 54 cases,
# 0 problems), but slower than pipelined_stages at every shape, where the model puts it ahead (its launch is
# gemm_fp16_triton's persistent one on pipelined_stages' calibration): T=1000 HID=2048 best 57.7 us (4 stages; 5: 53.8)
# against pipelined's 49.2 (128 x 256, 3 stages; modelled 34.5 / 38.6); T=4096 HID=2048 D=64 157.3 against 138.9
# (109.8 / 126.8); T=1024 HID=3584 143.4 against 111.4 (121.1 / 130.5). As its author asked (roomA's report), it comes
# off rather than being refit on three shapes; KERNELSTRAIN_DEVICE_UNCHECKED=1 offers it (device plans, a refit).
PERSISTENT_TMA = Rung(
    "persistent_tma", "persistent programs (the SMs' slots) over swizzled tiles, x and w by tensor descriptor (TMA)",
    (BLOCK_M, Param("BLOCK_N", (128, 256), 128), Param("BLOCK_K", (64,), 64), Param("num_stages", (2, 3, 4), 3),
     Param("num_warps", (4, 8), 8)), path="fp16", compute_eff=0.8, memory_eff=0.9, smem="dynamic",
    launch=dot_launch(0.96, "persistent"), render=persistent_tma_src, fit_as="pipelined_stages",
    bugs={"off_by_one": SHORT_K, "missing_scale": NO_COS})
OFFERED_PERSISTENT = (PERSISTENT_TMA,) if os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1" else ()


class FusedQkvRopeTriton(FusedQkvRopeSpec):
    impl = "triton"
    variants = (
        Rung("dot_then_rope", "tl.dot GEMM to an fp32 scratch, then a rope/split kernel reading it back",
             (Param("BLOCK_M", (32, 64, 128), 64), Param("BLOCK_N", (64, 128), 64), BLOCK_K, WARPS), path="fp16",
             compute_eff=0.42, memory_eff=0.75, smem="dynamic", launch=dot_launch(0.85, scratch=True),
             render=dot_then_rope_src, bugs={"off_by_one": SHORT_K, "missing_scale": NO_COS}),
        Rung("fused_epilogue", "rope in the GEMM epilogue: the tile split into pairs, rotated and stored by head",
             (Param("BLOCK_M", (32, 64, 128), 64), Param("BLOCK_N", (64, 128), 64), BLOCK_K, WARPS), path="fp16",
             compute_eff=0.42, memory_eff=0.75, smem="dynamic", launch=dot_launch(0.85),
             render=fused_src(ROW_MAJOR, False), bugs={"off_by_one": SHORT_K, "missing_scale": NO_COS}),
        Rung("grouped_swizzle", "GROUP_M program swizzle: neighbouring programs share x and w panels in L2",
             (BLOCK_M, BLOCK_N, BLOCK_K, Param("GROUP_M", (4, 8, 16), 8), WARPS), path="fp16", compute_eff=0.48,
             memory_eff=0.8, smem="dynamic", launch=dot_launch(0.95), render=fused_src(GROUPED, True),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_COS}),
        Rung("pipelined_stages", "num_stages-deep software pipeline of the tile loads, tuned warps",
             (BLOCK_M, BLOCK_N, Param("BLOCK_K", (32, 64, 128), 64), Param("GROUP_M", (8,), 8),
              STAGES, Param("num_warps", (4, 8), 8)), path="fp16", compute_eff=0.71,
             memory_eff=0.88, smem="dynamic", launch=dot_launch(0.95, "pipelined"), render=fused_src(GROUPED, True),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_COS}),
    ) + OFFERED_PERSISTENT

    def assemble(self, kernel, variant, params, task) -> str:
        return f"{TRITON_PRELUDE}\nH, KVH = {task['H']}, {task['KVH']}   # query and KV heads\n" + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        const = {"H": task["H"], "KVH": task["KVH"], "HEAD_DIM": task["D"],
                 **{k: params[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M") if k in params}}
        if variant.tag == "persistent_tma":
            const.update(GROUP_M=8, NUM_PROGS=task.gpu.sms * resident(params, gemm_view(task)))
        outs = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "cos_ptr": "*fp32", "sin_ptr": "*fp32"}
        dims = {"T": "i32", "HID": "i32", **dict.fromkeys(const, "constexpr")}
        warps, stages = params.get("num_warps", 4), params.get("num_stages", 1)
        if variant.tag != "dot_then_rope":
            return [KernelSpec("fused_qkv_rope_kernel", {"x_ptr": ptr, "w_ptr": ptr, **outs, **dims}, const, warps, stages)]
        return [KernelSpec("qkv_gemm_kernel", {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": "*fp32", **dims}, const, warps, stages),
                KernelSpec("fused_qkv_rope_kernel", {"y_ptr": "*fp32", **outs, **dims}, const, warps, stages)]
