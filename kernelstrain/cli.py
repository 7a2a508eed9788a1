"""Command line: argparse verbs, one library call each. Exit 0 ok, 1 findings, 2 bad input
(one line), 3 internal error (one line, from the guard in main).

Each command's help is the docstring of its function below.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from pathlib import Path

from . import progress
from .version import __version__
from .errors import REPORT_HINT, UsageError
from .profiles import DEFAULT_PROFILE, load_profile
from .safety import OutputLock, ReadSnapshot, row_guard, terminal_text


def cmd_generate(a) -> int:
    """Generate the dataset of a profile: episodes, SFT chats and steps, holdout, stats, card."""
    from .generate import Shard, generate
    profile = load_profile(a.config)
    if a.tasks:
        from .fused.tasks import with_tasks_dir
        profile = with_tasks_dir(profile, Path(a.tasks))
    shard = Shard.parse(a.shard) if a.shard else None
    stats = generate(profile, a.seed, Path(a.out), episodes=a.episodes, workers=a.workers,
                     shard=shard, force=a.force, progress=not a.quiet, resume=a.resume)
    if not a.quiet:
        print(f"wrote {stats['episodes']:,} episodes, {stats['steps']:,} steps to {a.out}")
    from .generate import qa_failures
    note = qa_failures(Path(a.out))
    if note:
        print(f"kernelstrain: warning: {note}", file=sys.stderr)
    return 0


def cmd_stats(a) -> int:
    """Print a dataset's summary (from stats.json); --json prints stats.json itself."""
    from .stats import summary
    from .fused.dataset import fused_summary, is_fused_dir, read_fused_stats
    from .reading import read_stats
    fused = is_fused_dir(Path(a.data))
    stats = read_fused_stats(Path(a.data)) if fused else read_stats(Path(a.data))
    with row_guard(f"{Path(a.data) / 'stats.json'}"):     # a malformed stats.json is bad input, not a bug
        text = json.dumps(stats, indent=2) if a.json else terminal_text((fused_summary if fused else summary)(stats))
    print(text)
    return 0


def cmd_holdout(a) -> int:
    """Write the profile's holdout splits (tasks_holdout.jsonl, ...), the ones generate applies."""
    from .holdout import holdout_command
    summaries, combos, targets = holdout_command(a.config, a.frac, a.seed, Path(a.out), force=a.force)
    for split, path in targets:
        print(f"{split}: {summaries[path.name]['rows']} held-out tasks of {combos} combos -> {path}")
    return 0


def cmd_validate(a) -> int:
    """Check every file of a dataset against the schema and invariants; exit 1 on findings."""
    from .dataset import validate
    from .generate import check_workers
    snapshot = ReadSnapshot(Path(a.data))       # a run swapping a new dataset in must not be half-read
    problems = validate(Path(a.data), limit=a.max_problems, workers=check_workers(a.workers))
    snapshot.check()
    for p in problems:
        print(terminal_text(p))
    for note in problems.notes:
        print(terminal_text(note))
    shown = f" (first {len(problems)} shown; --max-problems raises it)" if problems.total > len(problems) else ""
    print(f"{problems.total} problem{'s' if problems.total != 1 else ''} found{shown}" if problems
          else "ok: no problems found")
    return 1 if problems else 0


def cmd_qa(a) -> int:
    """Check that a dataset teaches the true loop (honest keeps, recovery, labels, limits); exit 1 on a failed check."""
    from .dataset import Dataset
    from .qa import dumps_qa, summary
    snapshot = ReadSnapshot(Path(a.data))
    result = Dataset(a.data).qa()
    snapshot.check()
    print(dumps_qa(result) if a.json else terminal_text(summary(result)), end="\n" if not a.json else "")
    return 0 if result["pass"] else 1


def cmd_verify(a) -> int:
    """Compile a stratified sample of candidates with real compilers and compare statuses."""
    from .verify import verify
    return verify(Path(a.data), sample=a.sample, jobs=a.jobs, seed=a.seed, report=a.report, force=a.force,
                  text=a.text, trust=a.trust_dataset)


def cmd_gpu_check(a) -> int:
    """Run a stratified sample of a dataset's candidates on the local GPU: labels, times, rankings."""
    from .gpucheck import gpu_check
    return gpu_check(Path(a.data), sample=a.sample, jobs=a.jobs, report=Path(a.report) if a.report else None,
                     seed=a.seed, build_dir=Path(a.build_dir) if a.build_dir else None, budget_s=a.budget,
                     compile_only=a.compile_only, trust=a.trust_dataset)


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
    from .shapes import sim_report
    out = sim_report(a.gpu, a.op, a.impl, a.dtype, a.shape)
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


def cmd_report(a) -> int:
    """Write one self-contained HTML report of a dataset: charts and an episode browser."""
    from .report import write_report
    out = Path(a.out) if a.out else Path(a.data) / "report.html"
    r = write_report(Path(a.data), out, per_module=a.per_module)
    print(f"wrote {out} ({r['bytes'] / 1e6:.1f} MB; {r['episodes']:,} episodes, {r['steps']:,} steps; "
          f"{r['browser_episodes']} episodes in the browser) in {r['seconds']} s")
    return 0


def cmd_show(a) -> int:
    """Show one episode in the terminal: its steps, a step's feedback and its diff against the best."""
    from .show import show
    return show(Path(a.data), a.episode_id, step=a.step, colour=sys.stdout.isatty())


def cmd_tasks(a) -> int:
    """Fused-operator tasks in KernelBench form: `tasks fused` composes candidates (standard
    library only); `tasks filter` runs them with PyTorch (extra [exec]) and keeps the passing ones."""
    from .fused.dataset import generate_fused
    if a.tasks_command == "fused":
        stats = generate_fused(a.count, a.seed, Path(a.out), spare=a.spare, force=a.force)
        if not a.quiet:
            print(f"wrote {stats['rows']:,} candidates for {a.count:,} tasks to {a.out}; "
                  f"next: kernelstrain tasks filter {a.out}")
        return 0
    from .fused.filter import filter_tasks, reason_table
    report = filter_tasks(Path(a.data), jobs=a.jobs, device=a.device, min_ms=a.min_ms, max_ms=a.max_ms,
                          kernelbench=Path(a.kernelbench) if a.kernelbench else None, count=a.count or None,
                          restart=a.restart, reps=a.reps, progress=not a.quiet and sys.stderr.isatty(),
                          trust=a.trust_dataset)
    print(f"{report['selected']:,} tasks kept of {report['evaluated']:,} candidates run on {report['device']} "
          f"({report['seconds_per_task']} s per task run)")
    print(reason_table(report))
    if report["selected"] < report["count"]:
        print(f"kernelstrain: only {report['selected']:,} of {report['count']:,} candidates passed", file=sys.stderr)
        return 1
    return 0


def cmd_workdir(a) -> int:
    """Write an agent workspace for one task: model.py, model_new.py (ModelNew), kernels/, the
    PyTorch binding, build.py, verify.py, profile.py and SKILL.md, runnable on a GPU machine."""
    from .workdir import build_workdir
    subject, files = build_workdir(Path(a.data), a.task_id, Path(a.out), step=a.step, episode=a.episode,
                                   force=a.force)
    print(f"wrote {len(files)} files for {subject.task_id} ({subject.kind}) to {a.out}")
    return 0


def cmd_export(a) -> int:
    """Export a dataset (and fused tasks) as KernelBench problems and solutions, with an index."""
    from .export import export_kernelbench
    index = export_kernelbench([Path(d) for d in a.data], Path(a.out), best_only=a.best_only,
                               statuses=tuple(a.status.split(",")), force=a.force)
    print(f"wrote {len(index['problems']):,} problems and {len(index['solutions']):,} solutions to {a.out}")
    return 0


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be a non-negative integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be a non-negative integer")
    return value


def _count(text: str, least: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text} must be >= {least}")
    return value


def _positive(text: str) -> int:
    return _count(text, 1)


def _first_paragraph(doc: str) -> str:
    """A docstring's first paragraph on one line: a verb's whole summary, never cut at a line break."""
    return " ".join(doc.split("\n\n")[0].split())


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="kernelstrain", description=_first_paragraph(__doc__))
    p.add_argument("--version", action="version", version=f"kernelstrain {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def add(name, fn):
        sp = sub.add_parser(name, help=_first_paragraph(fn.__doc__), description=fn.__doc__)
        sp.set_defaults(func=fn)
        return sp

    trust = {"action": "store_true", "help": "execute the dataset's code even where it is not what its recipe renders "
         "(by default such rows are refused: a shared dataset's code runs only when you say so)"}
    config = {"default": str(DEFAULT_PROFILE), "help": "profile TOML (default: the kernelstrain profile)"}
    quiet = {"action": "store_true", "help": "no progress on stderr (shown only when stderr is a terminal)"}
    g = add("generate", cmd_generate)
    g.add_argument("--seed", type=_seed, required=True)
    g.add_argument("--out", required=True, help="output directory")
    g.add_argument("--config", **config)
    g.add_argument("--episodes", type=_positive, help="first N episodes of the plan (a prefix of the full run)")
    g.add_argument("--workers", type=_positive, help="worker processes (default: all cores; capped at them)")
    g.add_argument("--shard", help="I/N: write the I-th of N contiguous slices (merge them with `merge`)")
    g.add_argument("--force", action="store_true", help="overwrite a non-empty output directory")
    g.add_argument("--resume", action="store_true", help="finish an interrupted run of the same command")
    g.add_argument("--quiet", action="store_true", help="no progress or summary output")
    g.add_argument("--tasks", help="a fused profile: take the programs from this `tasks filter` output directory")

    s = add("stats", cmd_stats)
    s.add_argument("data")
    s.add_argument("--json", action="store_true")

    h = add("holdout", cmd_holdout)
    h.add_argument("--frac", type=float, help="combo split's fraction of the task combos (default: the profile's "
                   "[holdout] frac, the one generate applies)")
    h.add_argument("--seed", type=_seed, help="holdout seed (default: the profile's [holdout] seed)")
    h.add_argument("--config", **config)
    h.add_argument("--out", default="data")
    h.add_argument("--force", action="store_true", help="replace an existing tasks_holdout.jsonl")

    v = add("validate", cmd_validate)
    v.add_argument("data")
    v.add_argument("--max-problems", type=_positive, default=50, help="stop listing after N problems (>= 1)")
    v.add_argument("--quiet", **quiet)
    v.add_argument("--workers", type=_positive, help="processes (default: all cores; capped at them)")

    q = add("qa", cmd_qa)
    q.add_argument("data")
    q.add_argument("--json", action="store_true", help="print qa.json's object")
    q.add_argument("--quiet", **quiet)

    vf = add("verify", cmd_verify)
    vf.add_argument("data")
    vf.add_argument("--sample", type=_positive, default=200)
    vf.add_argument("--jobs", type=_positive, help="parallel compiles (default: all cores)")
    vf.add_argument("--seed", type=_seed, default=0)
    vf.add_argument("--report", help="also write the report as JSON to this file")
    vf.add_argument("--force", action="store_true", help="replace an existing --report file")
    vf.add_argument("--quiet", **quiet)
    vf.add_argument("--text", action="store_true",
                    help="also compare each compile error's whole recorded text with the compiler's")
    vf.add_argument("--trust-dataset", **trust)

    gc = add("gpu-check", cmd_gpu_check)
    gc.add_argument("data")
    gc.add_argument("--sample", type=_count, default=300, help="candidates to run (about; spread over modules)")
    gc.add_argument("--jobs", type=_count, default=0, help="parallel builds and check workers (default: all cores)")
    gc.add_argument("--report", help="also write the report and every row as JSON to this file")
    gc.add_argument("--seed", type=_seed, default=0)
    gc.add_argument("--build-dir", help="build cache (default: ~/.cache/kernelstrain/gpu-check)")
    gc.add_argument("--budget", type=float, default=1800.0, help="seconds after which no further case starts")
    gc.add_argument("--compile-only", action="store_true", help="sample and build only (no GPU needed)")
    gc.add_argument("--quiet", **quiet)
    gc.add_argument("--trust-dataset", **trust)

    o = add("ops", cmd_ops)
    o.add_argument("--json", action="store_true")

    si = add("sim", cmd_sim)
    si.add_argument("--gpu", required=True)
    si.add_argument("--op", required=True)
    si.add_argument("--impl", required=True, choices=("cuda", "triton"))
    si.add_argument("--dtype", required=True)
    si.add_argument("--shape", required=True, help="dims, e.g. T=4096,D=4096")
    si.add_argument("--json", action="store_true")

    rp = add("report", cmd_report)
    rp.add_argument("data")
    rp.add_argument("--out", help="the HTML file to write (default: DATA/report.html)")
    rp.add_argument("--per-module", type=_positive, default=3, help="episodes of each module in the browser (default 3)")

    sh = add("show", cmd_show)
    sh.add_argument("data")
    sh.add_argument("episode_id")
    sh.add_argument("--step", type=_count, help="the step whose feedback and diff to show (default: the best step)")

    tk = add("tasks", cmd_tasks)
    tsub = tk.add_subparsers(dest="tasks_command", required=True, parser_class=Parser)
    tf = tsub.add_parser("fused", help="compose fused-operator candidates (KernelBench form)")
    tf.add_argument("--count", type=_count, required=True, help="tasks wanted after filtering")
    tf.add_argument("--seed", type=_seed, required=True)
    tf.add_argument("--out", required=True, help="output directory")
    tf.add_argument("--spare", type=float, default=0.3, help="extra candidates, a fraction of --count (default 0.3)")
    tf.add_argument("--force", action="store_true", help="overwrite a non-empty output directory")
    tf.add_argument("--quiet", action="store_true")
    tl = tsub.add_parser("filter", help="run the candidates with PyTorch; keep --count passing tasks")
    tl.add_argument("data")
    tl.add_argument("--jobs", type=_count, default=1, help="worker processes (default 1)")
    tl.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    tl.add_argument("--min-ms", type=float, default=0.005, help="GPU eager runtime lower bound, ms")
    tl.add_argument("--max-ms", type=float, default=50.0, help="GPU eager runtime upper bound, ms")
    tl.add_argument("--kernelbench", help="KernelBench checkout (or its problem folder) to check similarity against")
    tl.add_argument("--count", type=_count, default=0, help="keep this many tasks (default: the count of `tasks fused`)")
    tl.add_argument("--reps", type=_count, default=3, help="timed runs per program (median)")
    tl.add_argument("--restart", action="store_true", help="ignore filter_progress.jsonl and start over")
    tl.add_argument("--trust-dataset", **trust)
    tl.add_argument("--quiet", action="store_true")

    wd = add("workdir", cmd_workdir)
    wd.add_argument("task_id", help="a task id (or an episode id) of the dataset, or a fused task id")
    wd.add_argument("--data", required=True, help="a dataset or fused-task directory")
    wd.add_argument("--out", required=True, help="the workspace directory to write")
    wd.add_argument("--step", type=_count, help="start from step N of the episode (default: the baseline)")
    wd.add_argument("--episode", help="the episode of the task to take the step from (default: its first)")
    wd.add_argument("--force", action="store_true", help="replace a non-empty --out")

    ex = add("export", cmd_export)
    ex.add_argument("format", choices=("kernelbench",))
    ex.add_argument("data", nargs="+", help="dataset and/or fused-task directories")
    ex.add_argument("--out", required=True)
    ex.add_argument("--best-only", action="store_true", help="one solution per episode: its best candidate")
    ex.add_argument("--status", default="ok", help="statuses of the steps to export, comma-separated "
                    "(default ok; e.g. ok,wrong_result)")
    ex.add_argument("--force", action="store_true", help="replace a non-empty --out")

    mg = add("merge", cmd_merge)
    mg.add_argument("dirs", nargs="+")
    mg.add_argument("--out", required=True)
    mg.add_argument("--force", action="store_true")
    mg.add_argument("--quiet", **quiet)
    return p


def outputs(a) -> list[Path]:
    """The outputs a command writes (each locked against a second writer while it runs)."""
    if a.command in ("generate", "merge", "workdir", "export", "holdout"):
        return [Path(a.out)]
    if a.command == "tasks":
        return [Path(a.out) if a.tasks_command == "fused" else Path(a.data)]   # filter writes its progress there
    if a.command == "report":
        return [Path(a.out) if a.out else Path(a.data) / "report.html"]
    if a.command in ("verify", "gpu-check") and a.report:
        return [Path(a.report)]
    return []


def _terminate(signum, frame):
    raise KeyboardInterrupt  # a kill (SIGTERM) checkpoints and cleans up like Ctrl-C


def _one_line(text: str) -> str:
    """An error's text on one line, dataset text in it escaped for the terminal."""
    return terminal_text(" ".join(str(text).split()))


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit 0 ok, 1 findings, 2 bad input or usage, 3 internal error."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    command = None
    try:
        args = build_parser().parse_args(argv)
        command = args.command
        with progress.quiet(getattr(args, "quiet", False)), contextlib.ExitStack() as locks:
            for out in outputs(args):
                # a report file's missing folder is verify's / gpu-check's error to name, not to make
                locks.enter_context(OutputLock(out, " ".join(sys.argv[1:] if argv is None else argv),
                                               make_parents=command not in ("verify", "gpu-check")))
            return args.func(args)
    except UsageError as e:
        print(f"kernelstrain: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        tail = ("the partial run is kept (hidden); rerun the same command with --resume to finish it"
                if command == "generate" else "nothing was written")
        print(f"kernelstrain: interrupted; {tail}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"kernelstrain: error: {_one_line(e.strerror or e)}{where}", file=sys.stderr)
        return 2
    except Exception as e:   # the guard: never a traceback, and never confused with findings (1)
        print(f"kernelstrain: internal error: {type(e).__name__}: {_one_line(e)} ({REPORT_HINT})", file=sys.stderr)
        return 3
