"""Block-scaled FP4 GEMM in Triton, mxfp4 (G = 32, ue8m0 scales): C = A . B^T, fp32 accumulate.

Ladder: packed tiles dequantized in registers inside the GEMM loop -> the same software-pipelined
with a grouped program order -> K split over programs on skinny tiles of tl.dot_scaled (decode-sized M) -> a
separate dequant kernel writing 16-bit A and B, then a plain tl.dot GEMM (on the H200 the register decode, not the
copies, is the bottleneck) -> the copies' GEMM pipelined -> tl.dot_scaled on the packed e2m1 tiles and
their scales (sm_120: the block-scaled tensor-core mma; sm_80/86/90: Triton's own upcast to bf16) -> dot_scaled
pipelined. nvfp4 (G = 16, e4m3
scales) is left to the CUDA module: Triton's dot_scaled takes e8m0 scales per 32 only.
"""
from dataclasses import replace

from ..base import KernelSpec, Param, Rung, TRITON_PRELUDE, cdiv, triton_ptr, unchecked
from ._gemm_tc import tc_traffic
from .gemm_fp16_triton import PERSISTENT_TMA, persistent_consts, tile_launch
from .gemm_fp4_spec import GemmFp4Spec
from .gemm_splitk_spec import SPLIT_VALUES
from .gemm_splitk_triton import reduce_kernel_src
from ._fp4_copies import ORDER, ROW_ORDER, SCALE, DEQUANT, copies_persistent_src, dequant_then_dot_src, head, launch_line
from ._fp4_split import SPLIT_RANGE, SPLIT_STORE, SPLIT_TILE, SPLIT_WARPS, last_split_busy, split_k_launch

TILE = (Param("BLOCK_M", (64, 128), 128), Param("BLOCK_N", (64, 128), 128), Param("BLOCK_K", (64, 128), 128))
# the copies' pipelined GEMM is a plain tl.dot matmul on 16-bit tiles: the 256 x 128 tile of Triton's matmul tutorial
# configs (8 warps, 3-4 stages: 128 accumulators a thread) fits it; the register-dequant rungs keep 128 (a 256-row
# packed tile's decode in registers beside its fp32 accumulator). Not 256 columns: the model has 128 x 256 level with
# 128 x 128 at every shape of the menu, and both 256-wide tiles at 4 warps spill the accumulator (gemm_fp16_triton's
# H100 / H200 rows of 128 x 256 at 4 warps: 4-14x)
WIDE = (Param("BLOCK_M", (64, 128, 256), 128), TILE[1], TILE[2])   # pipelined_copies (scripts/roomK_interpret.py)
PIPE = (Param("num_stages", (3, 4), 3), Param("num_warps", (4, 8), 8), Param("GROUP_M", (4, 8), 8))

WARPS = Param("num_warps", (4, 8), 4)     # the unpipelined rungs: Triton's default, tunable
SHORT_K = {"k_end": "K // BLOCK_K - 1"}
UNIT = "tl.full(SHAPE, 127, tl.uint8)"               # missing_scale: every scale byte reads as 2^0

STORE = "tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=rm[:, None] < M)"


def fused_kernel(scaled: bool, grouped: bool, k_end: str, scale: str, split: bool = False) -> str:
    """The GEMM over packed tiles: dequant in registers + tl.dot, or tl.dot_scaled; `split`: program_id(1) takes
    one of SPLIT_K slices of the K tiles and stores its fp32 partial tile (split_k_dot_scaled)."""
    if scaled:
        sa = scale.replace("SHAPE", "(BLOCK_M, BLOCK_K // 32)") if scale != SCALE else "sa"
        sb = scale.replace("SHAPE", "(BLOCK_N, BLOCK_K // 32)") if scale != SCALE else "sb"
        step = f"acc = tl.dot_scaled(a, {sa}, \"e2m1\", b.T, {sb}, \"e2m1\", acc)   # B^T: K-packed [BK / 2, BN]"
    else:
        step = ("a16 = dequant_e2m1(a, sa, BLOCK_M, BLOCK_K).to(c_ptr.dtype.element_ty)\n"
                "        b16 = dequant_e2m1(b, sb, BLOCK_N, BLOCK_K).to(c_ptr.dtype.element_ty)\n"
                "        acc = tl.dot(a16, b16.T, acc)")
    group = ", GROUP_M: tl.constexpr" if grouped else ", SPLIT_K: tl.constexpr" if split else ""
    out, first, store = ("ws_ptr", SPLIT_RANGE, SPLIT_STORE) if split else ("c_ptr", "", STORE)
    return ("" if scaled else DEQUANT.format(scale=scale)) + f"""
@triton.jit
def gemm_fp4_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, {out}, M, N, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{group}):
{ORDER if grouped else ROW_ORDER}
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
{first}    rq = {"kt_begin * (BLOCK_K // 2) + " if split else ""}tl.arange(0, BLOCK_K // 2)          # packed bytes of a K tile
    rs = {"kt_begin * (BLOCK_K // 32) + " if split else ""}tl.arange(0, BLOCK_K // 32)         # scale bytes of a K tile
    a_ptrs = a_ptr + rm[:, None] * (K // 2) + rq[None, :]
    b_ptrs = b_ptr + rn[:, None] * (K // 2) + rq[None, :]
    sa_ptrs = sa_ptr + rm[:, None] * (K // 32) + rs[None, :]
    sb_ptrs = sb_ptr + rn[:, None] * (K // 32) + rs[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range({"kt_begin" if split else "0"}, {k_end}):
        a = tl.load(a_ptrs, mask=rm[:, None] < M, other=0)
        b = tl.load(b_ptrs)
        sa = tl.load(sa_ptrs, mask=rm[:, None] < M, other=127)
        sb = tl.load(sb_ptrs)
        {step}
        a_ptrs += BLOCK_K // 2
        b_ptrs += BLOCK_K // 2
        sa_ptrs += BLOCK_K // 32
        sb_ptrs += BLOCK_K // 32
    {store}
"""


def fused_src(scaled: bool, grouped: bool):
    def render(p, task, k_end="K // BLOCK_K", scale=SCALE):
        return fused_kernel(scaled, grouped, k_end, scale) + head(task) + launch_line(p) + "    return C\n"
    return render


def split_k_src(p, task, k_end="kt_end", scale=SCALE, combine_end="SPLIT_K"):
    """tl.dot_scaled over one K slice a program (grid axis 1), fp32 slices summed by gemm_splitk_triton's reduce."""
    return (fused_kernel(True, False, k_end, scale, split=True) + reduce_kernel_src(combine_end) + "\n" + head(task)
            + f"    ws = torch.empty(({p['SPLIT_K']}, M, N), device=A.device, dtype=torch.float32)   # fp32 slices\n"
            + launch_line(p, args="A, B, scale_a, scale_b, ws, M, N, K")
            + f"    splitk_reduce_kernel[(triton.cdiv(M * N, 1024),)](ws, C, M * N, SPLIT_K={p['SPLIT_K']}, BLOCK=1024)\n"
            + "    return C\n")


# Registers of dequant_then_dot's GEMM (tl.dot on the 16-bit copies at num_stages=1, which loads each A and B tile
# into registers before staging it for the MMA): the fp32 accumulator, the A tile and a fixed part, per thread.
# Triton 3.9 for sm_90a (cuobjdump --dump-resource-usage, BLOCK_M/N/K 64-128): 4 warps 96-236 registers, 32 + acc
# + A within 9 (128x128x128: 255 and 160 bytes of spill); 8 warps 47-144, 22 + acc + 0.75 A within 14. gemm_fp16_triton's
# 40 + acc said 168 at 128x128x64 on 4 warps (236 measured): 3 blocks an SM, not 2, and at 2048x4096x4096 its 512 tiles
# in two waves of 396 slots (wave efficiency 0.65) where 2 x 264 hold them (0.97). H100 (room26): 4 warps 211.0 us,
# 8 warps 200.2; the model said 321.0 / 199.6, now 216.1 / 199.6. sm_80 builds hold more (255 / 144 / 96 at
# 128x128x64 on 4 and 8 warps and 64x64x64 on 4): there the rule is a floor, nearer than 40 + acc.
COPIES_REGS = {128: (32, 1.0), 256: (22, 0.75)}


def fp4_launch(mode: str, extra_launches: int = 0, dequant: float = 1.0, upcast: float = 1.0):
    """gemm_fp16_triton's tile model on packed operands: smem holds the packed tiles (+ the 16-bit
    copies Triton's dot needs after a register dequant), `dequant` the issue share it costs;
    `upcast`: the same for dot_scaled where no block-scaled mma exists (Triton's bf16 upcast)."""
    base = tile_launch(0.95, mode)

    def launch(p, task):
        one = base(p, task)
        bm, bn, bk = p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"]
        buffers = max(1, p.get("num_stages", 1) - 1)
        if extra_launches:            # the plain GEMM on 16-bit copies: gemm_fp16_triton's figure
            smem = one.smem_bytes
        elif "wgmma" in task.gpu.features and bm >= task.gpu.triton_full_stage_rows:
            # the packed tiles a pipelined loop stages (num_stages - 1 buffers; none at num_stages 1, where the loads
            # go to registers) and one 16-bit B tile the upcast writes for wgmma to read. Triton 3.9 metadata.shared
            # for sm_90a (/tmp/roomT/s11/fp4smem*.py): 64 x 128 x 128 at 3 / 4 stages 57,344 / 69,632 B (the model
            # said 65,536 / 98,304: a 16-bit B tile a stage), 64 x 128 x 64 at 4 34,816 (49,152), 64 x 64 x 64 at 4
            # 20,480 (24,576) on split_k_dot_scaled, pipelined_dot_scaled and pipelined_dequant alike; 128 x 128 x
            # 128 at 3 stages 65,536 (pipelined_dot_scaled, pipelined_dequant) and the unpipelined 128 x 128 x 128
            # 32,768 (dot_scaled, fused_dequant_dot) as before
            staged = p.get("num_stages", 1) - 1
            smem = (bm + bn) * (bk // 2) * staged + bn * bk * 2
        else:                         # mma.sync (sm_90 too below 64 rows: 10,496 B at 16 x 64 x 128, 3 stages,
            # split_k_dot_scaled, Triton 3.9 metadata.shared): the packed tiles and scales, per buffered stage
            smem = (bm + bn) * (bk // 2 + bk // 32) * buffers
        floor = GemmFp4Triton().cost(task).bytes
        m, n, k = task["M"], task["N"], task["K"]
        copies = 2 * (m + n) * k * 2 / floor if extra_launches else 0.0
        regs = one.regs
        if extra_launches and p.get("num_stages", 1) == 1 and one.threads in COPIES_REGS:
            c, a_share = COPIES_REGS[one.threads]
            regs = int(c + (bm * bn + a_share * bm * bk) / one.threads)    # past 255: cap_registers spills it
        # a persistent grid keeps gemm_fp16_triton's (resident programs an SM, capped at the tiles)
        grid = one.grid if mode == "persistent" else cdiv(m, bm) * (n // bn)
        return replace(one, smem_bytes=smem, regs=regs, compute_scale=one.compute_scale * dequant * (1.0 if "fp4" in task.gpu.features else upcast),
                       traffic=tc_traffic(task, bm, bn, 0.05, elt=0.5) + copies, launches=one.launches + extra_launches,
                       grid=grid)
    return launch


def consts(p, task) -> dict:
    return {k: v for k, v in p.items() if k not in ("num_warps", "num_stages")}


class GemmFp4Triton(GemmFp4Spec):
    impl = "triton"
    check_shape = {"M": 1024, "N": 2048, "K": 4096, "G": 32}
    shapes = ({"M": 2048, "N": 4096, "K": 4096, "G": 32}, {"M": 8192, "N": 5120, "K": 8192, "G": 32},
              {"M": 16, "N": 7168, "K": 2048, "G": 32}, {"M": 4096, "N": 4096, "K": 4096, "G": 32},
              {"M": 128, "N": 14336, "K": 4096, "G": 32})
    variants = (
        Rung("fused_dequant_dot", "packed tiles and scales loaded in the GEMM loop, e2m1 decoded in registers, tl.dot",
             TILE + (WARPS,), path="fp16", compute_eff=0.42, memory_eff=0.8, smem="dynamic",
             launch=fp4_launch("dot", dequant=0.25), render=fused_src(False, False), consts=consts,
             bugs={"missing_scale": {"scale": "tl.full(s.shape, 1.0, tl.float32)"}, "off_by_one": SHORT_K}),
        Rung("pipelined_dequant", "the register dequant with num_stages-deep loads and a GROUP_M program order",
             TILE + PIPE, path="fp16", compute_eff=0.6, memory_eff=0.88, smem="dynamic",
             launch=fp4_launch("pipelined", dequant=0.25), render=fused_src(False, True), consts=consts,
             bugs={"missing_scale": {"scale": "tl.full(s.shape, 1.0, tl.float32)"}, "off_by_one": SHORT_K}),
        # low in the ladder, though it uses dot_scaled and pipelines: a split pays only where M leaves the grid short
        # (decode), and where the ladder puts a rung steers sessions at every shape. At the top it was an expert's
        # first leap (seed 7171: an H200 M=4096 session leapt onto it and ended at 0.78 ms, 3.5x its best without
        # it); just below either dot_scaled rung it took that rung's ablation (Episode.propose_ablation: the nearest
        # rung below), which loses at large M, in place of the ablation onto pipelined_copies that wins there (seeds
        # 7171 / 7272, room_table --per 8: sessions ending 2.6-4.8x from the oracle's best, none past 1.73x before the
        # rung). Here, below the copies' GEMM, each of those ablations lands where it did before the rung
        Rung("split_k_dot_scaled", "K split over program_id(1): tl.dot_scaled on skinny tiles, fp32 slices summed by a "
             "reduce kernel", SPLIT_TILE + (Param("SPLIT_K", SPLIT_VALUES, 4), PIPE[0], SPLIT_WARPS), path="fp16",
             compute_eff=0.68, memory_eff=0.88, smem="dynamic",
             launch=split_k_launch(fp4_launch("pipelined", upcast=0.6)), render=split_k_src, consts=consts,
             fit_as="pipelined_dot_scaled",
             bugs={"missing_scale": {"scale": UNIT}, "off_by_one": {"k_end": "kt_end - 1"},
                   "bad_combine_index": {"combine_end": "SPLIT_K - 1"}},
             bug_tasks=(("bad_combine_index", last_split_busy),)),
        Rung("dequant_then_dot", "a dequant kernel writes 16-bit A and B, then a tl.dot GEMM on the copies",
             TILE + (WARPS,), path="fp16", compute_eff=0.4, memory_eff=0.75, smem="dynamic",
             launch=fp4_launch("dot", extra_launches=2), render=dequant_then_dot_src, consts=consts,
             bugs={"missing_scale": {"scale": "tl.full(s.shape, 1.0, tl.float32)"}, "off_by_one": SHORT_K}),
        Rung("pipelined_copies", "the dequant kernel's 16-bit copies, then a num_stages-deep tl.dot GEMM in GROUP_M order",
             WIDE + PIPE, path="fp16", compute_eff=0.6, memory_eff=0.88, smem="dynamic",
             launch=fp4_launch("pipelined", extra_launches=2), render=dequant_then_dot_src, consts=consts,
             fit_as="dequant_then_dot",
             bugs={"missing_scale": {"scale": "tl.full(s.shape, 1.0, tl.float32)"}, "off_by_one": SHORT_K}),
        # the copies' GEMM as gemm_fp16_triton's persistent TMA kernel (roomT, thirteenth session): at large M the H100
        # ran that kernel 1.29x ahead of the pipelined tl.dot loop at 4096^3 (188.7 / 243.8 us, h100_gpucheck_s96969,
        # h100_sim_s12_j3), and the copies add ~(M + N) K x 6 bytes (~25 us there). compute_eff: pipelined_copies'
        # 0.6 x gemm_fp16_triton's persistent_tma / pipelined_stages (0.8 / 0.71). Off until a device job times it
        *unchecked(Rung("copies_persistent_tma", "the dequant kernel's 16-bit copies, then a persistent TMA GEMM "
                        "(grid = resident programs, tensor-descriptor loads)", PERSISTENT_TMA, path="fp16",
                        compute_eff=0.68, memory_eff=0.9, smem="dynamic", launch=fp4_launch("persistent", extra_launches=2),
                        render=copies_persistent_src, consts=persistent_consts, fit_as="dequant_then_dot",
                        bugs={"missing_scale": {"scale": "tl.full(s.shape, 1.0, tl.float32)"},
                              "off_by_one": {"k_tiles": "tl.cdiv(K, BLOCK_K) - 1"}})),
        Rung("dot_scaled", "tl.dot_scaled on packed e2m1 tiles with their ue8m0 scales (block-scaled mma on sm_120)",
             TILE + (WARPS,), path="fp16", compute_eff=0.5, memory_eff=0.8, smem="dynamic",
             launch=fp4_launch("dot", upcast=0.6), render=fused_src(True, False), consts=consts,
             bugs={"missing_scale": {"scale": UNIT}, "off_by_one": SHORT_K}),
        Rung("pipelined_dot_scaled", "tl.dot_scaled with num_stages-deep loads, tuned warps and a GROUP_M order",
             TILE + PIPE, path="fp16", compute_eff=0.68, memory_eff=0.88, smem="dynamic",
             launch=fp4_launch("pipelined", upcast=0.6), render=fused_src(True, True), consts=consts,
             bugs={"missing_scale": {"scale": UNIT}, "off_by_one": SHORT_K}),
    )

    def assemble(self, kernel, variant, params, task):
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr, c = triton_ptr(task.dtype, task), variant.consts(params, task)
        warps, stages = params.get("num_warps", 4), params.get("num_stages", 1)
        dims = {"M": "i32", "N": "i32", "K": "i32"}
        if variant.tag in ("dequant_then_dot", "pipelined_copies", "copies_persistent_tma"):
            deq = KernelSpec("dequant_kernel", {"q_ptr": "*u8", "s_ptr": "*u8", "w_ptr": ptr, "K": "i32",
                                                "BLOCK_R": "constexpr", "BLOCK_K": "constexpr"},
                             {"BLOCK_R": 16, "BLOCK_K": 128}, ints={"K": task["K"]})
            main = {"a_ptr": ptr, "b_ptr": ptr, "c_ptr": ptr, **dims}
            name = "gemm_kernel" if variant.tag == "copies_persistent_tma" else "gemm_fp4_kernel"   # gemm_fp16_triton's
            return [deq, KernelSpec(name, {**main, **{k: "constexpr" for k in c}}, c, num_warps=warps, num_stages=stages)]
        out = {"ws_ptr": "*fp32"} if "SPLIT_K" in params else {"c_ptr": ptr}
        sig = {"a_ptr": "*u8", "b_ptr": "*u8", "sa_ptr": "*u8", "sb_ptr": "*u8", **out, **dims,
               **{k: "constexpr" for k in c}}
        specs = [KernelSpec("gemm_fp4_kernel", sig, c, num_warps=warps, num_stages=stages)]
        if "SPLIT_K" in params:       # gemm_splitk_triton's reduce kernel, as it declares it
            specs.append(KernelSpec("splitk_reduce_kernel", {"ws_ptr": "*fp32", "c_ptr": ptr, "MN": "i32",
                                                             "SPLIT_K": "constexpr", "BLOCK": "constexpr"},
                                    {"SPLIT_K": params["SPLIT_K"], "BLOCK": 1024}, ints={"MN": task["M"] * task["N"]}))
        return specs
