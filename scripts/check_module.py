"""Render, compile and simulate one op module: the tool for writing a module.

    python scripts/check_module.py rmsnorm_cuda [--no-compile] [--gpus A100,H100]
    python scripts/check_module.py kernelstrain.ops.norms.rmsnorm_cuda:RMSNormCuda

For every variant: compiles its default render for each supported GPU's target (nvcc or
Triton), and each declared bug render once; prints registers/smem (compiler vs. model)
and the simulated time of the default params and the best params on each module shape.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import best_config, make_task, param_grid  # noqa: E402


def compile_one(module, variant, params, task, bug=None):
    src = module.render(variant, params, task, bug)
    if module.impl == "cuda":
        if task.is_hip:
            return compile_hip(src, task.gpu.arch, f"{module.op}_kernel") if find_hip_compiler() else None
        return compile_cuda(src, task.gpu.arch, f"{module.op}_kernel")
    return compile_triton(src, module.compile_specs(variant, params, task), task.gpu.arch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--gpus", default="A100,H100,RTX4090,MI300X")
    a = ap.parse_args()
    if ":" in a.module:  # kernelstrain.ops.family.file:ClassName, before it is registered
        import importlib
        mod, cls = a.module.split(":")
        m = getattr(importlib.import_module(mod), cls)()
    else:
        m = REGISTRY[a.module]
    gpus = a.gpus.split(",")
    fails = 0
    for g in gpus:
        gpu = GPUS[g]
        dtypes = [d for d in m.dtypes if m.supports(gpu, d)]
        if not dtypes:
            print(f"{g}: not supported")
            continue
        for shape in m.shapes:
            t = make_task(m, g, dtypes[0], shape)
            base = simulate(m, m.baseline_variant(), m.baseline_variant().defaults(), t)
            best_ms, bv, bp = best_config(m, t)
            line = [f"{g:8} {dtypes[0]} {dict(t.shape)} base={base.time_ms:.4f}ms"]
            for v in m.variants:
                r = simulate(m, v, v.defaults(), t)
                line.append(f"{v.tag}={r.time_ms:.4f}" if r.ok else f"{v.tag}=ERR({r.error_class})")
            line.append(f"best={best_ms:.4f} ({bv.tag} {bp}) span={base.time_ms / best_ms:.1f}x")
            print("  ".join(line))
        if a.no_compile:
            continue
        t = make_task(m, g, dtypes[0], m.shapes[len(m.shapes) // 2])
        for v in m.variants:
            r = simulate(m, v, v.defaults(), t)
            c = compile_one(m, v, v.defaults(), t)
            if c is None:
                continue
            agree = c.ok == r.ok
            fails += not agree
            print(f"  compile {g} {v.tag:24} sim_ok={r.ok} nvcc/triton_ok={c.ok} "
                  f"smem model={r.smem_bytes} compiler={c.smem_bytes} regs model={r.regs} compiler={c.regs}"
                  + ("" if agree else "  <-- DISAGREE\n" + c.log[-1500:]))
            for bug in v.bugs:
                if not r.ok:
                    break
                cb = compile_one(m, v, v.defaults(), t, bug)
                fails += not cb.ok
                print(f"    bug {bug}: compiles={cb.ok}" + ("" if cb.ok else "\n" + cb.log[-1500:]))
            # every grid point must render (cheap; compile only the default)
            for params in param_grid(v):
                m.render(v, params, t)
    print("FAILURES:", fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
