"""Device proof of the room added to the Triton rungs (issue 26 item 2, *_triton modules): scripts/room_device_check.py's
harness (every value built, checked against the PyTorch reference and timed beside the simulator; every bug at a
parameter's smallest and largest values must fail) over the Triton rungs and parameters below, then each group's
values ranked by the device and by the simulator.

    python3 scripts/room_device_check_triton.py                  # on a CUDA machine; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/room_device_check_triton.py   # no GPU: the first 3 cases through every path but the GPU's

    KNOBT_SET=tuning python3 scripts/room_device_check_triton.py    # another set of SETS (default: stages)

KNOBT_SET=stages (the default): num_stages of the streaming row loops (ops/stream_stages.py, `tl.range(..., num_stages=N)`),
at the menu's few-row shapes where the model credits it (a grid short of DRAM's bandwidth-latency product) and at a
many-row shape where it must not gain; loop_unroll (the loop's other way to more loads in flight) beside it.
KNOBT_SET=tuning: the tuning values of the tl.dot and streaming rungs added after it: gemm_fp16_triton's 64-wide tiles
and 2 pipeline stages, fused_qkv_rope_triton's num_warps on its unpipelined rungs, 4-stage K/V rings on the persistent
flash rungs, cross-entropy's pipelined V loops (forward) and tile loop depth (backward), paged_decode_triton's 2-warp
tl.dot programs and 32 splits. KNOBT_SET=tuning2: the rings the first call left untimed and the refitted constants at
other shapes.
"""
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402

SOFTMAX = [{"R": 32, "C": 128256}, {"R": 4096, "C": 32000}]
ROWS = [{"T": 64, "D": 4096}, {"T": 4096, "D": 4096}]
# (module, rung, parameter, shapes[, base]): a few-row shape where the model credits the depth, then a many-row one
# where it must not gain
STAGES_NEW = [
    ("softmax_triton", "online_softmax", "num_stages", SOFTMAX),
    ("rmsnorm_triton", "chunked_two_pass", "num_stages", ROWS),
    ("swiglu_fwd_triton", "row_program", "num_stages", [{"T": 32, "I": 11008}, {"T": 512, "I": 13824}]),
    ("fp8_quant_triton", "fused_row_loop", "num_stages", [{"T": 32, "D": 8192}]),
    ("min_p_triton", "fused_row", "num_stages", [{"B": 64, "V": 128256}, {"B": 256, "V": 128256}]),
    ("layernorm_triton", "welford_chunked", "num_stages", ROWS[:1]),
    ("add_rmsnorm_triton", "two_kernels", "num_stages", ROWS[:1]),
    # the decode loops' num_stages (ops/attention/_kv_pipeline.py, device-checked on the other tile rungs) on the two-pass rung
    ("flash_decode_triton", "blocked_two_pass", "num_stages", [{"B": 1, "H": 32, "S": 4096, "D": 128}],
     {"BLOCK_N": 128, "num_warps": 8}),
]
STAGES_REFERENCE = [
    # the simulator's fastest pair at 32 rows of 128k: the deepest chunked loop against the split-row rung
    ("softmax_triton", "chunked_three_pass", "num_stages", SOFTMAX[:1], {"BLOCK": 512, "num_warps": 16, "loop_unroll": 8}),
    ("softmax_triton", "split_row_online", "SPLITS", SOFTMAX[:1], {"BLOCK": 512, "num_warps": 4}),
    ("softmax_triton", "online_softmax", "loop_unroll", SOFTMAX[:1]),
]

GEMM = [{"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 4096, "K": 14336}]
QKV = [{"T": 1000, "HID": 2048, "H": 16, "KVH": 4, "D": 128}]
CE = [{"T": 16, "V": 128256}, {"T": 512, "V": 128256}]
PAGED = [{"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16}, {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}]
TUNING_NEW = [
    ("gemm_fp16_triton", "pipelined_stages", "BLOCK_N", GEMM),
    ("gemm_fp16_triton", "pipelined_stages", "num_stages", GEMM),
    ("gemm_fp16_triton", "persistent_tma", "num_stages", GEMM[:1]),
    ("fused_qkv_rope_triton", "fused_epilogue", "num_warps", QKV, {"BLOCK_M": 128, "BLOCK_N": 128}),
    ("fused_qkv_rope_triton", "grouped_swizzle", "num_warps", QKV),
    ("fused_qkv_rope_triton", "pipelined_stages", "num_stages", QKV),
    ("flash_prefill_triton", "persistent", "num_stages", [{"B": 1, "H": 32, "S": 2048, "D": 128}]),
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", None),
    ("cross_entropy_fwd_triton", "online_softmax", "num_stages", CE),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "num_stages", CE[:1]),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_stages", CE),
    ("paged_decode_triton", "gqa_dot", "num_warps", PAGED),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", PAGED[:1]),
]
TUNING_REFERENCE = [
    ("fused_qkv_rope_triton", "dot_then_rope", "num_warps", QKV),
    ("cross_entropy_bwd_triton", "row_tiled_2d", "num_warps", CE, {}, (4,)),
    ("paged_decode_triton", "split_kv", "num_warps", PAGED[:1]),
]
# tuning2: the 4-stage rings the first call did not time (bugs checked), and the refitted constants at shapes they
# were not fitted on (values only): WGMMA_N64, the 8-warp factor (and gemm's own 8-warp rungs, unrefitted), the
# cross-entropy loops' tables, paged splits on a long context
TUNING2_NEW = [
    ("chunked_prefill_triton", "persistent", "num_stages", None),
    ("cross_attention_triton", "split_kv", "num_stages", None),
    ("tree_attention_triton", "split_kv", "num_stages", None),
]
TUNING2_REFERENCE = [
    ("gemm_fp16_triton", "pipelined_stages", "BLOCK_N", [{"M": 2048, "N": 2048, "K": 2048}, {"M": 16, "N": 8192, "K": 8192}],
     {}, (64, 128)),
    ("gemm_fp16_triton", "grouped_swizzle", "num_warps", GEMM[:1]),
    ("fused_qkv_rope_triton", "fused_epilogue", "num_warps", QKV + [{"T": 4096, "HID": 4096, "H": 32, "KVH": 8, "D": 128}]),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_stages", [{"T": 2048, "V": 128256}, {"T": 4096, "V": 32000}]),
    ("cross_entropy_fwd_triton", "online_softmax", "num_stages", [{"T": 256, "V": 32000}]),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "num_stages", [{"T": 256, "V": 32000}]),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", [{"B": 8, "H": 28, "KVH": 4, "S": 8192, "D": 128, "P": 16}]),
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", [{"B": 1, "H": 32, "S": 4096, "D": 128, "W": 1024}]),
]
# room26: mla_decode_triton's split_kv num_warps, a tunable (it was 4, 8 for 64-head blocks) at head blocks 16 / 32 / 64;
# beside it, values off the menus (given explicitly) the optima sat at the edge of: 64 splits (mla, min_p)
MLA = [{"B": 8, "H": 16, "S": 32700}, {"B": 32, "H": 128, "S": 4000}, {"B": 1, "H": 128, "S": 4000}]
FP4 = [{"M": 2048, "N": 4096, "K": 4096, "G": 32}, {"M": 16, "N": 7168, "K": 2048, "G": 32}]
INT8 = [{"N": 16384, "H": 8, "Dh": 128, "S": 262144}, {"N": 256, "H": 32, "Dh": 128, "S": 131072}]
LNB = [{"T": 2048, "D": 2048}]
MLA_SPLIT = {"num_splits": 16, "BLOCK_N": 64, "num_stages": 2}
ROOM26_NEW = [
    ("mla_decode_triton", "split_kv", "num_warps", MLA, {**MLA_SPLIT, "BLOCK_H": 16}),
    ("mla_decode_triton", "split_kv", "num_warps", MLA[:2], {**MLA_SPLIT, "BLOCK_H": 32}),
    ("mla_decode_triton", "split_kv", "num_warps", MLA[:2], {**MLA_SPLIT, "BLOCK_H": 64}),
    ("gemm_fp4_triton", "pipelined_copies", "num_stages", FP4, {"BLOCK_K": 64}, (2, 3, 4)),
    ("gemm_fp4_triton", "pipelined_copies", "GROUP_M", FP4[:1]),
]
ROOM26_REFERENCE = [
    ("gemm_fp4_triton", "dequant_then_dot", "num_warps", FP4, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}),
    ("mla_decode_triton", "split_kv", "num_splits", MLA[::2], {"BLOCK_H": 16, "BLOCK_N": 64, "num_stages": 2},
     (8, 16, 32, 64)),
    ("min_p_triton", "split_row_combine", "split", [{"B": 64, "V": 128256}, {"B": 256, "V": 128256}], {"BLOCK": 2048},
     (8, 16, 32, 64)),
    ("int8_kv_quant_triton", "multi_token_tile", "num_warps", INT8, {"TOKENS": 4}, (4, 8, 16)),
    ("int8_kv_quant_triton", "multi_token_tile", "num_warps", INT8, {"TOKENS": 8}, (8, 16)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA[:1], {**MLA_SPLIT, "BLOCK_H": 16}, (1, 2, 3)),
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA[:1], {**MLA_SPLIT, "BLOCK_H": 16}, (32, 64, 128)),
    ("layernorm_bwd_triton", "persistent_prefetch", "programs_per_sm", LNB, {"num_warps": 8}, (1, 2, 4, 8)),
    ("layernorm_bwd_triton", "persistent", "programs_per_sm", LNB, {"num_warps": 8}),
    ("layernorm_bwd_triton", "partial_buffers", "ROWS_PER_PROGRAM", LNB, {"num_warps": 8}),
]
# room26b (the follow-up): int8_kv_quant_triton's 16 warps (added on room26's 1.25x at 4 and 8 tokens) on the other
# tile rungs and shapes; gemm_fp4_triton's pipelined_copies at the menu's M=128; mla split_kv's num_stages and
# BLOCK_N past the menu's ends (room26's copy lacked them)
INT8_B = [{"N": 256, "H": 32, "Dh": 128, "S": 131072}, {"N": 2048, "H": 4, "Dh": 256, "S": 65536}]
ROOM26B_NEW = [
    ("int8_kv_quant_triton", "token_per_program", "num_warps", INT8_B, {}, (4, 8, 16)),
    ("int8_kv_quant_triton", "multi_token_tile", "num_warps", INT8_B[1:], {"TOKENS": 16}, (4, 8, 16)),
    ("int8_kv_quant_triton", "multi_token_tile", "num_warps", [{"N": 4096, "H": 8, "Dh": 128, "S": 262144}],
     {"TOKENS": 8}, (4, 8, 16)),
    ("gemm_fp4_triton", "pipelined_copies", "num_stages", [{"M": 128, "N": 14336, "K": 4096, "G": 32}], {"BLOCK_K": 64}),
]
ROOM26B_REFERENCE = [
    ("gemm_fp4_triton", "dequant_then_dot", "num_warps", [{"M": 128, "N": 14336, "K": 4096, "G": 32}],
     {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}),
    ("mla_decode_triton", "split_kv", "num_stages", MLA[:2], {**MLA_SPLIT, "BLOCK_H": 16}, (1, 2, 3)),
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA[:2], {**MLA_SPLIT, "BLOCK_H": 16}, (32, 64, 128)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA[:1], {**MLA_SPLIT, "BLOCK_H": 16, "BLOCK_N": 32}, (2, 3)),
]
SETS = {"stages": (STAGES_NEW, STAGES_REFERENCE), "tuning": (TUNING_NEW, TUNING_REFERENCE),
        "tuning2": (TUNING2_NEW, TUNING2_REFERENCE), "room26": (ROOM26_NEW, ROOM26_REFERENCE),
        "room26b": (ROOM26B_NEW, ROOM26B_REFERENCE)}


def _with_check_shape(entries: list) -> list:
    """Entries whose shapes are None run at the module's check shape."""
    return [(e[0], e[1], e[2], e[3] if e[3] is not None else [dict(REGISTRY[e[0]].check_shape)]) + tuple(e[4:])
            for e in entries]


# the harness's default plan (room_device_check.PLANS, read by its cases()) becomes this set's; `order` (roomS): the
# Triton modules of room_device_check.ORDER_SHAPES, each rung at its defaults and the model's best, and the probes
if os.environ.get("KNOBT_SET") == "order":
    room_device_check.PLANS["default"] = lambda: (room_device_check.ORDER_PROBES_TRITON,
                                                  room_device_check.ORDER_SWEEPS_TRITON + room_device_check.order_entries("triton"))
else:
    room_device_check.PLANS["default"] = tuple(_with_check_shape(x) for x in SETS[os.environ.get("KNOBT_SET", "stages")])


def ranking(out: Path, across: bool = False) -> str:
    """Per (module, rung, shape): the ok values ordered by the device's time, with the simulator's order beside;
    `across`: per (module, shape), every rung's configurations in one order (the labels name the rung)."""
    rows = json.loads((out / "knob_device.json").read_text())["rows"]
    groups = defaultdict(list)
    for r in rows:
        if r["bug"] is None and r.get("ok") and r.get("time_ms"):
            groups[(r["module"], "*" if across else r["variant"], json.dumps(r["shape"]))].append(r)
    lines = []
    for (module, tag, shape), rs in sorted(groups.items()):
        label = {id(r): "|".join(r["id"].split("|")[1:3]) if across else r["id"].split("|")[2] for r in rs}
        dev = [label[id(r)] for r in sorted(rs, key=lambda r: r["time_ms"])]
        sim = [label[id(r)] for r in sorted(rs, key=lambda r: r["sim_ms"] or 0)]
        lines.append(f"{module} {tag} {shape}\n  device: {' < '.join(dev)}\n  sim:    {' < '.join(sim)}")
    return "\n".join(lines) + "\n"


def run_ranked(across: bool = False) -> int:
    """The harness's run (room_device_check.main, on whatever plan PLANS["default"] holds), then its ranking
    (`across`: the rungs' ranking too) printed and written to $OUT/ranking.txt; the harness's exit code."""
    rc = room_device_check.main()
    out = Path(os.environ.get("OUT", "/tmp/knobA_device_out"))
    if (out / "knob_device.json").exists():
        text = ranking(out) + ("\n" + ranking(out, across=True) if across else "")
        (out / "ranking.txt").write_text(text)
        print(text)
    return rc


if __name__ == "__main__":
    sys.exit(run_ranked(across=os.environ.get("KNOBT_SET") == "order"))
