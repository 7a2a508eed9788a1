"""Registers and spills of sim2's Triton decode kernels as Triton 3.9 builds them for sm_90a: each candidate compiled
(ttir -> ttgir -> llir -> ptx) at its task's launch specialization, its PTX assembled by the ptxas Triton uses
(`ptxas -v`), the figures printed as JSON lines {module, rung, params, shape, regs, spill_bytes, smem}.

    nice python3 scripts/sim2_ptxas_regs.py flash_decode_triton online_softmax,blocked_two_pass [--shapes 0,3]
        [--grid 'BLOCK_N=16,32,64,128;num_warps=2,4,8;num_stages=1,2'] > regs.jsonl
"""
import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def ptxas_figures(ptx: str, arch: str = "sm_90a") -> dict:
    from triton.backends.nvidia import compiler as nv
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        r = subprocess.run([nv.get_ptxas(int(arch[3:5])).path, f"-arch={arch}", "-v", f.name, "-o", "/dev/null"],
                           capture_output=True, text=True)
    text = r.stdout + r.stderr
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", text)]
    spills = [int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)]
    return {"regs": max(regs) if regs else None, "spill_bytes": max(spills) if spills else None}


def figures(module: str, tag: str, params: dict, shape: dict, dtype: str = "bf16", gpu: str = "H100") -> dict:
    m = REGISTRY[module]
    v = m.variant(tag)
    task = make_task(m, gpu, dtype, shape)
    params = {**v.defaults(), **params}
    code, spec = m.render(v, params, task), m.compile_specs(v, params, task)[0]
    triton, _, ast_source = _import_triton()
    signature, constexprs, aligned = launch_specialization(spec)
    out = triton.compile(ast_source(fn=load_triton_source(code)[spec.name], signature=signature, constexprs=constexprs,
                                    attrs=aligned), target=triton_target(task.gpu.arch),
                         options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
    return {"module": module, "rung": tag, "params": params, "shape": shape, "smem": int(out.metadata.shared),
            **ptxas_figures(out.asm["ptx"], task.gpu.arch)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module")
    ap.add_argument("rungs")
    ap.add_argument("--shapes", default="0")
    ap.add_argument("--grid", default="BLOCK_N=16,32,64,128;num_warps=2,4,8;num_stages=1,2")
    ap.add_argument("--dtypes", default="bf16", help="comma-separated: each candidate built in each")
    args = ap.parse_args(argv)
    m = REGISTRY[args.module]
    grid = [(k, [int(x) for x in vals.split(",")]) for k, vals in (g.split("=") for g in args.grid.split(";"))]
    for tag in args.rungs.split(","):
        names = {p.name for p in m.variant(tag).params}
        axes = [(k, vals) for k, vals in grid if k in names]
        for shape in (m.shapes[int(i)] for i in args.shapes.split(",")):
            for combo, dtype in itertools.product(itertools.product(*(vals for _, vals in axes)),
                                                  args.dtypes.split(",")):
                params = dict(zip((k for k, _ in axes), combo))
                try:
                    print(json.dumps({**figures(args.module, tag, params, shape, dtype), "dtype": dtype}), flush=True)
                except Exception as e:      # Triton's own refusal, for the record
                    print(json.dumps({"module": args.module, "rung": tag, "params": params, "shape": shape,
                                      "dtype": dtype, "error": str(e)[-200:]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
