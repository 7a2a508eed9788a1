"""Device plan of helper sim (issue 30): flash_prefill_cuda's tensor-core rungs timed at the large menu shapes the
calibration fit extrapolates to, so a refit gets rows there (scripts/room_device_check.py's harness: every
configuration built, checked against the PyTorch reference and timed beside the simulator).

    python3 scripts/sim_device.py                        # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    KNOBA_REHEARSE=3 python3 scripts/sim_device.py       # no GPU: the first 3 cases through every path but the GPU's

f1: the fit's stored rows of flash_prefill_cuda's mma.sync / cp.async / wgmma rungs have roofline floors of at most
0.035 ms (B=1 H=32 S=2048 D=128 and smaller), the menu's large shapes 0.28-1.11 ms (B=2 and B=4 at S=4096, B=2 at
S=8192); the old fit took mma_sync's size exponent (-0.415) out to the module's whole range and timed it at 625
TFLOP/s at B=4 S=4096 on the H100, past the 494 that mma.sync can issue there (gpus.mma_sync_rate). Each rung at the
configuration the model ranks best there (mma_sync at four), fp16 (the dtype of the case found), and one fp32-FMA rung (online_softmax)
at the smallest of the three for the module's slow end.

The shapes are past gpu-check's sampling cap (gpucheck.sample.fits: 8x the check shape's FLOPs) on purpose: the
reference (fp32 scores, B*H*S*S*4 bytes: 8.6 GB at B=2 S=4096, 17 GB at B=4 S=4096 and at B=2 S=8192, two live at
its peak) fits one card; KNOBA_CHECK_JOBS=2 keeps two checks a time on the GPU (room_device_check.main), and a case
whose allocation still fails runs again alone (gpucheck._checked).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402

FP16 = "fp16"
BIG = [{"B": 2, "H": 32, "S": 4096, "D": 128}, {"B": 4, "H": 32, "S": 4096, "D": 128},
       {"B": 2, "H": 32, "S": 8192, "D": 128}]
# (module, rung, parameter, shapes, base, values, dtype): as room_device_check's entries
F1 = [
    ("flash_prefill_cuda", "mma_sync", "BLOCK_N", BIG, {"BLOCK_M": 64}, (32, 64, 128), FP16),
    ("flash_prefill_cuda", "mma_sync", "BLOCK_N", BIG, {"BLOCK_M": 128}, (64,), FP16),
    ("flash_prefill_cuda", "cp_async_pipeline", "BLOCK_N", BIG, {"BLOCK_M": 128, "stages": 3}, (128,), FP16),
    ("flash_prefill_cuda", "wgmma_warpgroup", "BLOCK_M", BIG, {"BLOCK_N": 64, "stages": 3}, (64,), FP16),
    ("flash_prefill_cuda", "warp_specialized", "stages", BIG, {"BLOCK_M": 128, "BLOCK_N": 128}, (3,), FP16),
    ("flash_prefill_cuda", "online_softmax", "BLOCK_M", BIG[:1], {"BLOCK_N": 64, "threads": 128}, (16,), FP16),
]
PLANS = {"f1": ([], F1)}

room_device_check.PLANS["default"] = PLANS[os.environ.get("SIM_PLAN", "f1")]
room_device_check.fits = lambda module, dtype, shape, gpu="H200": True      # the cap is passed on purpose (above)
os.environ.setdefault("KNOBA_CHECK_JOBS", "2")

if __name__ == "__main__":
    sys.exit(room_device_check_triton.run_ranked())
