"""Every slip kind (kernelstrain/slips) against the real compilers.

For a seeded sample of each module's renders (every variant offered on the GPU, a few
parameter settings, CUDA targets sm_80/86/90a/120 in turn), each kind that has a site is
applied, the broken code is compiled, and the compiler's log is compared with the slip's
message: it must be rejected, with the same first error line (compilers.first_error), and
ideally the same whole text (paths normalized); the unbroken render must compile.

    python scripts/slip_audit.py [--modules a,b] [--kinds k1,k2] [--per-module 2] [--jobs 2] [--out FILE]
                                 [--compilers nvcc,triton,hipcc] [--fixture FILE]

Prints per kind and compiler (nvcc; triton; hipcc: CUDA modules on MI300X, when asked): modules
with a site, cases compiled, rejected, first line equal (clang's typo correction, which names
a declaration of the installed HIP headers, left out: verify.comparable), whole text equal,
unbroken compiles; then each disagreement. Exit 1 when a kind is not 100 % on rejected /
first line / unbroken. --fixture writes the cases with the compiler's first error line and
text (tests/fixtures/typo_compiler.json is written so, for the identifier kind).
"""
import argparse
import json
import random
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import slips  # noqa: E402
from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, first_error, tool_text  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402
from kernelstrain.verify import comparable  # noqa: E402

CUDA_GPUS = ("A100", "A10", "H100", "RTX5090")       # sm_80, sm_86, sm_90a, sm_120


def cases(modules, kinds, per_module, seed, hip=False):
    """(module, gpu, dtype, shape, tag, params, kind, site) samples: per module and kind, up to
    `per_module` renders that have a site, each on the next GPU of CUDA_GPUS; with `hip`, as
    many more of a CUDA module on MI300X for a kind worded for hipcc."""
    rng = random.Random(seed)
    if hip:
        yield from _hip_cases(modules, kinds, per_module, random.Random(seed + 1))
        return
    for name in modules:
        m = REGISTRY[name]
        for kind in kinds:
            if not slips.offered(kind, m.impl):
                continue
            found = 0
            order = list(range(len(CUDA_GPUS)))
            rng.shuffle(order)
            tries = [(CUDA_GPUS[g], v) for g in order for v in m.variants]
            rng.shuffle(tries)
            for gpu, v in tries:
                if found >= per_module:
                    break
                shape = rng.choice(m.shapes)
                dtype = next((d for d in m.dtypes if m.supports(GPUS[gpu], d) and v.offered(d)
                              and slips.offered(kind, m.impl, "", d, shape)), None)
                if dtype is None or v.needs - GPUS[gpu].features:
                    continue
                grid = list(param_grid(v))
                params = rng.choice(grid)
                task = make_task(m, gpu, dtype, shape)
                code = m.render(v, params, task)
                n = len(slips.site_lines(kind, code)) if kind != "identifier" else 1
                if n == 0 or slips.apply(code, m.impl, slips.encode(kind, 0), dtype=dtype, shape=shape) is None:
                    continue
                found += 1
                yield name, gpu, dtype, shape, v.tag, params, kind, rng.randrange(slips.SITE)


def _hip_cases(modules, kinds, per_module, rng):
    for name in modules:
        m = REGISTRY[name]
        for kind in kinds:
            if m.impl != "cuda" or not slips.offered(kind, "cuda", "gfx942"):
                continue
            found = 0
            tries = list(m.variants)
            rng.shuffle(tries)
            for v in tries:
                shape = rng.choice(m.shapes)
                dtype = next((d for d in m.dtypes if m.supports(GPUS["MI300X"], d) and v.offered(d)
                              and slips.offered(kind, "cuda", "gfx942", d, shape)), None)
                if found >= per_module or dtype is None or v.needs - GPUS["MI300X"].features:
                    continue
                params = rng.choice(list(param_grid(v)))
                code = m.render(v, params, make_task(m, "MI300X", dtype, shape))
                if slips.apply(code, "cuda", slips.encode(kind, 0), "gfx942", dtype, shape) is None:
                    continue
                found += 1
                yield name, "MI300X", dtype, shape, v.tag, params, kind, rng.randrange(slips.SITE)


def compile_code(m, v, params, task, code):
    if m.impl == "cuda" and task.is_hip:
        return compile_hip(code, task.gpu.arch, f"{m.op}_kernel")
    if m.impl == "cuda":
        return compile_cuda(code, task.gpu.arch, f"{m.op}_kernel")
    return compile_triton(code, m.compile_specs(v, params, task), task.gpu.arch)


def run_case(case):
    name, gpu, dtype, shape, tag, params, kind, site = case
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, gpu, dtype, shape)
    code = m.render(v, params, task)
    hip_arch = task.gpu.arch if task.is_hip else ""
    broken, message = slips.apply(code, m.impl, slips.encode(kind, site), hip_arch, dtype, shape)
    clean = compile_code(m, v, params, task, code)
    r = compile_code(m, v, params, task, broken)
    log = tool_text(r.log)       # as verify --text reads it: clang's header warnings and ptxas's -v lines left out
    # the whole text: from the message's first line to the end of the log (a log over 8000
    # characters keeps its head and tail: then both ends must match)
    start = log.find(message.split("\n")[0])
    got, want = log[start:].strip(), message.strip()
    head, _, tail = got.partition("\n...\n")
    whole = start >= 0 and (got == want or bool(tail) and want.startswith(head) and want.endswith(tail))
    return {"case": [name, gpu, dtype, shape, tag, params, kind, site], "clean_ok": clean.ok,
            "clean_log": clean.log[-300:] if not clean.ok else "", "rejected": not r.ok,
            "first_equal": comparable(first_error(r.log)) == comparable(first_error(message)), "whole_equal": whole,
            "compiler": "triton" if m.impl == "triton" else "hipcc" if hip_arch else "nvcc",
            "got": first_error(r.log), "want": first_error(message), "log": log, "message": message}


def write_fixture(path: Path, rows) -> None:
    """The rejected cases whose unbroken render compiles, each with the compiler's first error
    line and its whole text from the message's first line on (paths normalized)."""
    out = []
    for r in rows:
        if r["rejected"] and r["clean_ok"]:
            name, gpu, dtype, shape, tag, params, kind, site = r["case"]
            log = r["log"]
            start = max(0, log.find(r["log"].split("\n")[0]))
            out.append({"module": name, "gpu": gpu, "dtype": dtype, "shape": dict(shape), "variant": tag,
                        "params": params, "kind": kind, "site": site, "compiler": r["compiler"],
                        "first_error": r["got"], "text": log[start:].strip()})
    path.write_text("[\n" + ",\n".join(json.dumps(c, sort_keys=True) for c in out) + "\n]\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", default="")
    ap.add_argument("--kinds", default=",".join(slips.NAMES))
    ap.add_argument("--per-module", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    ap.add_argument("--compilers", default="nvcc,triton", help="of nvcc, triton, hipcc (CUDA modules on MI300X)")
    ap.add_argument("--fixture", default="", help="write the cases with the compiler's first line and text")
    args = ap.parse_args(argv)
    modules = args.modules.split(",") if args.modules else sorted(REGISTRY)
    kinds = args.kinds.split(",")
    compilers = args.compilers.split(",")
    todo = [c for c in cases(modules, kinds, args.per_module, args.seed)
            if ("triton" if REGISTRY[c[0]].impl == "triton" else "nvcc") in compilers]
    if "hipcc" in compilers:
        todo += list(cases(modules, kinds, args.per_module, args.seed, hip=True))
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run_case, todo, chunksize=1))
    per = defaultdict(lambda: defaultdict(int))
    mods = defaultdict(set)
    impl_mods = defaultdict(set)
    for name in modules:
        impl_mods[REGISTRY[name].impl].add(name)
    bad = []
    for r in rows:
        key = (r["case"][6], r["compiler"])
        p = per[key]
        mods[key].add(r["case"][0])
        p["cases"] += 1
        for k in ("rejected", "first_equal", "whole_equal", "clean_ok"):
            p[k] += r[k]
        if not (r["rejected"] and r["first_equal"] and r["clean_ok"]):
            bad.append(r)
    print(f"{'kind':16} {'compiler':8} {'modules with a site':>20} {'cases':>6} {'rejected':>9} {'1st line =':>10}"
          f" {'text =':>7} {'clean ok':>9}")
    failed = False
    for kind, compiler in sorted(per, key=lambda k: (kinds.index(k[0]), k[1])):
        p = per[kind, compiler]
        total = len(impl_mods["triton" if compiler == "triton" else "cuda"])
        print(f"{kind:16} {compiler:8} {len(mods[kind, compiler]):>12}/{total:<7} {p['cases']:>6} {p['rejected']:>9}"
              f" {p['first_equal']:>10} {p['whole_equal']:>7} {p['clean_ok']:>9}")
        failed |= p["cases"] and not (p["rejected"] == p["first_equal"] == p["clean_ok"] == p["cases"])
    for r in bad[:30]:
        print("\nDISAGREES:", r["case"], "\n  got: ", r["got"], "\n  want:", r["want"],
              "" if r["clean_ok"] else f"\n  the unbroken render does not compile: {r['clean_log']}")
    if args.fixture:
        write_fixture(Path(args.fixture), rows)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
