"""Build the PyTorch binding that an op's entry generates (contract.Entry.torch_binding) around a
CUDA candidate, call it as a torch extension and compare with the module's reference.

    python3 scripts/check_bindings.py [--modules a,b] [--variant last|TAG] [--dtype DT]

For every CUDA module with an entry (default) it renders the chosen rung at the op's check shape
on the H100 profile, appends the binding, builds it with torch.utils.cpp_extension.load_inline,
calls `forward(in/inout tensors..., non-dim scalars...)` with the reference's inputs and Model
attributes, and checks each result (returned outputs and in-place inouts) against the
reference by the gpu_check tolerance class. Needs PyTorch with CUDA and nvcc.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402
from gpu_check import _compare  # noqa: E402
from kernelstrain.gpucheck.adapters import check_shape, prepare, tolerance  # noqa: E402


def check(torch, load_inline, module, tag: str, dtype: str | None, build: Path) -> dict:
    dtype = dtype if dtype in module.dtypes else "bf16" if "bf16" in module.dtypes else module.dtypes[0]
    task = make_task(module, "H100", dtype, check_shape(module))
    v = module.variants[-1] if tag == "last" else module.variant(tag)
    entry = module.entry
    src = module.render(v, v.defaults(), task) + entry.torch_binding(task)
    name = "ks_bind_" + hashlib.sha1(src.encode()).hexdigest()[:12]
    ext = load_inline(name, cpp_sources="", cuda_sources=src, build_directory=str(build),
                      extra_cuda_cflags=["-O3", "-arch=sm_90a", "-std=c++17"], verbose=False)
    ns = {}
    exec(compile(module.reference(task), "<reference>", "exec"), ns)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = ns["Model"](*ns["get_init_inputs"]()).cuda().eval()
        inputs = list(ns["get_inputs"]())
    if prepare(module):
        prepare(module)(task.dims, inputs)
    cand = [t.clone() for t in inputs]
    with torch.no_grad():
        ref = model(*inputs)
    refs = ref if len(entry.results) > 1 else (ref,)
    args = []
    for a in entry.tensors:
        if a.role != "out":
            args.append(cand[module.inputs.index(a.name)] if a.name in module.inputs
                        else getattr(getattr(model, a.name), "data", getattr(model, a.name)))
    bound = {d for a in entry.tensors if a.role != "out" for d in a.dims if isinstance(d, str) and d.isidentifier()}
    args += [task.dims[s.name] if s.name in task.dims else getattr(model, s.name)
             for s in entry.scalars if s.name not in bound and s.value is None]
    out = ext.forward(*args)
    outs = out if len(entry.results) > 1 else (out,)
    torch.cuda.synchronize()
    tol = tolerance(module, dtype)
    res = {}
    for (n, shape, dt), o, r in zip(entry.outputs(task), outs, refs):
        res[n] = _compare(torch, o, r, tol)
        res[n]["shape_ok"] = tuple(o.shape) == shape
    return {"module": module.name, "variant": v.tag, "dtype": dtype,
            "ok": all(r["ok"] and r["shape_ok"] for r in res.values()), "outputs": res}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", default="")
    ap.add_argument("--variant", default="last")
    ap.add_argument("--dtype")
    a = ap.parse_args()
    import torch
    from torch.utils.cpp_extension import load_inline
    names = [n for n in a.modules.split(",") if n] or sorted(
        n for n, m in REGISTRY.items() if m.entry is not None and m.impl == "cuda")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            try:
                r = check(torch, load_inline, REGISTRY[n], a.variant, a.dtype, Path(tmp))
            except Exception as e:   # a build or call failure is this module's result
                r = {"module": n, "ok": False, "error": f"{type(e).__name__}: {str(e)[-600:]}"}
            bad += not r["ok"]
            print(r, flush=True)
    print(f"{len(names) - bad}/{len(names)} bindings built, called and matched the reference")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
