"""Device plan of roomC's room (issue 26 Build 2): the persistent_prefetch rung of the register-cached row kernels
(kernelstrain/ops/persistent_rows.py; off the menus until this runs: KERNELSTRAIN_DEVICE_UNCHECKED=1), through
scripts/room_device_check.py's harness (every value built, checked against the PyTorch reference and timed beside
the simulator; every bug at a NEW entry's smallest and largest values, first shape, must fail), then each group's
values ranked by the device and by the simulator (room_device_check_triton.ranking).

    python3 scripts/roomC_device.py                      # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    ROOMC_PLAN=c2 python3 scripts/roomC_device.py        # another plan of PLANS (default: c1)
    KNOBA_REHEARSE=3 python3 scripts/roomC_device.py     # no GPU: the first 3 cases through every path but the GPU's

c1: rmsnorm_cuda and fp8_quant_cuda; c2: add_rmsnorm_cuda and layernorm_cuda; c3: the four at ragged shapes, fp16. Per module, at a latency-bound shape (a
few waves of one-row CTAs: where the model credits the prefetch most), a mid one and a bandwidth-bound one: the new
rung's blocks_per_sm 1/2/4/8 at the model's best threads and rows, two more thread counts, and the rung it
climbs from (register_cached; fp8: ptx_cvt_e4m3x2) at its model-best configuration: the order between them.
Switch a module's rung on (drop persistent_rows.offered's gate for it) if every value runs correct, every bug fails,
and the rung is not slower than the one below where the model has it faster by more than the noise.

Ran 2026-12-07 07:51 UTC on an H100 (roomC j1-j3: 132 cases, 0 problems; measurements/h100_roomC_persistent.json): all
four modules switched on (persistent_rows.CHECKED), repriced as the device ran them (scripts/roomC_fit.py).

g1 / g2 (ROOMC_PLAN=g1, g2): grouped_gemm_cuda's warp-specialized wgmma rung (ops/moe/_grouped_ws.py). Ran 2026-12-07
10:43 / 10:55 UTC on an H100 (the tenth session's roomC j1 / j2: 55 cases, 0 problems; measurements/h100_roomC_ws.json,
h100_roomC_ws_j2.json): switched on in bf16 and fp16, priced as the device ran it (scripts/roomC_ws_fit.py).

w1 / w2 (ROOMC_PLAN=w1, w2): conv2d_nhwc_cuda's warp-specialized wgmma implicit GEMM (ops/misc/_conv_ws.py). w1 ran
2026-12-07 14:13 UTC on an H100 (the fourteenth session's roomC j1): the clean rung correct, its missing_barrier render
hung and spent the budget (the bug was dropped). w2 ran 14:44 (j3: 29 cases, 0 problems; measurements/h100_roomC_w2.json):
switched on in bf16 and fp16, priced as the device ran it. s1 (ROOMC_PLAN=s1): selective_scan_cuda's state_group_scan,
14:13 (j2: every value correct, every bug failing; measurements/h100_roomC_s1.json): slower than the ladder's best at
every shape, left off.

v3 (session 13): top_p_cuda's pivot_bisect; v4 (session 14): topk_cuda's pivot_count; v34: both in one device call
(not run yet: no device in sessions 13 / 14; docs/roomC_s13.md, docs/roomC_s14.md):

    ROOMC_PLAN=v34 KNOBA_RUN_S=110 python3 scripts/roomC_device.py
"""
import os
import sys
from pathlib import Path

os.environ["KERNELSTRAIN_DEVICE_UNCHECKED"] = "1"     # the rung waits for this job
sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402
from room_device_check import model_best  # noqa: E402

SHAPES = {
    "rmsnorm_cuda": [{"T": 2048, "D": 2048}, {"T": 4096, "D": 4096}, {"T": 16384, "D": 8192}],
    "fp8_quant_cuda": [{"T": 4096, "D": 4096}, {"T": 512, "D": 5120}, {"T": 16384, "D": 8192}],
    "add_rmsnorm_cuda": [{"T": 2048, "D": 2048}, {"T": 4096, "D": 4096}, {"T": 16384, "D": 8192}],
    "layernorm_cuda": [{"T": 8192, "D": 1024}, {"T": 4096, "D": 4096}, {"T": 16384, "D": 8192}],
}
BELOW = {"fp8_quant_cuda": "ptx_cvt_e4m3x2"}
PLAN_MODULES = {"c1": ("rmsnorm_cuda", "fp8_quant_cuda"), "c2": ("add_rmsnorm_cuda", "layernorm_cuda")}
# c3: the paths c1/c2's shapes leave out, on all four modules: a token count no row group divides (T = 1001: the
# last CTA's sub-rows past T, and the prefetch past T), rows whose chunks do not fill the threads (D = 5120 on 256
# threads: 640 chunks, 2.5 a thread) in fp16, and one row (T = 1: one CTA, no second row to prefetch)
RAGGED = {"T": 1001, "D": 4096}
C3 = [(m, "persistent_prefetch", "rows_per_block", [RAGGED], {"threads": 128, "blocks_per_sm": 2}, (1, 4))
      for m in SHAPES] + \
     [(m, "persistent_prefetch", "blocks_per_sm", [{"T": 4096, "D": 5120}, {"T": 1, "D": 4096}],
       {"threads": 256, "rows_per_block": 1}, (1, 8), "fp16") for m in SHAPES]


def entries(module: str) -> tuple:
    """(new, reference) entries of one module: room_device_check's (module, rung, parameter, shapes, base, values)."""
    new, ref = [], []
    for i, shape in enumerate(SHAPES[module]):
        best = model_best(module, "persistent_prefetch", shape)
        base = {"threads": best["threads"], "rows_per_block": best["rows_per_block"]}
        # the bugs run on the first shape's entry (the harness: a new entry's first and last values, first shape)
        new.append((module, "persistent_prefetch", "blocks_per_sm", [shape], base, (1, 2, 4, 8)))
        if i == 0:      # several rows a CTA (their own warp totals, one barrier for all): their values and bugs
            new.append((module, "persistent_prefetch", "rows_per_block", [shape], {"threads": 128, "blocks_per_sm": 2}, (2, 4)))
            others = tuple(t for t in (128, 256, 512) if t != best["threads"])[:2]
            ref.append((module, "persistent_prefetch", "threads", [shape],
                        {"rows_per_block": best["rows_per_block"], "blocks_per_sm": best["blocks_per_sm"]}, others))
        below = BELOW.get(module, "register_cached")
        cached = model_best(module, below, shape)
        ref.append((module, below, "threads", [shape], {"rows_per_block": cached["rows_per_block"]}, (cached["threads"],)))
    return new[:2], new[2:] + ref


# g1: grouped_gemm_cuda's warp-specialized rung (wgmma_ws, off the menus until this runs) at the stored wgmma rows'
# shape (T=2048 E=64: cp_async_pipeline ran 927 us, wgmma_pipeline 1,419-1,859; measurements/h100_roomK_j1.json), a
# compute-bound one (T=4096 E=8 N=14336) and the check shape (T=64: each w tile read once, memory-bound): its tile
# widths, stages and 64- / 128-row tiles; bugs at the first shape; the two rungs below at the model's best beside it
MOE = "grouped_gemm_cuda"
G_MID = {"T": 2048, "E": 64, "K": 2048, "N": 2816, "topk": 6}
G_BIG = {"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2}
G_SMALL = {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}
G1_NEW = [(MOE, "wgmma_ws", "BN", [G_MID, G_BIG], {"BM": 128, "STAGES": 4}, (64, 128, 256)),
          (MOE, "wgmma_ws", "STAGES", [G_SMALL, G_MID], {"BM": 64, "BN": 128}, (3, 4, 6))]


def g1_reference() -> list:
    ref = [(MOE, "wgmma_ws", "BM", [G_BIG, G_SMALL], {"BN": 128, "STAGES": 4}, (64, 128))]
    for shape in (G_MID, G_BIG, G_SMALL):
        for below in ("cp_async_pipeline", "wgmma_pipeline"):
            best = model_best(MOE, below, shape)
            first = next(iter(best))
            ref.append((MOE, below, first, [shape], {k: x for k, x in best.items() if k != first}, (best[first],)))
    return ref


# g2: wgmma_ws at the menu's other shapes (decode T=16 E=8: the w stream; T=512 E=8; T=8192 E=128 top-8) and in fp16,
# each beside cp_async_pipeline at the model's best: what the rung's pricing rests on beyond g1's three shapes
G_DECODE = {"T": 16, "E": 8, "K": 4096, "N": 14336, "topk": 2}
G_T512 = {"T": 512, "E": 8, "K": 4096, "N": 14336, "topk": 2}
G_WIDE = {"T": 8192, "E": 128, "K": 2048, "N": 1536, "topk": 8}
G2_NEW = [(MOE, "wgmma_ws", "BN", [G_DECODE, G_T512, G_WIDE], {"BM": 64, "STAGES": 6}, (64, 128, 256)),
          (MOE, "wgmma_ws", "BN", [G_T512, G_WIDE], {"BM": 128, "STAGES": 4}, (128, 256)),
          (MOE, "wgmma_ws", "BN", [G_MID], {"BM": 128, "STAGES": 4}, (128, 256), "fp16")]


def g2_reference() -> list:
    ref = []
    for shape in (G_DECODE, G_T512, G_WIDE):
        best = model_best(MOE, "cp_async_pipeline", shape)
        first = next(iter(best))
        ref.append((MOE, "cp_async_pipeline", first, [shape], {k: x for k, x in best.items() if k != first}, (best[first],)))
    return ref


# w1: conv2d_nhwc_cuda's warp-specialized wgmma implicit GEMM (ops/misc/_conv_ws.py, off the menus until this runs) at
# every shape of the menu: its filter-tile widths at BM 128 on the compute-heavy 3 x 3 shapes (C=256 at 14 x 14: the
# stored best, cp_async_pipeline, 47 us for 3.7 GFLOP; C=128 at 28 x 28), its ring depth at BM 64 BN 128 where the
# filters (K = 64) fill half the BN-wide TMA box (zero-filled past K) and at the stride-2 shape, its 64- / 128-pixel
# tiles on the one-image and the 1 x 1 shapes, fp16 at C=128; bugs at each entry's first shape; cp_async_pipeline at
# the model's best beside it at every shape
CONV = "conv2d_nhwc_cuda"
C_256 = {"N": 16, "H": 14, "W": 14, "C": 256, "K": 256, "R": 3, "S": 3, "U": 1, "PD": 1}
C_128 = {"N": 8, "H": 28, "W": 28, "C": 128, "K": 128, "R": 3, "S": 3, "U": 1, "PD": 1}
C_64 = {"N": 8, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1}
C_ONE = {"N": 1, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1}
C_1X1 = {"N": 8, "H": 56, "W": 56, "C": 256, "K": 64, "R": 1, "S": 1, "U": 1, "PD": 0}
C_S2 = {"N": 4, "H": 112, "W": 112, "C": 64, "K": 128, "R": 3, "S": 3, "U": 2, "PD": 1}
W1_NEW = [(CONV, "wgmma_ws", "BN", [C_256, C_128], {"BM": 128, "STAGES": 4}, (64, 128, 256)),
          (CONV, "wgmma_ws", "STAGES", [C_64, C_S2], {"BM": 64, "BN": 128}, (3, 4, 6)),
          (CONV, "wgmma_ws", "BM", [C_ONE, C_1X1, C_256], {"BN": 64, "STAGES": 4}, (64, 128)),
          (CONV, "wgmma_ws", "BN", [C_128], {"BM": 128, "STAGES": 4}, (64, 128), "fp16")]


# w2 (after w1: the clean rung ran correct at C=256, rel_l2 1.0e-4, but its missing_barrier render hung the H100 and
# took the whole time budget; that bug is gone, wrong_init stands in): BN 64 / 128 / 256 at the two 3 x 3 shapes with
# the bugs at C=256; 64- / 128-pixel tiles at the one-image, 1 x 1 and C=256 shapes; the ring depth at the stride-2
# shape; fp16; cp_async_pipeline at the model's best at every shape; last, BN 128 over K = 64 filters (the TMA box
# past the weight's rows, zero-filled). A case gets W2_CASE_S seconds before it counts as a hang (gpucheck's 60 s
# would spend the job's budget on one).
W2_CASE_S = 8.0
W2_NEW = [(CONV, "wgmma_ws", "BN", [C_256, C_128], {"BM": 128, "STAGES": 4}, (64, 128, 256))]


def w2_reference() -> list:
    return [(CONV, "wgmma_ws", "BM", [C_ONE, C_1X1, C_256], {"BN": 64, "STAGES": 4}, (64, 128)),
            (CONV, "wgmma_ws", "STAGES", [C_S2], {"BM": 64, "BN": 128}, (3, 4, 6)),
            (CONV, "wgmma_ws", "BN", [C_128], {"BM": 128, "STAGES": 4}, (64, 128), "fp16"),
            *w1_reference(),
            (CONV, "wgmma_ws", "BN", [C_64, C_ONE], {"BM": 64, "STAGES": 4}, (128,))]


def w1_reference() -> list:
    ref = []
    for shape in (C_256, C_128, C_64, C_ONE, C_1X1, C_S2):
        best = model_best(CONV, "cp_async_pipeline", shape)
        first = next(iter(best))
        ref.append((CONV, "cp_async_pipeline", first, [shape], {k: x for k, x in best.items() if k != first}, (best[first],)))
    return ref


# s1: selective_scan_cuda's state_group_scan (ops/ssm/_scan_groups.py, off the menus until this runs): SG 2 / 4 at the
# check shape (B=1 L=2048 D=1536: vectorized_regs ran 76 us, 10x its memory floor), the stored long-row shape (B=2
# L=4096 D=2048: smem_bc_multi_channel 414 us) and short rows (B=16 L=256); 64 / 256 threads at SG 2; fp16 at the check
# shape; bugs at the first shape; vectorized_regs (its SG = 1: 128 threads, 8 items) and the two register rungs at the
# model's best beside it
SCAN = "selective_scan_cuda"
S_CHECK = {"B": 1, "L": 2048, "D": 1536, "N": 16}
S_LONG = {"B": 2, "L": 4096, "D": 2048, "N": 16}
S_SHORT = {"B": 16, "L": 256, "D": 2048, "N": 16}
S1_NEW = [(SCAN, "state_group_scan", "SG", [S_CHECK, S_LONG, S_SHORT], {"threads": 128}, (2, 4)),
          (SCAN, "state_group_scan", "threads", [S_CHECK, S_LONG], {"SG": 2}, (64, 256)),
          (SCAN, "state_group_scan", "SG", [S_CHECK], {"threads": 128}, (2,), "fp16")]


def s1_reference() -> list:
    ref = [(SCAN, "vectorized_regs", "threads", [S_CHECK, S_LONG, S_SHORT], {"items": 8}, (128,))]
    for shape in (S_CHECK, S_LONG, S_SHORT):
        for below in ("vectorized_regs", "smem_bc_multi_channel"):
            best = model_best(SCAN, below, shape)
            first = next(iter(best))
            ref.append((SCAN, below, first, [shape], {k: x for k, x in best.items() if k != first}, (best[first],)))
    return ref


# v1 (session 12, room_table edges of fresh seeds 9191 / 9292: docs/roomC_s12.md): two new values the simulator
# extrapolates past their lists' ends and no device has timed (measurements/ holds no row at them), each beside its
# inward neighbour at the same other parameters and the old list's model-best configuration:
# - swa_decode_cuda gqa_cp_async at 512 threads (the 256 top: threads+ in 4 of 5 kernelinfer edge stops; the model has
#   512 ahead on 20 of 34 tasks, 1.04-1.08x): ptxas sm_90a 64 registers, no spill, two blocks an SM;
# - selective_scan_cuda smem_bc_multi_channel at 16 rows a block (the 8 top: rows+ in 5 of 8 kernelinfer sessions; the
#   model has 32 threads x 16 rows ahead on 14 of 34 tasks, 1.06x): ptxas sm_90a 95 registers, no spill.
SWA = "swa_decode_cuda"
SWA_B1 = {"B": 1, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128}
SWA_B8 = {"B": 8, "H": 28, "KVH": 4, "S": 16384, "W": 4096, "D": 128}
SCAN_B8 = {"B": 8, "L": 2048, "D": 5120, "N": 16}
V1_NEW = [(SWA, "gqa_cp_async", "threads", [SWA_B1, SWA_B8], {"tile_n": 16, "partition": 256, "keys_per_step": 8,
                                                              "stages": 3}, (256, 512)),
          (SCAN, "smem_bc_multi_channel", "rows", [S_CHECK, SCAN_B8], {"threads": 32}, (8, 16))]


def best_without(module: str, tag: str, shape: dict, name: str, value) -> dict:
    """The simulator's fastest writable configuration of one rung at one shape with `name` off `value` (the old list)."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.sim import simulate, writable
    from kernelstrain.tasks import make_task, param_grid
    m = REGISTRY[module]
    v = m.variant(tag)
    task = make_task(m, "H100", "bf16", shape)
    timed = [(r.time_ms, p) for p in param_grid(v) if p[name] != value and writable(m, v, p, task)
             and (r := simulate(m, v, p, task)).ok]
    return min(timed, key=lambda tp: tp[0])[1]


def v1_reference() -> list:
    ref = []
    for module, tag, name, value, shapes in ((SWA, "gqa_cp_async", "threads", 512, (SWA_B1, SWA_B8)),
                                             (SCAN, "smem_bc_multi_channel", "rows", 16, (S_CHECK, SCAN_B8))):
        for shape in shapes:
            best = best_without(module, tag, shape, name, value)
            ref.append((module, tag, name, [shape], {k: x for k, x in best.items() if k != name}, (best[name],)))
    return ref


# v2: gemm_int4_cuda split_k_small_m at BN 256 (the 128 top: BN+ in 8 kernelinfer / 6 default edge stops; the model
# has it ahead at M = 1 / 16 on 12 of 58 kernelinfer tasks, H100 1.02-1.03x, H200 1.09x; ptxas sm_90a 120 / 155
# registers at BM 16 / 32, no spill) beside BN 128 at the same other parameters and the old list's model-best config
INT4 = "gemm_int4_cuda"
I_M1 = {"M": 1, "N": 14336, "K": 4096}
I_M16 = {"M": 16, "N": 4096, "K": 14336}
V2_NEW = [(INT4, "split_k_small_m", "BN", [I_M1], {"BM": 32, "STAGES": 2, "SPLITS": 16, "BK": 128}, (128, 256)),
          (INT4, "split_k_small_m", "BN", [I_M16], {"BM": 32, "STAGES": 2, "SPLITS": 8, "BK": 128}, (128, 256))]


def v2_reference() -> list:
    ref = []
    for shape in (I_M1, I_M16):
        best = best_without(INT4, "split_k_small_m", shape, "BN", 256)
        ref.append((INT4, "split_k_small_m", "BN", [shape], {k: x for k, x in best.items() if k != "BN"}, (best["BN"],)))
    return ref


# v3 (session 13): top_p_cuda's pivot_bisect (ops/sampling/_top_p_bisect.py, off the menus until this runs): the
# nucleus threshold by a P-ary search on the logit value with block reductions instead of a histogram of the row
# (every rung below bumps two shared-memory atomics a logit into the few dozen key bins randn x 4 logits fill: the
# H100 ran the best of them 8-15x the DRAM floor). Its pivots at every stored shape (B=128 V=32000 first: the bugs
# run there, where missing_scale's row rate fails a check), threads and the bracket's CAP; split_mass_hist and
# vectorized_float4 at the model's best beside it at each shape
TOPP = "top_p_cuda"
P_B128 = {"B": 128, "V": 32000}
P_B1 = {"B": 1, "V": 32000}
P_B64 = {"B": 64, "V": 128256}
P_B256 = {"B": 256, "V": 128256}
V3_NEW = [(TOPP, "pivot_bisect", "pivots", [P_B128, P_B1, P_B64, P_B256], {"threads": 512, "cap": 2048}, (4, 8, 16))]


def v3_reference() -> list:
    """The rung's other threads and caps (timed, their bugs are the pivots entry's edits), then the rungs below."""
    ref = [(TOPP, "pivot_bisect", "threads", [P_B1, P_B256], {"pivots": 8, "cap": 2048}, (256, 1024)),
           (TOPP, "pivot_bisect", "cap", [P_B128], {"threads": 512, "pivots": 8}, (1024, 4096))]
    for shape in (P_B128, P_B1, P_B64, P_B256):
        for below in ("split_mass_hist", "vectorized_float4"):
            best = model_best(TOPP, below, shape)
            ref.append((TOPP, below, "threads", [shape], {k: x for k, x in best.items() if k != "threads"},
                        (best["threads"],)))
    return ref


# v4 (session 14): topk_cuda's pivot_count (ops/sampling/_topk_bisect.py, off the menus until this runs): the K-th
# largest bounded from below by pass 0's 64 lane-group maxima, the logits above the bound (~300 of the row on the
# module's inputs) compacted to smem in one L2 pass, no histogram of the row (every rung below bumps a shared count
# atomic a logit into the ~30 key bins randn x 2 logits fill: the H100 ran the ladder's best 3-5x the DRAM floor at
# B >= 128). Its threads at every stored shape (B=128 V=32000 first: the bugs run there, where off_by_one's row rate
# fails a check), CAP 128 at B=128 (forces the count-only pivot search, the fallback no module input reaches: its
# code checked on the device) and 4096; vectorized_float4 and split_row_two_stage at the model's best beside it at
# each shape
TOPK = "topk_cuda"
K_B128 = {"B": 128, "V": 32000, "K": 50}
K_B1 = {"B": 1, "V": 32000, "K": 50}
K_B256 = {"B": 256, "V": 128256, "K": 50}
K_B8 = {"B": 8, "V": 128256, "K": 50}
K_B32 = {"B": 32, "V": 32000, "K": 40}
K_B64 = {"B": 64, "V": 128256, "K": 20}
V4_NEW = [(TOPK, "pivot_count", "threads", [K_B128, K_B1, K_B256], {"cap": 1024}, (256, 512, 1024))]


def v4_reference() -> list:
    """The rung at the other shapes and caps (timed; its bugs are the threads entry's), then the rungs below."""
    ref = [(TOPK, "pivot_count", "threads", [K_B8, K_B32, K_B64], {"cap": 1024}, (512, 1024)),
           (TOPK, "pivot_count", "cap", [K_B128], {"threads": 512}, (128, 4096))]
    for shape in (K_B128, K_B1, K_B256, K_B8, K_B32, K_B64):
        for below in ("vectorized_float4", "split_row_two_stage"):
            best = model_best(TOPK, below, shape)
            ref.append((TOPK, below, "threads", [shape], {k: x for k, x in best.items() if k != "threads"},
                        (best["threads"],)))
    return ref


def plan(name: str) -> tuple:
    if name == "v4":
        return V4_NEW, v4_reference()
    if name == "v34":           # v3 and v4 in one device call (run it with KNOBA_RUN_S=110: docs/roomC_s14.md)
        return V3_NEW + V4_NEW, v3_reference() + v4_reference()
    if name == "v1":
        return V1_NEW, v1_reference()
    if name == "v2":
        return V2_NEW, v2_reference()
    if name == "v3":
        return V3_NEW, v3_reference()
    if name == "s1":
        room_device_check.fits = lambda *args, **kwargs: True
        return S1_NEW, s1_reference()
    if name == "w2":
        room_device_check.fits = lambda *args, **kwargs: True
        import kernelstrain.gpucheck as gpucheck
        gpucheck.CASE_TIMEOUT_S = W2_CASE_S
        return W2_NEW, w2_reference()
    if name == "w1":
        room_device_check.fits = lambda *args, **kwargs: True     # the 1 x 1 shape's 51 MB input: microseconds
        return W1_NEW, w1_reference()
    if name == "g2":
        room_device_check.fits = lambda *args, **kwargs: True
        return G2_NEW, g2_reference()
    if name == "g1":
        # past gpucheck's 8x the check shape's FLOPs (T=64), as sim j1 / roomK j1 ran them: seconds, not minutes
        room_device_check.fits = lambda *args, **kwargs: True
        return G1_NEW, g1_reference()
    if name == "c3":
        return [], C3          # value checks only: c1 and c2 run every bug
    new, ref = [], []
    for module in PLAN_MODULES[name]:
        n, r = entries(module)
        new += n
        ref += r
    return new, ref


# the harness's default plan (room_device_check.PLANS, read by its cases()) becomes this one's
room_device_check.PLANS["default"] = plan(os.environ.get("ROOMC_PLAN", "c1"))

if __name__ == "__main__":
    sys.exit(room_device_check_triton.run_ranked())
