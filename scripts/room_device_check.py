"""Device proof of the room parameters added to the thinnest CUDA rungs (issue 26 item 2): every value of each
new parameter built, checked against the PyTorch reference and timed on the GPU, beside the simulator's time for the
catalog GPU it runs on; every bug render at the parameter's smallest and largest values (first shape) must fail the check; a few rows of the
neighbouring rungs (their own parameter) give the order between rungs.

    python3 scripts/room_device_check.py                 # on a CUDA machine; writes $OUT/summary.txt, knob_device.json
    ROOM_PLAN=vec python3 scripts/room_device_check.py   # another plan of PLANS (words.VEC on the scalar rungs; vec2: three more;
                                                         # reverse: grad_clip_cuda's scale pass from g's end; widen:
                                                         # gemv_cuda's 16 warps and 8 rows a warp; int8p:
                                                         # gemm_int8_cuda's persistent wgmma rung; flat: the short
                                                         # memory-bound modules' rungs across their parameters;
                                                         # edges: gemm_int8 256-row tiles and split-K, adafactor 128-row strips;
                                                         # split2: split-K's best modelled configs beside wgmma)
    KNOBA_REHEARSE=3 python3 scripts/room_device_check.py   # no GPU: the first 3 cases through every path but the GPU's
    KNOBA_RUN_S=120 python3 scripts/room_device_check.py    # the run pass's time budget (default 150 s)

Uses kernelstrain.gpucheck's build and run passes (the harness of `kernelstrain gpu-check`). Exit 1 if a value fails
or a bug passes.
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.gpucheck import _build_all, _passes, _sim_ms, catalog_gpu, require_gpu  # noqa: E402
from kernelstrain.gpucheck.sample import fits  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate, writable  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# (module, rung, parameter, shapes[, base]): 2-3 shapes of the menu a parameter moves the most; base: the other
# parameters where they are not the rung's defaults
# (the check shape; short rows as the menu's B=64 L=256; a grid of several waves as the menu's long rows, within
# gpucheck's 8x the check shape)
SCAN_SHAPES = [{"B": 1, "L": 2048, "D": 1536, "N": 16}, {"B": 16, "L": 256, "D": 2048, "N": 16},
               {"B": 4, "L": 2048, "D": 1536, "N": 16}]
NEW = [
    ("selective_scan_cuda", "warp_shuffle_scan", "threads", SCAN_SHAPES),
    ("selective_scan_cuda", "smem_bc_multi_channel", "threads", SCAN_SHAPES),
]
# the rungs beside the new values (their own parameter): the order between rungs on the device
REFERENCE = [
    ("selective_scan_cuda", "vectorized_regs", "threads", SCAN_SHAPES),
    ("selective_scan_cuda", "smem_bc_multi_channel", "rows", SCAN_SHAPES[2:], {"threads": 32}),
]

# words.VEC (2-, 4- or 8-byte accesses) on the scalar rungs of the short-episode memory-bound modules (issue 26
# item 2, roomC): latency-bound (few rows) and bandwidth-bound shapes, each beside the module's uint4 rung
ROW_SHAPES = [{"T": 64, "D": 4096}, {"T": 4096, "D": 4096}]
SWIGLU_SHAPES = [{"T": 512, "I": 13824}, {"T": 4096, "I": 11008}]
LN_SHAPES = [{"T": 64, "D": 4096}, {"T": 4096, "D": 4096}]
VEC_NEW = [
    ("swiglu_fwd_cuda", "row_grid_2d", "vec", SWIGLU_SHAPES),
    ("rmsnorm_cuda", "warp_shuffle", "vec", ROW_SHAPES),
    ("add_rmsnorm_cuda", "warp_shuffle", "vec", ROW_SHAPES),
    ("layernorm_cuda", "smem_block_reduce", "vec", LN_SHAPES),
    ("layernorm_cuda", "welford_shuffle", "vec", LN_SHAPES),
    ("rmsnorm_cuda", "smem_block_reduce", "vec", ROW_SHAPES[:1]),
    ("add_rmsnorm_cuda", "fused_block_reduce", "vec", ROW_SHAPES[:1]),
    ("embedding_gather_cuda", "row_per_block", "vec", [{"T": 32, "V": 128256, "D": 4096}, {"T": 4096, "V": 128256, "D": 4096}]),
    ("kv_append_cuda", "block_per_token", "vec", [{"T": 256, "H": 8, "D": 128, "P": 16}, {"T": 4096, "H": 8, "D": 128, "P": 16}]),
]
# (module, rung, parameter, shapes, base, values): values of the parameter to time (all when absent)
VEC_REFERENCE = [
    ("swiglu_fwd_cuda", "vectorized_uint4", "threads", SWIGLU_SHAPES, {}, (256,)),
    ("rmsnorm_cuda", "vectorized_uint4", "threads", ROW_SHAPES, {}, (256,)),
    ("add_rmsnorm_cuda", "vectorized_uint4", "threads", ROW_SHAPES, {}, (256,)),
    ("layernorm_cuda", "vectorized_uint4", "threads", LN_SHAPES, {}, (256,)),
    ("embedding_gather_cuda", "vectorized_uint4", "threads", [{"T": 4096, "V": 128256, "D": 4096}], {}, (256,)),
    ("kv_append_cuda", "vectorized_uint4", "threads", [{"T": 4096, "H": 8, "D": 128, "P": 16}], {}, (128,)),
    # 1024-thread blocks: ptxas gives VEC 4 37 registers (2 blocks of 1024 no longer fit an SM's 64K)
    ("layernorm_cuda", "smem_block_reduce", "vec", LN_SHAPES[1:2], {"threads": 1024}),
    ("swiglu_fwd_cuda", "row_grid_2d", "vec", SWIGLU_SHAPES[1:], {"threads": 512}),
]
# words.VEC on three more scalar rungs the default profile's episodes climb through (roomC, second call): a block-per-row
# fp8 quantization (its software e4m3 rounding makes it partly compute-bound), a sorted-segment reduce of gathered
# rows, a per-element top-k gather; beside each module's 16-byte rung
FP8_SHAPES = [{"T": 32, "D": 8192}, {"T": 4096, "D": 4096}]
EBWD_SHAPES = [{"T": 4096, "D": 4096, "V": 32000}]
COMBINE_SHAPES = [{"T": 2048, "topk": 6, "K": 2048}, {"T": 512, "topk": 8, "K": 7168}]
VEC2_NEW = [
    ("fp8_quant_cuda", "fused_smem_block", "vec", FP8_SHAPES),
    ("embedding_bwd_cuda", "sort_segmented_reduce", "vec", EBWD_SHAPES),
    ("moe_combine_cuda", "gather_per_element", "vec", COMBINE_SHAPES),
]
VEC2_REFERENCE = [
    ("fp8_quant_cuda", "warp_shuffle_vectorized", "threads", FP8_SHAPES, {}, (256,)),
    ("embedding_bwd_cuda", "sorted_segment_vectorized", "unroll", EBWD_SHAPES, {}, (2,)),
    ("moe_combine_cuda", "vectorized_uint4", "threads", COMBINE_SHAPES, {}, (256,)),
    # one row on 1024 threads: the simulator puts VEC 2 and 4 2.5x slower than VEC 1 (its roofline turns
    # compute-bound there and the calibration steps), which no hardware reason supports
    ("fp8_quant_cuda", "fused_smem_block", "vec", [{"T": 1, "D": 4096}], {"threads": 1024}),
]
# grad_clip_cuda's scale pass from g's end (ops/training/_reverse_scale.py): g past the L2 (H100: 50 MB) by 1.3x and
# 2.7x, and g inside it (both orders should tie); all under gpucheck's ROTATE_BYTES, so the timed runs rotate among
# input copies and no run finds what the last one left in L2 (a reverse pass leaves g's head there, which the next
# run's norm pass would hit); (module, rung, parameter, shapes, base, values, dtype). An H100, 2026-12-06 06:44 UTC:
# 30 cases, 0 problems; reverse 0.92-0.98 of forward at 67 MB, 0.99-1.00 at 134 MB, a tie at 34 MB
# (measurements/h100_room_reverse.json; the model took L2_REVERSE_HIT from it)
CLIP_FP32 = [{"N": 16777216}, {"N": 4194304}]
CLIP_BF16 = [{"N": 33554432}, {"N": 67108864}, {"N": 16777216}]
REVERSE_NEW = [
    ("grad_clip_cuda", "vectorized_persistent", "reverse", CLIP_FP32, {}, (0, 1), "fp32"),
    ("grad_clip_cuda", "vectorized_persistent", "reverse", CLIP_BF16, {}, (0, 1), "bf16"),
    ("grad_clip_cuda", "two_stage_deterministic", "reverse", CLIP_FP32[:1], {}, (0, 1), "fp32"),
    ("grad_clip_cuda", "two_stage_deterministic", "reverse", CLIP_BF16[:2], {}, (0, 1), "bf16"),
]
REVERSE_REFERENCE = [
    ("grad_clip_cuda", "vectorized_persistent", "reverse", CLIP_FP32[:1], {"threads": 1024}, (0, 1), "fp32"),
]
# gemv_cuda's widened warps (16: 512-thread blocks) and rows_per_warp (8: eight 16-byte W loads a lane in flight):
# each swept beside the other's middle value; 16 warps x 8 rows at M=8 asks ptxas for ~180 registers under
# __launch_bounds__(512)'s 128 (it spills 344 bytes; the model says 2x slower). An H100, 2026-12-06 06:58 UTC:
# 38 cases, 0 problems; 8 rows ran 1.11x (M=1), 1.19x (M=4, over 2 rows) and 1.39x (M=8) of the best
# shorter strip where the model had it level or ahead, so rows_per_warp stays 1/2/4; 16 warps tied 8 at M=1
# (41.5 / 41.4 us), ran 1.03x at M=4 and 1.10x at M=8 (model 0.97-0.98x); 16 x 8 spilled: 108.6 us (model 125)
GEMV_SHAPES = [{"M": 1, "N": 14336, "K": 4096}, {"M": 4, "N": 6144, "K": 4096}, {"M": 8, "N": 8192, "K": 8192}]
WIDEN_NEW = [
    ("gemv_cuda", "multi_row_warp", "rows_per_warp", GEMV_SHAPES, {"warps": 8}),
    ("gemv_cuda", "multi_row_warp", "warps", GEMV_SHAPES, {"rows_per_warp": 4}),
]
WIDEN_REFERENCE = [
    ("gemv_cuda", "multi_row_warp", "rows_per_warp", GEMV_SHAPES[2:], {"warps": 16}, (4, 8)),
    ("gemv_cuda", "vectorized_uint4", "warps", GEMV_SHAPES[:1], {}, (8, 16)),
    # the reverse plan's one row where reverse ran slower (20.1 vs 18.4 us, g inside the L2): again, for the noise
    ("grad_clip_cuda", "vectorized_persistent", "reverse", CLIP_FP32[1:], {}, (0, 1), "fp32"),
]
# gemm_int8_cuda's persistent wgmma rung (issue 26 item 2, roomC, third session): the s8 kernel on a grid of
# resident CTAs walking the tiles (its accumulators stay int32 in the wgmma registers, so the loop is the
# unpromoted one, which no rung ran persistent before), beside wgmma_tma at the same stages; the check shape, a
# square of 2 waves and a skinny decode GEMM (M=16: one row of 128 tiles)
INT8_SHAPES = [{"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096}, {"M": 16, "N": 8192, "K": 8192}]
INT8P_NEW = [("gemm_int8_cuda", "wgmma_tma_persistent", "stages", INT8_SHAPES),
             ("gemm_int8_cuda", "wgmma_tma_persistent", "BN", INT8_SHAPES[2:], {"BM": 64})]
INT8P_REFERENCE = [("gemm_int8_cuda", "wgmma_tma", "stages", INT8_SHAPES),
                   ("gemm_int8_cuda", "wgmma_tma", "BN", INT8_SHAPES[2:], {"BM": 64})]
# the short memory-bound modules' landscape (is it as flat on the GPU as in the model?): each rung above the
# baseline across its own parameter, a bandwidth-bound and a latency-bound shape
EMB_SHAPES = [{"T": 16384, "D": 4096, "V": 128256}, {"T": 512, "D": 4096, "V": 32000}]
SWI_SHAPES = [{"T": 4096, "I": 11008}, {"T": 16, "I": 14336}]
DROP_SHAPES = [{"T": 4096, "D": 8192}, {"T": 128, "D": 4096}]
FLAT_REFERENCE = [
    ("embedding_fwd_cuda", "block_per_token", "threads", EMB_SHAPES, {}, (128, 256, 512)),
    ("embedding_fwd_cuda", "vectorized_uint4", "threads", EMB_SHAPES, {}, (64, 128, 256, 512)),
    ("embedding_fwd_cuda", "warp_per_token_unrolled", "unroll", EMB_SHAPES, {"warps_per_block": 2}),
    ("embedding_fwd_cuda", "persistent_streaming", "blocks_per_sm", EMB_SHAPES, {"warps_per_block": 16, "unroll": 1}),
    ("swiglu_fwd_cuda", "vectorized_uint4", "threads", SWI_SHAPES),
    ("swiglu_fwd_cuda", "unrolled_ilp", "unroll", SWI_SHAPES, {"threads": 64}),
    ("dropout_cuda", "philox4_vec4", "threads", DROP_SHAPES),
    ("dropout_cuda", "unrolled_ilp", "unroll", DROP_SHAPES),
]
# the tile and strip edges the default profile's episodes stopped at (seed 9404, 40 episodes a module: gemm_int8 16 on
# mma_sync BM 128, adafactor 16 on vectorized_uint4 rows 64): gemm_int8_cuda's 256-row tiles (CUTLASS's Sm80 int8
# 256 x 128 x 64 threadblock) on both mma.sync rungs beside 128 x 256 and 128 x 128, and adafactor_cuda's 128-row
# strips (half the column atomics of 64) beside 64 and 32
GEMM_SQ = INT8_SHAPES[:2]
ADA_SHAPES = [{"R": 14336, "C": 4096}, {"R": 4096, "C": 4096}]
INT8_SPLIT_SHAPES = [{"M": 16, "N": 8192, "K": 8192}, {"M": 128, "N": 4096, "K": 14336}]
EDGES_NEW = [
    ("gemm_int8_cuda", "mma_sync", "BM", GEMM_SQ, {"BN": 128, "BK": 64, "warps": 8}),
    ("gemm_int8_cuda", "cp_async_pipeline", "BM", GEMM_SQ, {"BN": 128, "BK": 128, "stages": 3, "warps": 8}),
    ("adafactor_cuda", "vectorized_uint4", "rows", ADA_SHAPES, {"threads": 64}, (32, 64, 128)),
    # gemm_int8_cuda's split-K rung (_int8_split.py) on the decode shapes, beside the best one-split tiles below
    ("gemm_int8_cuda", "cp_async_split_k", "SPLITS", INT8_SPLIT_SHAPES),
]
EDGES_REFERENCE = [
    ("gemm_int8_cuda", "mma_sync", "BN", GEMM_SQ, {"BM": 128, "BK": 64, "warps": 8}, (256,)),
    ("gemm_int8_cuda", "cp_async_pipeline", "BN", GEMM_SQ, {"BM": 128, "BK": 64, "stages": 3, "warps": 8}, (256,)),
    ("adafactor_cuda", "vectorized_uint4", "rows", ADA_SHAPES[:1], {"threads": 64}, (64, 128), "fp32"),
    ("gemm_int8_cuda", "cp_async_pipeline", "BN", INT8_SPLIT_SHAPES, {"BM": 64, "BK": 128, "stages": 4, "warps": 4}, (128,)),
    ("gemm_int8_cuda", "wgmma_tma", "BN", INT8_SPLIT_SHAPES, {"BM": 64, "stages": 4}, (64, 128)),
    ("adafactor_cuda", "vectorized_uint4", "rows", ADA_SHAPES[:1], {"threads": 128}, (64, 128)),
    ("gemm_int8_cuda", "cp_async_split_k", "SPLITS", INT8_SPLIT_SHAPES[:1], {"BM": 64, "BN": 64, "BK": 64, "stages": 4}),
]
# the edges call (10:11 UTC) held split-K's labels and its gain over one split (M=16: 33.7 vs 50.2 us), took BM 256 and
# 128-row strips out, and left the model's best split configs (BM 64; its BN 64 / BK 64 rows ran 1.2x its times)
# untimed beside wgmma_tma: the order at the top of the H100 ladder for decode shapes
SPLIT2_REFERENCE = [
    ("gemm_int8_cuda", "cp_async_split_k", "SPLITS", INT8_SPLIT_SHAPES, {"BM": 64, "BN": 64, "BK": 128, "stages": 3}, (2, 8)),
    ("gemm_int8_cuda", "cp_async_split_k", "SPLITS", INT8_SPLIT_SHAPES, {"BM": 64, "BN": 128, "BK": 128, "stages": 2}, (2, 4)),
    ("gemm_int8_cuda", "cp_async_split_k", "stages", INT8_SPLIT_SHAPES[:1], {"BM": 64, "BN": 64, "BK": 128, "SPLITS": 8}, (2, 4)),
    ("gemm_int8_cuda", "cp_async_split_k", "SPLITS", INT8_SPLIT_SHAPES[1:], {}, (2,)),
    ("gemm_int8_cuda", "wgmma_tma", "BN", INT8_SPLIT_SHAPES, {"BM": 64, "stages": 4}, (64, 128)),
    ("gemm_int8_cuda", "cp_async_pipeline", "BN", INT8_SPLIT_SHAPES, {"BM": 64, "BK": 128, "stages": 4, "warps": 4}, (128,)),
]
# the order of every rung at menu shapes, for the modules whose fresh-seed episodes (seed 96161, default profile, H100,
# 10:49 UTC) had a negative within-episode Spearman against the device (roomS, issue 30): each rung at its defaults and
# at the simulator's best configuration for the H100, and the parameter the engine's first steps tune on the rungs the
# model credits most; ORDER_PROBES: values past a list's end where the model says the best lies beyond it (the room
# tables' `edges`), timed beside the list's own end (bugs checked at the new value)
ORDER_SHAPES = {
    "dropout_cuda": [{"T": 2048, "D": 5120}, {"T": 8192, "D": 8192}],
    "embedding_gather_cuda": [{"T": 512, "V": 128256, "D": 4096}, {"T": 16384, "V": 128256, "D": 4096}],
    "bias_gelu_cuda": [{"T": 2048, "N": 10240, "TANH": 1}, {"T": 4096, "N": 18176, "TANH": 0}],
    "add_rmsnorm_triton": [{"T": 64, "D": 4096}, {"T": 8192, "D": 5120}],
    "rope_triton": [{"T": 512, "H": 64, "D": 128}, {"T": 4096, "H": 32, "D": 128}],
}
ORDER_SWEEPS = [
    ("dropout_cuda", "philox_per_element", "threads", ORDER_SHAPES["dropout_cuda"]),
    ("bias_gelu_cuda", "thread_per_element", "threads", ORDER_SHAPES["bias_gelu_cuda"]),
    ("bias_gelu_cuda", "fast_math_ptx", "rows", ORDER_SHAPES["bias_gelu_cuda"][1:], {"threads": 512}),
    ("embedding_gather_cuda", "vectorized_uint4", "threads", ORDER_SHAPES["embedding_gather_cuda"][1:]),
]
# the Triton flat baselines' BLOCK past 256 (the Triton tutorial's vector add uses 1024): the model has swiglu_fwd's
# div/mod flat kernel 1.2-1.8x faster at 512-2048, rope's flat pairs 1.16x at 512, swiglu_bwd's two kernels 1.27x
SWI_T = [{"T": 4096, "I": 11008}, {"T": 512, "I": 13824}]
ORDER_SWEEPS_TRITON = [
    ("add_rmsnorm_triton", "whole_row_registers", "num_warps", ORDER_SHAPES["add_rmsnorm_triton"][1:]),
    ("rope_triton", "token_head_grid", "num_warps", ORDER_SHAPES["rope_triton"], {"BLOCK_H": 32}),
    ("swiglu_fwd_triton", "tile_2d", "BLOCK", SWI_T, {"num_warps": 4}, (1024,)),
    ("swiglu_bwd_triton", "fused_flat", "BLOCK", SWI_T[:1], {"num_warps": 4}, (256,)),
    ("swiglu_bwd_triton", "tile_2d", "BLOCK", SWI_T[:1], {"num_warps": 8}, (4096,)),
]
ORDER_PROBES = [
    ("kv_append_cuda", "vectorized_uint4", "threads", [{"T": 256, "H": 8, "D": 128, "P": 16}, {"T": 4096, "H": 8, "D": 128, "P": 16}],
     {}, (256, 512)),
    ("kv_append_cuda", "warp_per_token_ilp", "unroll", [{"T": 4096, "H": 8, "D": 128, "P": 16}], {"warps": 16}, (4, 8)),
    ("adafactor_cuda", "vectorized_uint4", "threads", [{"R": 4096, "C": 4096}, {"R": 14336, "C": 4096}], {"rows": 32}, (32, 64)),
]
ORDER_PROBES_TRITON = [
    ("swiglu_fwd_triton", "flat_index", "BLOCK", SWI_T, {"num_warps": 4}, (256, 512, 1024, 2048)),
    ("swiglu_fwd_triton", "flat_index", "BLOCK", SWI_T[:1] + [{"T": 32, "I": 11008}], {"num_warps": 8}, (512, 1024, 2048, 4096)),
    ("swiglu_bwd_triton", "two_kernels_flat", "BLOCK", SWI_T[:1], {"num_warps": 4}, (256, 512, 1024)),
    ("swiglu_bwd_triton", "fused_flat", "BLOCK", SWI_T[:1], {"num_warps": 4}, (512, 1024, 2048)),
    ("rope_triton", "flat_pairs", "BLOCK", [{"T": 4096, "H": 32, "D": 128}, {"T": 512, "H": 64, "D": 128}], {"num_warps": 4},
     (256, 512, 1024)),
    ("fp8_quant_triton", "persistent_rows", "programs_per_sm", [{"T": 4096, "D": 4096}, {"T": 16384, "D": 8192}],
     {"num_warps": 16, "ROWS": 1}, (4, 8)),
    ("fp8_quant_triton", "persistent_rows", "programs_per_sm", [{"T": 16384, "D": 8192}], {"num_warps": 4, "ROWS": 1}, (4, 8)),
]


def model_best(module_name: str, tag: str, shape: dict, gpu: str = "H100") -> dict:
    """The simulator's fastest writable configuration of one rung at one shape."""
    from kernelstrain.tasks import param_grid
    m = REGISTRY[module_name]
    v = m.variant(tag)
    task = make_task(m, gpu, "bf16" if "bf16" in m.dtypes else m.dtypes[0], shape)
    timed = [(r.time_ms, p) for p in param_grid(v) if writable(m, v, p, task) and (r := simulate(m, v, p, task)).ok]
    return min(timed, key=lambda tp: tp[0])[1] if timed else v.defaults()


def order_entries(impl: str) -> list:
    """Each rung of ORDER_SHAPES's modules of one impl at its defaults and at the model's best, one shape an entry."""
    out = []
    for module_name, shapes in ORDER_SHAPES.items():
        m = REGISTRY[module_name]
        if m.impl != impl:
            continue
        for v in m.variants:
            first = v.params[0].name
            for shape in shapes:
                for params in (v.defaults(), model_best(module_name, v.tag, shape)):
                    out.append((module_name, v.tag, first, [shape], {k: x for k, x in params.items() if k != first},
                                (params[first],)))
    return out


PLANS = {"default": (NEW, REFERENCE), "int8p": (INT8P_NEW, INT8P_REFERENCE), "flat": ([], FLAT_REFERENCE),
         "edges": (EDGES_NEW, EDGES_REFERENCE), "split2": ([], SPLIT2_REFERENCE), "vec": (VEC_NEW, VEC_REFERENCE), "vec2": (VEC2_NEW, VEC2_REFERENCE),
         "reverse": (REVERSE_NEW, REVERSE_REFERENCE), "widen": (WIDEN_NEW, WIDEN_REFERENCE),
         "order": lambda: (ORDER_PROBES, ORDER_SWEEPS + order_entries("cuda"))}     # a callable: built when asked


def cases(gpu: str, plan: str = "default") -> list:
    new_entries, reference = PLANS[plan]() if callable(PLANS[plan]) else PLANS[plan]
    out, seen = [], set()
    for entry in new_entries + reference:
        module_name, tag, name, shapes = entry[:4]
        base = entry[4] if len(entry) > 4 else {}
        new = entry in new_entries
        m = REGISTRY[module_name]
        v = m.variant(tag)
        dtype = entry[6] if len(entry) > 6 else "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        for shape in shapes:
            if not fits(m, dtype, shape, gpu):
                continue
            task = make_task(m, gpu, dtype, shape)
            values = entry[5] if len(entry) > 5 else v.param(name).values
            for value in values:
                params = {**v.defaults(), **base, name: value}
                if not simulate(m, v, params, task).ok or not writable(m, v, params, task):   # as the engine offers
                    continue
                for bug in [None] + ([b for b in v.bugs_for(dtype, params) if v.breaks_at(b, task, params)]
                                     if new and value in (values[0], values[-1]) and shape == shapes[0] else []):
                    where = "".join(f"{k}={x}," for k, x in base.items())
                    cid = f"{module_name}|{tag}|{dtype + '|' if len(entry) > 6 else ''}{where}{name}={value}|{','.join(f'{k}={x}' for k, x in shape.items())}|{bug}"
                    if cid in seen:            # the same configuration named by two entries: time it once
                        continue
                    seen.add(cid)
                    out.append({"id": cid, "episode": f"{module_name}|{tag}|{shape}", "step": len(out),
                                "module": module_name, "impl": m.impl, "variant": tag, "params": params,
                                "dtype": dtype, "shape": dict(shape), "at": "task",
                                "label": "wrong_result" if bug else "ok", "kind": "wrong_result" if bug else "ok",
                                "bug": bug, "bug_repeats": 3 if bug else 1, "main": True, "rendered": True,
                                "code": knobs.render(m, v, params, task, bug)})
    for i, c in enumerate(out):         # the runner's key for a case (gpucheck.sample does the same)
        c["idx"] = i
    return out


def main() -> int:
    out = Path(os.environ.get("OUT", "/tmp/knobA_device_out"))
    out.mkdir(parents=True, exist_ok=True)
    rehearse = int(os.environ.get("KNOBA_REHEARSE", "0"))     # N cases without a GPU: every path but the GPU's
    device = "rehearsal (no GPU)" if rehearse else require_gpu()
    gpu = "H100" if rehearse else catalog_gpu(device)
    plan = os.environ.get("ROOM_PLAN", "default")
    planned = cases(gpu, plan)[:rehearse] if rehearse else cases(gpu, plan)
    print(f"knob_device: {len(planned)} cases on {device} (simulated as {gpu})", file=sys.stderr)
    build_dir = Path("/tmp/knobA_build")
    t0 = time.time()
    _build_all(planned, build_dir, os.cpu_count() or 8)
    print(f"built in {time.time() - t0:.0f} s; {sum(not c['build_ok'] for c in planned)} failed", file=sys.stderr)
    work = build_dir / f"run_{int(time.time())}"
    work.mkdir(parents=True)
    # KNOBA_CHECK_JOBS: parallel correctness checks on the GPU (default one a CPU); a plan of large references lowers it
    checks = int(os.environ.get("KNOBA_CHECK_JOBS", "0")) or os.cpu_count() or 8
    rows = _passes(planned, work, checks, float(os.environ.get("KNOBA_RUN_S", "150")))
    for r in rows:
        r["sim_ms"] = _sim_ms(r, gpu)
    keep = ("id", "module", "variant", "params", "dtype", "shape", "label", "bug", "build_ok", "ok", "error",
            "time_ms", "time_ms_2", "sim_ms", "rel_l2_err", "nbad")
    (out / "knob_device.json").write_text(json.dumps({"device": device, "sim_gpu": gpu,
                                                      "rows": [{k: r.get(k) for k in keep} for r in rows]}, indent=1))
    lines, problems = [], 0
    for r in rows:
        expected = not r["bug"]
        unrun = (r.get("error") or "").startswith("not run")        # past the time budget: no verdict
        bad = not r.get("build_ok") or (not unrun and bool(r.get("ok")) != expected)
        problems += bad
        t = f"{r['time_ms'] * 1e3:9.1f} us" if r.get("time_ms") else " " * 12
        s = f"{r['sim_ms'] * 1e3:9.1f} us" if r.get("sim_ms") else " " * 12
        err = "".join((r.get("error") or "").splitlines()[:1])[:100] if bad else ""     # an error may be ""
        lines.append(f"{'PROBLEM ' if bad else 'NOT RUN ' if unrun else ''}{r['id']:90} device {t} sim {s} {err}")
    text = "\n".join(lines) + f"\n{len(rows)} cases, {problems} problems (a bug that passes, a value that fails)\n"
    (out / "summary.txt").write_text(text)
    print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
