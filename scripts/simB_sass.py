"""SASS of a CUDA candidate as nvcc builds it for sm_90a: the candidate rendered by its module, compiled to a cubin
(`nvcc -cubin -gencode arch=compute_90a,code=sm_90a -Xptxas -v`), disassembled with the cuobjdump that ships with
Triton's NVIDIA backend; prints ptxas's registers and the counts of the memory, shuffle, barrier and MUFU
instructions (--order: the loads, stores and FMAs in program order, run-length counted: which loads issue ahead of
their uses; --sass: the whole listing). The knobs (min_blocks, main_unroll) are written as knobs.render writes them.
Compile-only: no GPU.

    python3 scripts/simB_sass.py causal_conv1d_cuda register_strip '{"threads": 64, "strip": 2048}' \
        '{"B": 1, "D": 2048, "L": 2048}' [--dtype fp16] [--sass] [--order]
    python3 scripts/simB_sass.py gemv_cuda warp_per_row '{"warps": 4, "min_blocks": 1}' '{"M": 8, "N": 8192, "K": 8192}' --order
"""
import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.compilers import NVCC_GENCODE  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

COUNTED = ("LDG", "STG", "LDS", "STS", "BAR", "SHFL", "ATOM", "RED", "LDGSTS", "MUFU", "BSSY", "FCHK")


def cuobjdump() -> str:
    import triton
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def sass(module: str, rung: str, params: dict, shape: dict, dtype: str = "bf16") -> tuple:
    """(ptxas's -v text, the SASS listing) of one candidate on the H100's target."""
    m = REGISTRY[module]
    v = m.variant(rung)
    src = knobs.render(m, v, {**v.defaults(), **params}, make_task(m, "H100", dtype, shape))
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp) / "c.cu", Path(tmp) / "c.cubin"
        cu.write_text(src)
        r = subprocess.run(["nvcc", "-cubin", "-std=c++17", "-gencode", NVCC_GENCODE["sm_90a"], "-Xptxas", "-v",
                            str(cu), "-o", str(cubin)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-3000:])
        listing = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True).stdout
    return r.stderr, listing


def counts(listing: str) -> dict:
    ops = collections.Counter(re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\d\s+)?([A-Z][A-Z0-9_.]+)", listing))
    return {k: c for k, c in sorted(ops.items()) if k.split(".")[0] in COUNTED}


def order(listing: str) -> str:
    """The global loads and stores, local spills, FMAs and branches in program order, runs counted."""
    ops = re.findall(r"\b(LDG|STG|LDL|STL|FFMA|BRA)[A-Z0-9_.]*", listing)
    runs = [[ops[0], 0]] if ops else []
    for op in ops:
        if op == runs[-1][0]:
            runs[-1][1] += 1
        else:
            runs.append([op, 1])
    return " ".join(f"{n}x{op}" for op, n in runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module")
    ap.add_argument("rung")
    ap.add_argument("params", type=json.loads)
    ap.add_argument("shape", type=json.loads)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--sass", action="store_true")
    ap.add_argument("--order", action="store_true")
    a = ap.parse_args(argv)
    log, listing = sass(a.module, a.rung, a.params, a.shape, a.dtype)
    print(" ".join(re.findall(r"Used \d+ registers[^\n]*", log)))
    print(json.dumps(counts(listing)))
    if a.order:
        print(order(listing))
    if a.sass:
        print(listing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
