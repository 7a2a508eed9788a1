"""Device check of the generic Triton knobs (kernelstrain/knobs_triton.py): a sample of Triton rungs across modules,
each built, checked against the PyTorch reference and timed with every knob value beside the code without it (value
0), the simulator's time beside each; then each (rung, shape)'s values ranked by the device and by the simulator.

The first run (H100, 2026-12-06 13:44 UTC, 58 cases, 0 problems: measurements/h100_knobs_triton.json) also timed
cache_modifier=".cg" and the launch option maxnreg (RUNGS' caps, PIPELINED: where .cg was left out), then knobs;
neither paid anywhere (knobs_triton's docstring), so they are knobs no more and the plan times evict alone.
The second (H100, 2026-12-06 16:36 UTC, KNOBS_SET=menu, 84 cases, 0 problems: measurements/h100_knobs_evict_menu.json)
and third (KNOBS_SET=tuned, 33 cases, 0 problems: h100_knobs_evict_tuned.json) gave the model of evict and the rungs
it is offered on (knobs_triton's docstring).

    python3 scripts/knobs_device.py                     # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    KNOBA_REHEARSE=3 python3 scripts/knobs_device.py    # no GPU: the first 3 cases through every path but the GPU's
    KNOBS_SET=more python3 scripts/knobs_device.py      # another set of SETS (default: first)
    python3 scripts/knobs_device.py --ratios DIR/knob_device.json   # each value's time over none's, device and sim

scripts/room_device_check.py's harness (gpucheck's build and run passes) over the plan below; the ranking is
room_device_check_triton.ranking. Exit 1 if a value fails its check.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402

EVICT = (0, 1, 2)               # none, evict_first, evict_last on the main loop's loads
ROWS = [{"T": 64, "D": 4096}, {"T": 4096, "D": 4096}]
SOFTMAX = [{"R": 32, "C": 128256}, {"R": 4096, "C": 32000}]
CE = [{"T": 512, "V": 128256}]
GEMM = [{"M": 4096, "N": 4096, "K": 4096}]
PAGED = [{"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}]
# (module, rung, shapes, maxnreg caps): a single-pass stream (nothing re-read: a hint can only matter for other
# data), multi-pass rows re-read from L2 (evict_first on the first pass should lose the re-read), tl.dot K loops
# (tiles re-read by other programs through L2), a decode KV stream. The caps: ptxas (Triton 3.9, sm_90a) gives
# the streaming rungs 32-58 registers (at 32: 16-152 bytes of stack), paged_decode split_kv 120 (64: 72 bytes of
# stack, twice the warps an SM), gemm_fp16 pipelined_stages 174 and flash_prefill pipelined 255 (+120 bytes of
# stack); under ~90 those two do not build (C7602 "Insufficient registers"), at 128 they spill 384 / 1008 bytes
RUNGS = [
    ("rmsnorm_triton", "chunked_two_pass", ROWS, (32, 64)),
    ("softmax_triton", "online_softmax", SOFTMAX, (32,)),
    ("softmax_triton", "chunked_three_pass", SOFTMAX[1:], (32,)),
    ("layernorm_triton", "chunked_three_pass", ROWS[1:], ()),
    ("cross_entropy_fwd_triton", "online_softmax", CE, (32, 64)),
    ("gemm_fp16_triton", "pipelined_stages", GEMM, (128, 168)),
    ("paged_decode_triton", "split_kv", PAGED, (32, 64, 96)),
    ("flash_prefill_triton", "pipelined", None, (128, 168)),
    ("rmsnorm_triton", "persistent", ROWS[1:], (32,)),
]
# cache (.cg) only where the loop's loads are not pipelined: Triton 3.9 turns a pipelined loop's loads into cp.async
# (LDGSTS), which bypass L1 already; with .cg written there the SASS is identical (gemm_fp16, paged_decode,
# flash_prefill at their default stages; rmsnorm chunked_two_pass and softmax online_softmax at num_stages=3)
PIPELINED = {"gemm_fp16_triton", "paged_decode_triton", "flash_prefill_triton"}
FIRST = [(m, tag, knob, shapes, {}, values) for m, tag, shapes, caps in RUNGS
         for knob, values in (("evict", EVICT),) if values]
# the second run: every rung evict has a place on (knobs_triton.places: a later loop re-reads the main loop's rows),
# at menu shapes spanning the rows a streaming multiprocessor's L1 holds at once (one 8 KB row; several 64 KB rows;
# one 256 KB row), the slow one-row-a-lane rungs at one short shape; each value beside none
NORM = [{"T": 64, "D": 4096}, {"T": 4096, "D": 4096}]
MENU_RUNGS = [
    ("softmax_triton", "online_softmax", [{"R": 32, "C": 128256}, {"R": 4096, "C": 32000}, {"R": 2048, "C": 4096},
                                          {"R": 16384, "C": 1024}]),
    ("softmax_triton", "chunked_three_pass", [{"R": 32, "C": 128256}, {"R": 4096, "C": 32000}, {"R": 2048, "C": 4096}]),
    ("rmsnorm_triton", "chunked_two_pass", NORM + [{"T": 65536, "D": 128}]),
    ("layernorm_triton", "chunked_three_pass", NORM + [{"T": 8192, "D": 1024}]),
    ("layernorm_triton", "welford_chunked", NORM),
    ("add_rmsnorm_triton", "fused_chunked", NORM),
    ("add_rmsnorm_triton", "two_kernels", NORM),
    ("cross_entropy_fwd_triton", "chunked_two_pass", [{"T": 16, "V": 128256}, {"T": 256, "V": 32000}]),
    ("fp8_quant_triton", "fused_row_loop", [{"T": 32, "D": 8192}, {"T": 4096, "D": 4096}]),
    ("flash_decode_triton", "blocked_two_pass", [{"B": 16, "H": 16, "S": 1024, "D": 64}, {"B": 8, "H": 32, "S": 2048, "D": 128}]),
    ("softmax_triton", "row_per_lane", [{"R": 16384, "C": 1024}]),
    ("rmsnorm_triton", "row_per_lane", [{"T": 65536, "D": 128}]),
    ("layernorm_triton", "row_per_lane", [{"T": 8192, "D": 1024}]),
]
MENU = [(m, tag, "evict", shapes, {}, EVICT) for m, tag, shapes in MENU_RUNGS]
# the follow-up: configurations an engineer tunes to, whose resident programs put the SM's rows on the other side
# of its L1 from the rung's defaults (knobs_triton.l1_load, in brackets the model's load at the defaults)
TUNED = [
    ("softmax_triton", "online_softmax", [{"R": 4096, "C": 32000}], {"BLOCK": 4096, "num_warps": 16}),     # 0.49 (1.22)
    ("softmax_triton", "chunked_three_pass", [{"R": 4096, "C": 32000}], {"BLOCK": 4096, "num_warps": 16}),  # 0.73 (1.47)
    ("softmax_triton", "online_softmax", [{"R": 2048, "C": 4096}], {"BLOCK": 512, "num_warps": 4}),        # 0.44 (0.16)
    ("rmsnorm_triton", "chunked_two_pass", [{"T": 4096, "D": 4096}], {"BLOCK": 256, "num_warps": 2}),      # 1.0 (0.38)
    ("layernorm_triton", "chunked_three_pass", [{"T": 4096, "D": 4096}], {"BLOCK": 256, "num_warps": 2}),  # 1.0 (0.38)
    ("add_rmsnorm_triton", "fused_chunked", [{"T": 4096, "D": 4096}], {"BLOCK": 256, "num_warps": 2}),     # 2.0 (0.75)
    ("add_rmsnorm_triton", "fused_chunked", [{"T": 4096, "D": 4096}], {"BLOCK": 2048, "num_warps": 8}),    # 0.38 (0.75)
    ("fp8_quant_triton", "fused_row_loop", [{"T": 4096, "D": 4096}], {"num_warps": 2}),                    # 1.0 (0.5)
    ("fp8_quant_triton", "fused_row_loop", [{"T": 4096, "D": 4096}], {"num_warps": 16}),                   # 0.13 (0.5)
    ("cross_entropy_fwd_triton", "chunked_two_pass", [{"T": 4096, "V": 32000}], {"BLOCK": 4096, "num_warps": 16}),  # 0.49 (0.98)
    ("cross_entropy_fwd_triton", "chunked_two_pass", [{"T": 4096, "V": 32000}], {"BLOCK": 1024, "num_warps": 4}),   # 2.44 (0.98)
]
SETS = {"first": FIRST, "menu": MENU,
        "tuned": [(m, tag, "evict", shapes, base, EVICT) for m, tag, shapes, base in TUNED]}

room_device_check.PLANS["default"] = ([], room_device_check_triton._with_check_shape(SETS[os.environ.get("KNOBS_SET", "first")]))


def ratios(path: Path) -> str:
    """Per (rung, shape): each knob value's time over the code without knobs (value 0), device beside simulator."""
    rows = json.loads(path.read_text())["rows"]

    def key(r):         # the case without its evict value: the rung, shape and other parameters
        return r["module"], r["variant"], json.dumps(r["shape"]), json.dumps({k: v for k, v in r["params"].items() if k != "evict"})
    base = {key(r): r for r in rows if r.get("ok") and r.get("time_ms") and r["params"].get("evict") == 0}
    lines = []
    for r in rows:
        b = base.get(key(r))
        if b is None or r is b or not r.get("time_ms") or not r.get("ok"):
            continue
        knob = r["id"].split("|")[2]
        sim = r["sim_ms"] / b["sim_ms"] if r.get("sim_ms") and b.get("sim_ms") else float("nan")
        lines.append(f"{r['module']:26} {r['variant']:20} {knob:10} {json.dumps(r['shape']):48} "
                     f"device {r['time_ms'] / b['time_ms']:.3f} (2nd {(r.get('time_ms_2') or 0) / (b.get('time_ms_2') or 1):.3f}) "
                     f"sim {sim:.3f}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__" and sys.argv[1:2] == ["--ratios"]:
    print(ratios(Path(sys.argv[2])), end="")
elif __name__ == "__main__":
    sys.exit(room_device_check_triton.run_ranked())
