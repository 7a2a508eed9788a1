"""Fill the Triton shared-memory corpus (kernelstrain/corpus/triton_smem.json) for chosen modules with Triton's own
figure, read where Triton sets it: the `ttg.shared` attribute its shared-memory allocation pass writes in make_llir,
which its driver copies into metadata.shared after the LLVM, PTX / AMDGCN and ptxas stages (Triton 3.9,
backends/{nvidia,amd}/compiler.py; none of those stages writes the attribute). The compile runs Triton's own
pipeline (ttir, ttgir, then make_llir's passes as Triton lists them) and stops at Triton's instrumentation point
right after the allocation pass ("ttgpuir-to-llvmir", triton._instrumentation), skipping the LLVM -O3, PTX and
ptxas / AMDGCN stages (~1.3 s a candidate here instead of ~20-60 s for mla_decode_triton's split_kv).

    nice python3 scripts/sim2_smem_fill.py --validate 60              # the stopped compile against figures already
                                                                     # in the corpus (full compiles), any module
    nice python3 scripts/sim2_smem_fill.py --full 6 --modules M [--base OLD.json]  # candidates of M the corpus
                                          # (or OLD.json, the corpus before a fill) lacks, also compiled in full
                                          # (compilers.compile_triton): the figures compared
    nice python3 scripts/sim2_smem_fill.py --modules M [--jobs 2]     # fill M's missing figures into the corpus

The filled figures are written only where the Triton here is the corpus's (tools.triton); cells of other modules
stay byte for byte.
"""
import argparse
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import corpus  # noqa: E402
from kernelstrain.compilers import _import_triton, compile_triton, launch_specialization, load_triton_source, \
    triton_target  # noqa: E402
from kernelstrain.corpus import build as corpus_build  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402

POINT = "ttgpuir-to-llvmir"     # Triton's instrumentation point right after add_allocate_shared_memory(_nv)


class Figure(Exception):
    """Raised at the instrumentation point, carrying ttg.shared."""


_current = {}


def _install() -> None:
    """Triton's own hooks: the stage inspection hook keeps the module make_llir receives; the instrumentation
    callback runs the passes Triton has added so far on it and stops with the allocated figure."""
    from triton import knobs
    from triton._instrumentation import register_instrumentation
    if _current.get("installed"):
        return

    def hook(backend=None, stages=None, options=None, language=None, capability=None):
        if backend is None:                     # asked for its cache key
            return "sim2-smem-figure", "sim2-smem-figure"
        llir = stages["llir"]

        def keep(src, metadata):
            _current["mod"] = src
            return llir(src, metadata)
        stages["llir"] = keep

    def stop(pm):
        mod = _current["mod"]
        pm.run(mod, "sim2_smem_figure")
        raise Figure(mod.get_int_attr("ttg.shared") or 0)

    knobs.runtime.add_stages_inspection_hook = hook
    for backend in ("nvidia", "amd"):
        register_instrumentation(point=POINT, backend=backend, callback=stop)
    _current["installed"] = True


def figure(code: str, specs: list, arch: str) -> int:
    """The largest ttg.shared over a candidate's kernels (compile_triton's max of metadata.shared)."""
    _install()
    triton, _, ASTSource = _import_triton()
    ns, smem = load_triton_source(code), 0
    for s in specs:
        signature, constexprs, aligned = launch_specialization(s)
        src = ASTSource(fn=ns[s.name], signature=signature, constexprs=constexprs, attrs=aligned)
        try:
            triton.compile(src, target=triton_target(arch), options={"num_warps": s.num_warps, "num_stages": s.num_stages})
        except Figure as e:
            smem = max(smem, int(e.args[0]))
        else:
            raise RuntimeError(f"{s.name} on {arch}: Triton finished without reaching {POINT}")
    return smem


def _picklable(key, candidate) -> tuple:
    """What a worker needs to rebuild a candidate (variants may hold lambdas, which do not pickle)."""
    task, v, params, code = candidate
    return key, task.gpu.name, task.dtype, dict(task.shape), v.tag, params, code


def _specs(item) -> list:
    from kernelstrain.tasks import make_task
    key, gpu, dtype, shape, tag, params, _ = item
    m = REGISTRY[key[0]]
    return m.compile_specs(m.variant(tag), params, make_task(m, gpu, dtype, shape))


def _job(item):
    key, code, t = item[0], item[-1], time.monotonic()
    try:
        return key, figure(code, _specs(item), key[1]), None, time.monotonic() - t
    except Exception as e:      # what Triton said, for the report
        return key, None, f"{type(e).__name__}: {str(e)[-300:]}", time.monotonic() - t


def _full(item):
    # a process that ran the stopped compile keeps Triton's hooks: its compile_triton would stop too, and cache that
    if _current.get("installed"):
        raise RuntimeError("a full compile in a process with the stop hooks installed")
    r = compile_triton(item[-1], _specs(item), item[0][1])
    return item[0], r.smem_bytes if r.ok else None


def _cells() -> dict:
    return corpus.load_smem()["cells"]


def validate(n: int, seed: int, modules: set, jobs: int) -> int:
    """The stopped compile of n candidates whose full-compile figure the corpus holds: every figure equal."""
    cells = _cells()
    todo = corpus_build.triton_smem_candidates(modules=modules)
    have = sorted(k for k in todo if k[2] in cells.get(f"{k[0]}|{k[1]}", {}))
    pick = random.Random(seed).sample(have, min(n, len(have)))
    bad = 0
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for key, shared, error, dt in pool.map(_job, [_picklable(k, todo[k]) for k in pick]):
            want = cells[f"{key[0]}|{key[1]}"][key[2]]
            same = shared == want
            bad += not same
            print(f"{'same' if same else 'DIFFERENT'} {key[0]} {key[1]} {todo[key][1].tag} {todo[key][2]}: "
                  f"stopped {shared} corpus {want} ({dt:.1f} s){' ' + error if error else ''}", flush=True)
    print(f"validate: {len(pick) - bad} of {len(pick)} equal")
    return 1 if bad else 0


def missing(modules: set, cells: dict | None = None) -> dict:
    """The candidates of `modules` whose figure `cells` (the corpus's) lacks."""
    cells = _cells() if cells is None else cells
    todo = corpus_build.triton_smem_candidates(modules=modules)
    return {k: todo[k] for k in sorted(todo) if k[2] not in cells.get(f"{k[0]}|{k[1]}", {})}


def full(n: int, seed: int, modules: set, jobs: int, base: str) -> int:
    """n of the candidates the corpus `base` lacked (before a fill) compiled in full (compile_triton): equal to the
    stopped compile's figure and to the corpus's where it holds one."""
    todo, cells = missing(modules, json.loads(Path(base).read_text())["cells"] if base else None), _cells()
    pick = random.Random(seed).sample(sorted(todo), min(n, len(todo)))
    bad = 0
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        stopped = {k: s for k, s, _, _ in pool.map(_job, [_picklable(k, todo[k]) for k in pick])}
    with ProcessPoolExecutor(max_workers=jobs) as pool:         # fresh processes: no stop hooks
        for key, shared in pool.map(_full, [_picklable(k, todo[k]) for k in pick]):
            held = cells.get(f"{key[0]}|{key[1]}", {}).get(key[2], stopped[key])
            same = shared is not None and shared == stopped[key] == held
            bad += not same
            print(f"{'same' if same else 'DIFFERENT'} {key[0]} {key[1]} {todo[key][1].tag} {todo[key][2]}: full "
                  f"{shared} stopped {stopped[key]} corpus {held}", flush=True)
    print(f"full: {len(pick) - bad} of {len(pick)} equal")
    return 1 if bad else 0


def fill(modules: set, jobs: int, out: Path) -> int:
    import triton
    from triton_smem_corpus import write
    data = corpus.load_smem()
    if data["tools"].get("triton") != triton.__version__:
        print(f"the corpus is Triton {data['tools'].get('triton')}'s, this is {triton.__version__}", file=sys.stderr)
        return 2
    todo = missing(modules)
    print(f"{len(todo)} figures to fill ({sorted(modules)}, Triton {triton.__version__})", flush=True)
    cells, started, failed = data["cells"], time.monotonic(), []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, (key, shared, error, _) in enumerate(pool.map(_job, [_picklable(k, c) for k, c in todo.items()], chunksize=1), 1):
            if shared is None:
                failed.append(f"{key}: {error}")
                continue
            cells.setdefault(f"{key[0]}|{key[1]}", {})[key[2]] = shared
            if i % 50 == 0:
                print(f"  {i}/{len(todo)} in {time.monotonic() - started:.0f} s", flush=True)
                write(out, cells, data["tools"])
    write(out, cells, data["tools"])
    print(f"wrote {out}: {len(todo) - len(failed)} figures filled in {time.monotonic() - started:.0f} s; "
          f"{len(failed)} failed")
    for line in failed:
        print("  " + line)
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modules", default="")
    ap.add_argument("--validate", type=int, default=0)
    ap.add_argument("--full", type=int, default=0)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--base", default="", help="--full: the corpus before the fill (its missing candidates)")
    ap.add_argument("--out", default=str(corpus.SMEM_PATH))
    args = ap.parse_args(argv)
    modules = set(filter(None, args.modules.split(",")))
    if args.validate:
        return validate(args.validate, args.seed, modules, args.jobs)
    if args.full:
        return full(args.full, args.seed, modules, args.jobs, args.base)
    if not modules:
        print("--modules names the modules to fill", file=sys.stderr)
        return 2
    return fill(modules, args.jobs, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
