"""Command line: argparse verbs, one library call each. Errors print one line and exit 2.

Each command's help is the docstring of its function below.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from . import __version__
from .errors import UsageError
from .profiles import DEFAULT_PROFILE, load_profile


def cmd_generate(a) -> int:
    """Generate the dataset of a profile: episodes, SFT chats and steps, holdout, stats, card."""
    from .generate import Shard, default_workers, generate
    profile = load_profile(a.config)
    shard = Shard.parse(a.shard) if a.shard else None
    stats = generate(profile, a.seed, Path(a.out), episodes=a.episodes, workers=a.workers or default_workers(),
                     shard=shard, force=a.force, progress=not a.quiet, resume=a.resume)
    if not a.quiet:
        print(f"wrote {stats['episodes']:,} episodes, {stats['steps']:,} steps to {a.out}")
    return 0


def cmd_stats(a) -> int:
    """Print a dataset's summary (from stats.json); --json prints stats.json itself."""
    from .stats import summary
    from .validate import read_stats
    stats = read_stats(Path(a.data))
    print(json.dumps(stats, indent=2) if a.json else summary(stats))
    return 0


def cmd_holdout(a) -> int:
    """Write tasks_holdout.jsonl: the held-out task combos of a profile, deterministically."""
    from .holdout import write_holdout
    from .plan import make_plan
    if not 0.0 <= a.frac < 1.0:
        raise UsageError(f"--frac must be in [0, 1), got {a.frac}")
    profile = load_profile(a.config)
    plan = make_plan(profile, 0, holdout_frac=a.frac, holdout_seed=a.seed)
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    summary = write_holdout(plan, out)
    print(f"{summary['rows']} held-out tasks of {len(plan.train) + len(plan.holdout)} combos -> {out / 'tasks_holdout.jsonl'}")
    return 0


def cmd_validate(a) -> int:
    """Check every file of a dataset against the schema and invariants; exit 1 on findings."""
    from .validate import validate
    problems = validate(Path(a.data), limit=a.max_problems)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found" if problems else "ok: no problems found")
    return 1 if problems else 0


def cmd_verify(a) -> int:
    """Compile a stratified sample of candidates with real compilers and compare statuses."""
    from .verify import verify
    return verify(Path(a.data), sample=a.sample, jobs=a.jobs, seed=a.seed, report=a.report)


def cmd_gpu_check(a) -> int:
    """Run a stratified sample of a dataset's candidates on the local GPU: labels, times, rankings."""
    from .gpucheck import gpu_check
    return gpu_check(Path(a.data), sample=a.sample, jobs=a.jobs, report=Path(a.report) if a.report else None,
                     seed=a.seed, build_dir=Path(a.build_dir) if a.build_dir else None, budget_s=a.budget,
                     compile_only=a.compile_only)


def cmd_ops(a) -> int:
    """List the registered op modules: op, impl, family, dims, dtypes, variants, arch needs."""
    from .ops import REGISTRY
    rows = []
    for m in REGISTRY.values():
        rows.append({"module": m.name, "op": m.op, "impl": m.impl, "family": m.family, "title": m.title,
                     "dims": m.dims, "dtypes": list(m.dtypes), "vendors": list(m.vendors),
                     "variants": [{"tag": v.tag, "title": v.title, "params": {p.name: list(p.values) for p in v.params},
                                   "needs": sorted(v.needs)} for v in m.variants]})
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        ladder = " -> ".join(v["tag"] + (f"[{','.join(v['needs'])}]" if v["needs"] else "") for v in r["variants"])
        dims = ", ".join(f"{k} ({v})" for k, v in r["dims"].items())
        print(f"{r['module']:28} {r['family']:12} {'/'.join(r['dtypes']):16} {dims}\n    {ladder}")
    ops = {r["op"] for r in rows}
    print(f"{len(rows)} modules, {len(ops)} ops")
    return 0


def cmd_sim(a) -> int:
    """Simulate a task: FLOPs, bytes, roofline floor, baseline and best reachable time."""
    from .ops import REGISTRY
    from .sim import roofline_floor_ms, simulate
    from .tasks import best_config, make_task
    name = f"{a.op}_{a.impl}"
    if name not in REGISTRY:
        raise UsageError(f"no op module {name!r} (see `kernelstrain ops`)")
    m = REGISTRY[name]
    try:
        shape = {k: int(v) for k, v in (kv.split("=") for kv in a.shape.split(","))}
    except ValueError:
        raise UsageError(f"--shape must look like T=4096,D=4096, got {a.shape!r}") from None
    try:
        task = make_task(m, a.gpu, a.dtype, shape)
    except (KeyError, ValueError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    if not m.supports(task.gpu, a.dtype):
        raise UsageError(f"{name} does not run {a.dtype} on {a.gpu}")
    cost = m.cost(task)
    base = simulate(m, m.variants[0], m.variants[0].defaults(), task)
    best_ms, variant, params = best_config(m, task)
    out = {"flops": cost.flops, "bytes": cost.bytes,
           "floor_ms": round(roofline_floor_ms(m, task, variant.path), 6),
           "baseline_ms": round(base.time_ms, 6), "best_ms": round(best_ms, 6),
           "best_variant": variant.tag, "best_params": params}
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:13} {v}")
    return 0


def cmd_merge(a) -> int:
    """Merge shard directories (all N of one run) into the single-run dataset."""
    from .merge import merge
    merge([Path(d) for d in a.dirs], Path(a.out), force=a.force)
    return 0


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be a non-negative integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be a non-negative integer")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="kernelstrain", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"kernelstrain {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def add(name, fn):
        sp = sub.add_parser(name, help=fn.__doc__.splitlines()[0], description=fn.__doc__)
        sp.set_defaults(func=fn)
        return sp

    config = {"default": str(DEFAULT_PROFILE), "help": "profile TOML (default: the kernelstrain profile)"}
    g = add("generate", cmd_generate)
    g.add_argument("--seed", type=_seed, required=True)
    g.add_argument("--out", required=True, help="output directory")
    g.add_argument("--config", **config)
    g.add_argument("--episodes", type=_count, help="first N episodes of the plan (a prefix of the full run)")
    g.add_argument("--workers", type=_count, default=0, help="worker processes (default: all cores)")
    g.add_argument("--shard", help="I/N: write the I-th of N contiguous slices (merge them with `merge`)")
    g.add_argument("--force", action="store_true", help="overwrite a non-empty output directory")
    g.add_argument("--resume", action="store_true", help="finish an interrupted run of the same command")
    g.add_argument("--quiet", action="store_true", help="no progress or summary output")

    s = add("stats", cmd_stats)
    s.add_argument("data")
    s.add_argument("--json", action="store_true")

    h = add("holdout", cmd_holdout)
    h.add_argument("--frac", type=float, default=0.08)
    h.add_argument("--seed", type=_seed, default=0)
    h.add_argument("--config", **config)
    h.add_argument("--out", default="data")

    v = add("validate", cmd_validate)
    v.add_argument("data")
    v.add_argument("--max-problems", type=_count, default=50)

    vf = add("verify", cmd_verify)
    vf.add_argument("data")
    vf.add_argument("--sample", type=_count, default=200)
    vf.add_argument("--jobs", type=_count, default=0, help="parallel compiles (default: all cores)")
    vf.add_argument("--seed", type=_seed, default=0)
    vf.add_argument("--report", help="also write the report as JSON to this file")

    gc = add("gpu-check", cmd_gpu_check)
    gc.add_argument("data")
    gc.add_argument("--sample", type=_count, default=300, help="candidates to run (about; spread over modules)")
    gc.add_argument("--jobs", type=_count, default=0, help="parallel builds and check workers (default: all cores)")
    gc.add_argument("--report", help="also write the report and every row as JSON to this file")
    gc.add_argument("--seed", type=_seed, default=0)
    gc.add_argument("--build-dir", help="build cache (default: ~/.cache/kernelstrain/gpu-check)")
    gc.add_argument("--budget", type=float, default=1800.0, help="seconds after which no further case starts")
    gc.add_argument("--compile-only", action="store_true", help="sample and build only (no GPU needed)")

    o = add("ops", cmd_ops)
    o.add_argument("--json", action="store_true")

    si = add("sim", cmd_sim)
    si.add_argument("--gpu", required=True)
    si.add_argument("--op", required=True)
    si.add_argument("--impl", required=True, choices=("cuda", "triton"))
    si.add_argument("--dtype", required=True)
    si.add_argument("--shape", required=True, help="dims, e.g. T=4096,D=4096")
    si.add_argument("--json", action="store_true")

    mg = add("merge", cmd_merge)
    mg.add_argument("dirs", nargs="+")
    mg.add_argument("--out", required=True)
    mg.add_argument("--force", action="store_true")
    return p


def _terminate(signum, frame):
    raise KeyboardInterrupt  # a kill (SIGTERM) checkpoints and cleans up like Ctrl-C


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except UsageError as e:
        print(f"kernelstrain: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelstrain: interrupted; partial files are hidden (.*.tmp); rerun with --resume to finish",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        print(f"kernelstrain: error: {e.strerror or e}{': ' + e.filename if getattr(e, 'filename', None) else ''}",
              file=sys.stderr)
        return 2
