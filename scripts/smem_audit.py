"""Shared-memory model vs. the real compiler, for Triton modules (and CUDA dynamic smem).

The simulator decides from `launch().smem_bytes` whether a candidate overflows shared
memory, so a model far above Triton's `metadata.shared` hides configs that would run and
can record an overflow that would not happen. This compiles a seeded sample of each
variant's parameter grid and prints model / compiler ratios, worst first.

    python scripts/smem_audit.py [--gpus H100,A100,MI300X] [--per-variant 3] [--modules a,b] [--jobs 2]
"""
import argparse
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import compile_triton  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402


def cases(modules, gpus, per_variant, seed):
    rng = random.Random(seed)
    for name in modules:
        m = REGISTRY[name]
        for gpu in gpus:
            dtype = next((d for d in m.dtypes if m.supports(GPUS[gpu], d)), None)
            if dtype is None:
                continue
            shape = m.shapes[len(m.shapes) // 2]
            for v in m.variants:
                if v.smem == "none" or v.needs - GPUS[gpu].features:
                    continue
                grid = list(param_grid(v))
                for p in rng.sample(grid, min(per_variant, len(grid))):
                    yield name, gpu, dtype, shape, v.tag, p


def measure(case):
    name, gpu, dtype, shape, tag, params = case
    m = REGISTRY[name]
    task = make_task(m, gpu, dtype, shape)
    v = m.variant(tag)
    r = compile_triton(m.render(v, params, task), m.compile_specs(v, params, task), task.gpu.arch)
    return case, m.launch(v, params, task).smem_bytes, (r.smem_bytes if r.ok else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="H100,A100,MI300X")
    ap.add_argument("--modules", default="")
    ap.add_argument("--per-variant", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    modules = args.modules.split(",") if args.modules else sorted(n for n, m in REGISTRY.items() if m.impl == "triton")
    todo = list(cases(modules, args.gpus.split(","), args.per_variant, args.seed))
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(measure, todo, chunksize=1))
    worst = {}
    for (name, gpu, _, _, tag, params), model, real in rows:
        if not real:
            continue
        ratio = model / real
        key = (name, gpu, tag)
        if key not in worst or abs(ratio - 1) > abs(worst[key][0] - 1):
            worst[key] = (ratio, params, model, real)
    print(f"{'module':28s} {'gpu':7s} {'variant':26s} {'model/real':>10s}  model      real  params")
    for (name, gpu, tag), (ratio, params, model, real) in sorted(worst.items(), key=lambda kv: -abs(kv[1][0] - 1)):
        print(f"{name:28s} {gpu:7s} {tag:26s} {ratio:10.2f}  {model:<9d} {real:<6d} {params}")
    ratios = [w[0] for w in worst.values()]
    within = sum(0.8 <= r <= 1.25 for r in ratios)
    print(f"\n{len(rows)} compiles; {within}/{len(ratios)} (module, gpu, variant) worst cases within 0.8-1.25")


if __name__ == "__main__":
    main()
