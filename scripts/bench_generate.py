"""Generation and validation throughput against the serialization floor, with targets.

    python scripts/bench_generate.py [--config kernelstrain kernelinfer|P.toml ...] [--episodes 2000 [N ...]]
                                     [--max-ratio 2.0] [--min-speedup 1.8] [--max-rss-mb 200]
                                     [--max-full-minutes 6] [--by wall|cpu] [--allow-busy] [--store] [--phases]

For each profile given (default: both bundled layouts' profiles, kernelstrain and
kernelinfer), runs `generate` for a fixed number of episodes (--episodes: one count for every
profile, or one a profile in --config's order; a profile with fewer runs all of its own) with
1 and with 2 workers, then `validate` (1 and 2 workers) on the 1-worker output, each in a
fresh process (wall time, CPU time of the process and of its children apart, peak RSS), and
measures the serialization floor: the time (wall and CPU) to JSON-encode and write the same
rows already held in memory. Prints episodes/s, MB/s, CPU seconds, peak RSS, then each target
of issue 32's Done-when against its bound, met or missed:

- the 1- and 2-worker outputs are the same bytes (always judged), and validate finds nothing in them;
- ratio generate/floor (1 worker) <= --max-ratio (the issue's figure: the default profile, 2,000 episodes);
- 2 workers >= --min-speedup times faster than one;
- validate takes no longer than generate on the same dataset, with 1 worker each and with 2 each;
- a profile's whole run (every one of its episodes benched: kernelinfer's 1,899 sessions under the
  default --episodes) on 2 workers within --max-full-minutes; with fewer episodes, "not judged", and
  the whole run's time projected from the benched share (generate's fixed set-up counted as if per episode:
  an upper bound);
- every run's peak RSS <= --max-rss-mb.

Exits 1 when a target is missed, naming each with its profile. `--by wall` (default) judges wall
times, which need a machine that is otherwise idle: it refuses (exit 2, before any run) where
fewer than 1.5 cores are idle by the 1-minute load average (the 2-worker run would time the
other load), unless --allow-busy. `--by cpu`, for a busy machine, judges CPU seconds: the ratio is
generate's CPU over the floor's, validate's CPU is compared with generate's, and the 2-worker
speedup (and the whole run's 2-worker minutes) are the bound the 2-worker run's CPU split allows, the 1-worker run's CPU over (parent's CPU + the
workers' CPU / 2): the parent's own work (setup, writing, QA, card) counted as if it never
overlapped the workers', so the real speedup on two idle cores is at least this.
The held-out solutions' store (kernelstrain/solution_store.py) is off in every run (each
searches its own, as a first run does: the cold figures); `--store` keeps the user's and fills it
first (an untimed `generate --episodes 1`, which searches every held-out task's solution), so every
timed run reads the solutions from it (the warm figures, as after a first run of the package). `--phases` adds, for each profile, the CPU seconds of each phase of a
1-worker run of the same episodes (scripts/generate_phases.py, in a fresh process): where the
time goes, for the ratio's sake.
This is a script, not a test: no timed test asserts speed, and it refuses to time anything (exit 2)
under CI (any of CI_MARKERS set to a true value, as CI services set them), where shared runners
make its figures noise, and inside a test run (PYTEST_CURRENT_TEST, tox, nox, or the pytest module
loaded in its process), where a test would be timing it: main refuses before any run, and so does
each timed run itself (`run`, the floor's child), whoever calls it.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN = """
import json, resource, sys, time
from kernelstrain.cli import main
t = time.perf_counter()
code = main(sys.argv[1:])
wall = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
parent, children = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
print(json.dumps({"code": code, "wall": wall, "cpu": parent + children, "parent_cpu": parent, "children_cpu": children,
                  "rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}))
"""


def run(args: list, env: dict | None = None) -> dict:
    """One kernelstrain command in a fresh process: its exit code, wall and CPU seconds, peak RSS."""
    guard()
    r = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(args[:1])} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def generate(config: str, episodes: int, workers: int, out: Path, env: dict) -> dict:
    r = run(["generate", "--seed", "0", "--config", config, "--out", str(out), "--episodes", str(episodes),
             "--workers", str(workers), "--quiet"], env)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    r["mb"] = sum(p.stat().st_size for p in files) / 1e6
    r["digest"] = digest(out, files)
    return r


def digest(out: Path, files: list) -> str:
    """sha256 of each file's relative path and bytes, in order, read in chunks: every run is a
    child of this process, and a child's ru_maxrss starts at its parent's peak RSS (it survives
    fork and exec), so whatever this process ever holds would count as the runs' peak."""
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(out).as_posix().encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def phases(config: str, episodes: int, env: dict | None) -> str:
    """scripts/generate_phases.py's table of one 1-worker run, in a fresh process."""
    args = [sys.executable, str(ROOT / "scripts" / "generate_phases.py"), "--config", config, "--episodes", str(episodes)]
    if env is None:
        args.append("--store")
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"bench: generate_phases {config} failed:\n{r.stderr[-2000:]}")
    return r.stdout.rstrip()


def serialization_floor(config: str, episodes: int, out: Path) -> dict:
    """Seconds (wall and CPU) to json-encode and write rows that are already built in memory:
    every row generate streams (the layout's rows of each episode: episode, multi-turn, step and
    prompt-completion rows, or session and chat-window rows)."""
    from kernelstrain.episodes import dumps
    from kernelstrain.layouts import LAYOUTS
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(config), 0)
    layout = LAYOUTS[plan.profile.output.layout]
    rows = [[row for block in layout.rows(plan, i)[0].values() for row in block] for i in range(episodes)]
    out.mkdir(parents=True, exist_ok=True)
    t, cpu = time.perf_counter(), time.process_time()
    with open(out / "rows.jsonl", "w") as f:
        for block in rows:
            for row in block:
                f.write(dumps(row) + "\n")
    return {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu}


def in_child(fn, *args):
    """fn(*args) computed in a forked process (its memory stays out of this one's peak RSS)."""
    import multiprocessing
    guard()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(fn, args)


# what CI services set (GitHub Actions, GitLab, Azure Pipelines, Jenkins/Hudson, Buildkite, CircleCI, Travis,
# TeamCity, Bitbucket, AWS CodeBuild, Drone, Woodpecker, AppVeyor, Semaphore, Cirrus, Bamboo, GoCD, Google Cloud
# Build, Heroku CI, Buddy, Codemagic, Vercel, Netlify; the generic CONTINUOUS_INTEGRATION and
# RUN_ID-style names stay out: a plain shell may set them), and test runners while they run a test (pytest's
# PYTEST_CURRENT_TEST; tox's TOX_ENV_NAME and nox's NOX_CURRENT_SESSION: a suite's environment)
CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "JENKINS_URL", "HUDSON_URL",
              "BUILDKITE", "CIRCLECI", "TRAVIS", "TEAMCITY_VERSION", "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ID",
              "DRONE", "WOODPECKER", "CI_NAME", "APPVEYOR", "SEMAPHORE", "CIRRUS_CI", "bamboo_buildKey",
              "GO_PIPELINE_NAME", "BUILDER_OUTPUT", "HEROKU_TEST_RUN_ID", "BUDDY", "CM_BUILD_ID", "VERCEL",
              "NETLIFY", "PYTEST_CURRENT_TEST", "TOX_ENV_NAME", "NOX_CURRENT_SESSION")
# a value that says "not CI" (CI=false, as some set to run a CI script locally)
NOT_SET = ("", "0", "false", "no", "off")


def under_ci(environ) -> str | None:
    """The first of CI_MARKERS set (to anything but NOT_SET, in any case) in `environ`, None on a
    plain machine.

    >>> under_ci({"GITLAB_CI": "true"}), under_ci({"HOME": "/root", "CI": ""}), under_ci({"CI": "False"})
    ('GITLAB_CI', None, None)
    >>> under_ci({"CI": "1", "PYTEST_CURRENT_TEST": "t.py::x (call)"}), under_ci({"bamboo_buildKey": "K-1"})
    ('CI', 'bamboo_buildKey')
    """
    return next((name for name in CI_MARKERS if environ.get(name, "").strip().lower() not in NOT_SET), None)


def refuse(environ) -> str | None:
    """Why the bench must not run here, or None: under CI or a test (under_ci), or inside a pytest
    process however it was started (the pytest module loaded: a test calling main() directly)."""
    found = under_ci(environ)
    if found:
        return f"{found} is set: timings on shared CI runners (or inside a test) are noise"
    if "pytest" in sys.modules or "_pytest" in sys.modules:
        return "pytest is loaded: a test would be timing the bench"
    return None


def guard() -> None:
    """Exit 2 (nothing timed) where refuse() finds a reason: every timed run asks, so a caller that
    skips main (a test importing the script) times nothing either."""
    why = refuse(os.environ)
    if why:
        print(f"bench_generate: {why}; run it on a quiet machine", file=sys.stderr)
        sys.exit(2)


def busy(load: float, cores: int) -> str | None:
    """Why wall times cannot be judged on a machine of `cores` with this 1-minute load average:
    fewer than 1.5 cores idle (the 2-worker run needs two, the 1-worker run one and its writes);
    None where they can.

    >>> busy(0.2, 2), busy(0.6, 2), busy(9.0, 16), busy(15.0, 16)
    (None, 'load average 0.6 on 2 cores: 1.4 idle, < 1.5', None, 'load average 15.0 on 16 cores: 1.0 idle, < 1.5')
    """
    idle = cores - load
    return None if idle >= 1.5 else f"load average {load:.1f} on {cores} cores: {idle:.1f} idle, < 1.5"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", nargs="+", default=["kernelstrain", "kernelinfer"])
    ap.add_argument("--episodes", type=int, nargs="+", default=[2000],
                    help="episodes a profile: one count for all, or one per --config profile, in order")
    ap.add_argument("--max-ratio", type=float, default=2.0)
    ap.add_argument("--min-speedup", type=float, default=1.8)
    ap.add_argument("--max-rss-mb", type=float, default=200)
    ap.add_argument("--max-full-minutes", type=float, default=6.0,
                    help="a profile's whole run on 2 workers (judged where all its episodes are benched)")
    ap.add_argument("--by", choices=("wall", "cpu"), default="wall",
                    help="judge the targets on wall seconds (an idle machine) or CPU seconds (a busy one)")
    ap.add_argument("--allow-busy", action="store_true",
                    help="judge wall times even where fewer than 1.5 cores are idle (figures then read the other load)")
    ap.add_argument("--store", action="store_true",
                    help="keep the held-out solutions' store on disk, filled before the timed runs (warm; "
                         "default: off, each run searches its own: cold)")
    ap.add_argument("--phases", action="store_true",
                    help="also print each profile's CPU seconds per phase (scripts/generate_phases.py, 1 worker)")
    a = ap.parse_args()
    why = refuse(os.environ)
    if why:
        print(f"bench_generate: {why}; run it on a quiet machine", file=sys.stderr)
        return 2
    if len(a.episodes) not in (1, len(a.config)):
        ap.error(f"--episodes: one count, or one for each of the {len(a.config)} profiles")
    why = busy(os.getloadavg()[0], os.cpu_count() or 1) if a.by == "wall" and not a.allow_busy else None
    if why:
        print(f"bench_generate: {why}: wall times would measure the other load; use --by cpu "
              "(or --allow-busy)", file=sys.stderr)
        return 2
    counts = a.episodes * len(a.config) if len(a.episodes) == 1 else a.episodes
    missed = [f"{config}: {m}" for config, n in zip(a.config, counts) for m in bench(config, n, a)]
    for m in missed:
        print(f"missed: {m}")
    return 1 if missed else 0


def profile_episodes(config: str) -> int:
    """The profile's own episode count (profile.episodes): generate refuses --episodes above it."""
    from kernelstrain.profiles import load_profile
    return load_profile(config).episodes


def bench(config: str, asked: int, a) -> list[str]:
    """One profile's runs and figures (printed); the targets it misses. A profile with fewer
    episodes than `asked` (kernelinfer: 1,899 sessions) runs all of its own."""
    whole = in_child(profile_episodes, config)     # (the profile read in a child: see digest)
    episodes = min(asked, whole)
    load = os.getloadavg()
    env = None if a.store else {**os.environ, "KERNELSTRAIN_SOLUTIONS": "off"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if a.store:        # warm: the store holds every held-out solution before the timed runs
            generate(config, 1, 1, tmp / "warm-up", env)
        one = generate(config, episodes, 1, tmp / "w1", env)
        two = generate(config, episodes, 2, tmp / "w2", env)
        check1 = run(["validate", str(tmp / "w1"), "--workers", "1"], env)
        check2 = run(["validate", str(tmp / "w1"), "--workers", "2"], env)
        floor = in_child(serialization_floor, config, episodes, tmp / "floor")    # its rows never in this process
    print(f"{config}: {episodes} of the profile's {whole:,} episodes, output {one['mb']:.0f} MB; load average "
          f"before/after {load[0]:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; solutions' store "
          f"{'kept, filled first (warm)' if a.store else 'off (cold)'}; output sha256 {one['digest'][:16]}")
    runs = (("generate, 1 worker", one), ("generate, 2 workers", two), ("validate, 1 worker", check1),
            ("validate, 2 workers", check2))
    for name, r in runs:
        print(f"{name:20} {r['wall']:7.1f} s wall {r['cpu']:7.1f} s CPU (parent {r['parent_cpu']:.1f}, workers "
              f"{r['children_cpu']:.1f})  {episodes / r['wall']:7.1f} episodes/s  {one['mb'] / r['wall']:6.1f} MB/s"
              f"  peak RSS {r['rss_mb']:.0f} MB")
    print(f"serialization floor {floor['wall']:.1f} s wall, {floor['cpu']:.1f} s CPU ({one['mb'] / floor['wall']:.1f} MB/s)")
    figures = {"wall": by_wall(one, two, check1, check2, floor), "CPU": by_cpu(one, two, check1, check2, floor)}
    for name, f in figures.items():
        print(f"by {name:4}: ratio generate/floor (1 worker) {f['ratio']:.2f}   speedup 2 workers vs 1: "
              f"{f['speedup']:.2f}x{' (bound)' if name == 'CPU' else ''}   validate/generate: {f['validate']:.2f} "
              f"(1 worker each), {f['validate2']:.2f} (2 each)")
    if a.phases:
        print(phases(config, episodes, env))
    rows = targets(figures["wall" if a.by == "wall" else "CPU"], a, episodes, whole, (one, two, check1, check2))
    print(f"targets (issue 32's Done-when; {config}, judged by {a.by}):")
    for what, value, bound, met in rows:
        print(f"  {what:44} {value:>22}  {bound:>10}  {'met' if met else 'not judged' if met is None else 'MISSED'}")
    return [f"{what} {value} (target {bound}, {a.by})" for what, value, bound, met in rows if met is False]


def by_wall(one: dict, two: dict, check1: dict, check2: dict, floor: dict) -> dict:
    return {"ratio": one["wall"] / floor["wall"], "speedup": one["wall"] / two["wall"],
            "validate": check1["wall"] / one["wall"], "validate2": check2["wall"] / two["wall"],
            "two_s": two["wall"]}


def by_cpu(one: dict, two: dict, check1: dict, check2: dict, floor: dict) -> dict:
    """The CPU forms (see the module docstring): the 2-worker speedup and time are the bounds the
    2-worker run's CPU split allows on two idle cores."""
    two_s = two["parent_cpu"] + two["children_cpu"] / 2
    return {"ratio": one["cpu"] / floor["cpu"], "speedup": one["cpu"] / two_s,
            "validate": check1["cpu"] / one["cpu"], "validate2": check2["cpu"] / two["cpu"], "two_s": two_s}


def targets(f: dict, a, episodes: int, whole: int, runs: tuple) -> list[tuple]:
    """(what, measured, target, met: True / False / None where not judged) of each Done-when target."""
    one, two, check1, check2 = runs
    rss = max(r["rss_mb"] for r in runs)
    full = f["two_s"] * whole / episodes      # the whole run's time, were every episode as dear as these
    return [
        ("1- and 2-worker outputs the same bytes", "same" if one["digest"] == two["digest"] else "DIFFER", "same",
         one["digest"] == two["digest"]),
        ("validate's findings (1 / 2 workers)", f"exit {check1['code']} / {check2['code']}", "exit 0",
         check1["code"] == 0 and check2["code"] == 0),
        ("ratio generate/floor, 1 worker", f"{f['ratio']:.2f}", f"<= {a.max_ratio}", f["ratio"] <= a.max_ratio),
        ("speedup, 2 workers vs 1", f"{f['speedup']:.2f}x", f">= {a.min_speedup}x", f["speedup"] >= a.min_speedup),
        ("validate/generate, 1 worker each", f"{f['validate']:.2f}", "<= 1.0", f["validate"] <= 1.0),
        ("validate/generate, 2 workers each", f"{f['validate2']:.2f}", "<= 1.0", f["validate2"] <= 1.0),
        (f"whole profile ({whole:,} episodes), 2 workers",
         f"{f['two_s'] / 60:.2f} min" if episodes == whole else f"~{full / 60:.2f} min projected",
         f"<= {a.max_full_minutes:g} min", f["two_s"] <= a.max_full_minutes * 60 if episodes == whole else None),
        ("peak RSS, any run", f"{rss:.0f} MB", f"<= {a.max_rss_mb:g} MB", rss <= a.max_rss_mb)]

if __name__ == "__main__":
    sys.exit(main())
