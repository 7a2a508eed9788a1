"""Device proof of the room added to the Triton rungs (issue 26 item 2, *_triton modules): scripts/room_device_check.py's
harness (every value built, checked against the PyTorch reference and timed beside the simulator; every bug at a
parameter's smallest and largest values must fail) over the Triton rungs and parameters below.

    python3 scripts/room_device_check_triton.py                  # on a CUDA machine; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/room_device_check_triton.py   # no GPU: the first 3 cases through every path but the GPU's
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402

# the check shape and a 4x wider grid (the reference steps through L in Python: gpucheck.sample.fits bounds the size)
SCAN_SHAPES = [{"B": 1, "L": 2048, "D": 1536, "N": 16}, {"B": 4, "L": 1024, "D": 3072, "N": 16}]
# conv2d: the check shape's neighbours on the menu, 3x3 at C=64 and at C=256 (BK 64: a quarter of the K-loop trips of 16)
CONV_SHAPES = [{"N": 8, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1},
               {"N": 16, "H": 14, "W": 14, "C": 256, "K": 256, "R": 3, "S": 3, "U": 1, "PD": 1}]
room_device_check.NEW = [
    ("selective_scan_triton", "state_outer_scan", "CHUNK", SCAN_SHAPES),
    ("selective_scan_triton", "state_outer_scan", "BLOCK_D", SCAN_SHAPES),
    ("selective_scan_triton", "state_outer_scan", "num_warps", SCAN_SHAPES),
    ("conv2d_nhwc_triton", "implicit_gemm_dot", "BK", CONV_SHAPES),
    ("conv2d_nhwc_triton", "pipelined_stages", "BK", CONV_SHAPES),
]
room_device_check.REFERENCE = [
    ("selective_scan_triton", "exp2_fused_epilogue", "BLOCK_D", SCAN_SHAPES),
    ("selective_scan_triton", "exp2_fused_epilogue", "num_warps", SCAN_SHAPES[:1]),
]

if __name__ == "__main__":
    sys.exit(room_device_check.main())
