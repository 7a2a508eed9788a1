"""Correctness on the CPU of the Triton values roomT added (issue 26 Build 2): Triton's interpreter
(TRITON_INTERPRET=1) runs each new value at 2-3 small shapes against the module's PyTorch reference (inputs made on
the CPU), and every bug render at the same values must fail. fp16 only (the interpreter's numpy has no bfloat16).
This is the values' correctness proof until a device job (roomT/j1) runs them.

    TRITON_INTERPRET=1 python3 scripts/roomT_interpret.py       # exit 1 if a value is wrong or a bug passes

cross_attention_triton split_kv at 32 splits: every split full (Skv 2048, 64 keys each at BLOCK_N 32), a ragged key
tail with the last ten splits empty (Skv 2050: 96-key splits), a decode step (Sq 1) and a ragged query tile (Sq 20 at
BLOCK_M 16), both BLOCK_N, D 64 and 128.
Not here: fp8_quant_triton persistent_rows' 8 programs an SM ran on the H100 with its bugs (h100_roomS_order.json);
rmsnorm_triton persistent's 16 programs an SM cannot run under Triton 3.9's interpreter at any value of the rung (its
`mask & (pid < T)` is typed int32 and refused by the numpy load; its `range(pid, T, step)` row is a Python int without
.to), so it stays off the menus (KERNELSTRAIN_DEVICE_UNCHECKED=1) until the device job roomT/j3 runs it.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TRITON_INTERPRET", "1")      # before triton is imported

import roomA_interpret_room  # noqa: E402  (its run / main: render on the CPU, compare with the reference, bugs fail)

CROSS = [{"B": 1, "H": 2, "Sq": 1, "Skv": 2048, "D": 64}, {"B": 2, "H": 1, "Sq": 20, "Skv": 2050, "D": 64},
         {"B": 1, "H": 1, "Sq": 1, "Skv": 2050, "D": 128}]
CASES = [("cross_attention_triton", "split_kv", {"num_splits": 32, "BLOCK_M": 16, "BLOCK_N": bn, "num_stages": 2}, s, "fp16")
         for s in CROSS for bn in (32, 64)]

if __name__ == "__main__":
    roomA_interpret_room.CASES = CASES
    sys.exit(roomA_interpret_room.main())
