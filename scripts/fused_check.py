"""Check fused candidates without a GPU: KernelBench's static checker, nvcc, Triton AOT, and the
Triton interpreter against the eager program.

    python3 scripts/fused_check.py static  KB_EXPORT --kernelbench /tmp/KernelBench
    python3 scripts/fused_check.py nvcc    KB_EXPORT [--sample N] [--arch sm_90a sm_80] [--full K]
    python3 scripts/fused_check.py triton  KB_EXPORT [--sample N]
    python3 scripts/fused_check.py interp  --programs N [--seed S] [--max-numel M] [--indices I ...]

KB_EXPORT is a `kernelstrain export kernelbench` directory of a `--config fused` dataset.
- static: every solution through KernelBench's own `validate_kernel_static` (imported from the
  checkout given, never copied), backend and precision per solution.
- nvcc: the CUDA source of a sample of solutions as load_inline writes it (cuda.cu: three include
  lines, then the string), compiled for each arch; device code only (the torch::Tensor host
  functions stripped: including torch's headers costs ~3 min a file here) except the first K,
  compiled whole with torch's include paths.
- triton: each @triton.jit kernel of a sample compiled ahead of time for GPUTarget("cuda", 90, 32)
  from the constexprs and num_warps its launcher passes (other arguments: pointers of the problem's
  dtype and i32 scalars).
- interp: TRITON_INTERPRET=1 runs every rung's Triton candidate, and every bug a rung offers, of the
  first N programs (those under M elements) against the reference on the CPU; bf16 programs run in
  fp32 (the interpreter's bf16 store does not round to nearest). ok candidates must match within
  1e-4, bugged ones must not.
Prints counts and every failure; exit 1 when any check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # this checkout's kernelstrain


def solutions(export: Path) -> list[dict]:
    index = json.loads((export / "index.json").read_text())
    problems = {p["problem_id"]: p for p in index["problems"]}
    return [{**s, "dtype": problems[s["problem_id"]]["dtype"], "path": export / s["file"]}
            for s in index["solutions"] if s["file"].startswith("solutions/level2/")]


def cmd_static(args) -> int:
    import importlib.util       # the checker's module alone: the package's __init__ imports API clients
    spec = importlib.util.spec_from_file_location(
        "kb_static", Path(args.kernelbench) / "src" / "kernelbench" / "kernel_static_checker.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    validate_kernel_static = checker.validate_kernel_static
    bad = 0
    rows = solutions(Path(args.export))
    for s in rows:
        ok, errors, _ = validate_kernel_static(s["path"].read_text(), backend=s["impl"], precision=s["dtype"])
        if not ok:
            bad += 1
            print(f"REJECTED {s['file']}: {errors}")
    print(f"static checker: {len(rows) - bad} of {len(rows)} solutions accepted")
    return 1 if bad else 0


CUDA_STRING = re.compile(r'cuda_source = r"""\n(.*?)"""', re.S)
LOAD_INLINE_HEAD = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


def device_only(source: str) -> str:
    """The kernels without the torch::Tensor host functions (and so without torch's headers)."""
    return source[:source.index("\ntorch::Tensor ")] + "\n"


def cmd_nvcc(args) -> int:
    rows = [s for s in solutions(Path(args.export)) if s["impl"] == "cuda"]
    random.Random(0).shuffle(rows)
    rows = rows[:args.sample]
    include = []
    if args.full:
        import torch.utils.cpp_extension as ext
        include = [f"-I{p}" for p in ext.include_paths()]
    failed = 0
    for n, s in enumerate(rows):
        src = CUDA_STRING.search(s["path"].read_text()).group(1)
        whole = n < args.full
        text = LOAD_INLINE_HEAD + "\n" + src if whole else "#include <cuda_runtime.h>\n" + device_only(src)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cuda.cu"
            path.write_text(text)
            for arch in args.arch:
                t0 = time.time()
                r = subprocess.run(["nvcc", "-c", "-std=c++17", "-O3", f"-arch={arch}", *(include if whole else []),
                                    str(path), "-o", os.devnull], capture_output=True, text=True)
                expect_ok = s["status"] != "compile_error"
                good = (r.returncode == 0) == expect_ok
                failed += not good
                print(f"{'ok  ' if good else 'FAIL'} {s['file']} {arch} {'whole' if whole else 'device'} "
                      f"rc={r.returncode} status={s['status']} {time.time() - t0:.1f}s")
                if not good:
                    print(r.stderr[-2000:])
    print(f"nvcc: {len(rows) * len(args.arch) - failed} of {len(rows) * len(args.arch)} compiles agree with the status")
    return 1 if failed else 0


def _kernels(module):
    import triton
    return {name: fn for name, fn in vars(module).items() if isinstance(fn, triton.runtime.jit.JITFunction)}


def cmd_triton(args) -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    rows = [s for s in solutions(Path(args.export)) if s["impl"] == "triton" and s["status"] != "compile_error"]
    random.Random(0).shuffle(rows)
    rows = rows[:args.sample]
    ptr = {"fp32": "*fp32", "bf16": "*bf16"}
    failed = total = 0
    for s in rows:
        text = s["path"].read_text()
        module = types.ModuleType("cand")
        exec(compile(text.split("\n\nclass ModelNew")[0], str(s["path"]), "exec"), module.__dict__)
        for name, fn in _kernels(module).items():
            launched = re.search(rf"{name}\[.*?\]\((.*?)\)\n", text)
            if launched is None:        # a device helper (round_bf16): compiled inside the kernels that call it
                continue
            launch = launched.group(1)
            kw = dict(re.findall(r"(\w+)=(\d+)", launch))
            sig, consts = {}, {}
            for arg in fn.arg_names:
                if arg in kw and arg not in ("num_warps", "num_stages"):
                    sig[arg], consts[arg] = "constexpr", int(kw[arg])
                elif arg.endswith("_ptr"):
                    sig[arg] = ptr[s["dtype"]]
                else:
                    sig[arg] = "i32"
            total += 1
            try:
                src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts)
                triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": int(kw.get("num_warps", 4)), "num_stages": int(kw.get("num_stages", 3))})
                print(f"ok   {s['file']} {name}")
            except Exception as e:       # a compile failure is the finding: report it and go on
                failed += 1
                print(f"FAIL {s['file']} {name}: {type(e).__name__}: {str(e)[-800:]}")
    print(f"triton AOT (cuda, 90): {total - failed} of {total} kernels compiled")
    return 1 if failed else 0


def cmd_interp(args) -> int:
    os.environ["TRITON_INTERPRET"] = "1"
    import math

    import torch

    from kernelstrain.fused.module import GRAPHED, fused_module, module_name
    from kernelstrain.tasks import make_task

    def load(src, name):
        module = types.ModuleType(name)
        exec(compile(src, name, "exec"), module.__dict__)
        return module

    def fp32(text):
        return text.replace("dtype = torch.bfloat16", "dtype = torch.float32")
    checked = failed = programs = 0
    for index in args.indices or range(10 * args.programs):
        if programs == args.programs and not args.indices:
            break
        m = fused_module(module_name(args.seed, index, "triton"))
        if len(m.variants) < 2 or max(math.prod(s["out"]["shape"]) for s in m.view.steps) > args.max_numel:
            continue
        programs += 1
        task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
        ref = load(fp32(m.reference(task)), "ref")
        torch.manual_seed(2)
        inputs = ref.get_inputs()
        torch.manual_seed(1)
        want = ref.Model(*ref.get_init_inputs())(*inputs)
        for v in m.variants[1:]:
            params = v.defaults()
            for bug in (None, *v.bugs_for(m.dtypes[0], params)):
                new = load(fp32(m.render(v, params, task, bug)), "new")
                torch.manual_seed(1)
                try:
                    with torch.no_grad():
                        model = new.ModelNew(*ref.get_init_inputs())
                        # a graphed rung's plan is its `run` (a CPU has no CUDA graphs: the capture and replay were
                        # checked on the device, fused/graphs.py)
                        got = (model.run if v.tag in GRAPHED else model)(*inputs)
                    same = got.shape == want.shape and torch.allclose(got, want, atol=1e-4, rtol=1e-4)
                except Exception as e:     # an out-of-bounds read of a bug: the interpreter's own error counts as caught
                    same, got = False, f"{type(e).__name__}"
                good = same == (bug is None)
                checked += 1
                failed += not good
                print(f"{'ok  ' if good else 'FAIL'} {m.name} {v.tag} bug={bug} matches={same}", flush=True)
    print(f"interpreter: {checked - failed} of {checked} candidates of {programs} programs labelled right")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("static")
    a.add_argument("export")
    a.add_argument("--kernelbench", required=True)
    a = sub.add_parser("nvcc")
    a.add_argument("export")
    a.add_argument("--sample", type=int, default=12)
    a.add_argument("--arch", nargs="+", default=["sm_90a", "sm_80"])
    a.add_argument("--full", type=int, default=0)
    a = sub.add_parser("triton")
    a.add_argument("export")
    a.add_argument("--sample", type=int, default=20)
    a = sub.add_parser("interp")
    a.add_argument("--programs", type=int, default=10)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--max-numel", type=int, default=300_000)
    a.add_argument("--indices", type=int, nargs="+", help="these programs of the stream instead of the first N")
    args = ap.parse_args(argv)
    return {"static": cmd_static, "nvcc": cmd_nvcc, "triton": cmd_triton, "interp": cmd_interp}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
