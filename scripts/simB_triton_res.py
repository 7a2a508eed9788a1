"""ptxas's resources of a Triton candidate as Triton builds it for sm_90a: the candidate rendered by its module (knobs
as knobs.render writes them), each of its kernels compiled by Triton for the H100's target at its spec's num_warps /
num_stages, and `cuobjdump -res-usage` of the cubin: registers a thread, STACK (bytes of spill stores a thread),
shared memory. Compile-only: no GPU (the figures of ops/attention/_flash_spill.py).

    python3 scripts/simB_triton_res.py flash_prefill_triton pipelined \\
        '{"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3}' '{"B": 1, "H": 32, "S": 2048, "D": 128}'
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402
from simB_sass import cuobjdump  # noqa: E402


def resources(module: str, rung: str, params: dict, shape: dict, dtype: str = "bf16") -> list:
    """[(kernel, {REG, STACK, SHARED, LOCAL})] of one candidate on sm_90a."""
    m = REGISTRY[module]
    v = m.variant(rung)
    p = {**v.defaults(), **params}
    task = make_task(m, "H100", dtype, shape)
    triton, _, ast_source = _import_triton()
    ns = load_triton_source(knobs.render(m, v, p, task, None))
    out = []
    for spec in m.compile_specs(v, p, task):
        signature, constexprs, aligned = launch_specialization(spec)
        k = triton.compile(ast_source(fn=ns[spec.name], signature=signature, constexprs=constexprs, attrs=aligned),
                           target=triton_target("sm_90a"), options={"num_warps": spec.num_warps,
                                                                    "num_stages": spec.num_stages})
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "k.cubin"
            cubin.write_bytes(k.asm["cubin"])
            text = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
        found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
        out.append((spec.name, dict(zip(("REG", "STACK", "SHARED", "LOCAL"), map(int, found.groups())))
                    if found else text[-300:]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module")
    ap.add_argument("rung")
    ap.add_argument("params", type=json.loads)
    ap.add_argument("shape", type=json.loads)
    ap.add_argument("--dtype", default="bf16")
    a = ap.parse_args(argv)
    for name, res in resources(a.module, a.rung, a.params, a.shape, a.dtype):
        print(name, json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
