"""Generation and validation throughput against the serialization floor, with targets.

    python scripts/bench_generate.py [--config kernelstrain|kernelinfer|P.toml] [--episodes 2000]
                                     [--max-ratio 2.0] [--min-speedup 1.8] [--max-rss-mb 200]

Runs `generate` for a fixed number of episodes with 1 and with 2 workers, then `validate`
(2 workers) on the 1-worker output, each in a fresh process (wall time, CPU time and peak
RSS of the process and its children), and measures the serialization floor: the time to
JSON-encode and write the same rows already held in memory. Prints episodes/s, MB/s, CPU
seconds, peak RSS, the 2-worker speedup, the ratio generate/floor and validate/generate.

Exits 1 when a target is missed, naming each: the two runs' bytes differ (always a failure),
the ratio generate/floor (1 worker) is over --max-ratio, 2 workers are under --min-speedup
times faster than one, validate takes longer than the 2-worker generate, or a peak RSS is
over --max-rss-mb. Wall-time targets need a machine that is otherwise idle; on a busy one,
read the CPU seconds. This is a script, not a test: no timed test asserts speed.
"""
import argparse
import hashlib
import json
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
print(json.dumps({"code": code, "wall": wall, "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                  "rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}))
"""


def run(args: list) -> dict:
    """One kernelstrain command in a fresh process: its exit code, wall and CPU seconds, peak RSS."""
    r = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(args[:1])} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def generate(config: str, episodes: int, workers: int, out: Path) -> dict:
    r = run(["generate", "--seed", "0", "--config", config, "--out", str(out), "--episodes", str(episodes),
             "--workers", str(workers), "--quiet"])
    files = sorted(p for p in out.rglob("*") if p.is_file())
    r["mb"] = sum(p.stat().st_size for p in files) / 1e6
    r["digest"] = hashlib.sha256(b"".join(p.relative_to(out).as_posix().encode() + p.read_bytes()
                                          for p in files)).hexdigest()
    return r


def serialization_floor(config: str, episodes: int, out: Path) -> float:
    """Seconds to json-encode and write rows that are already built in memory (the rows of the
    profile's layout: episodes, multi-turn and step rows, or sessions)."""
    from kernelstrain.episodes import build_episode, chat_rows, dumps
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    from kernelstrain.sessions import session_row
    plan = make_plan(load_profile(config), 0)
    output = plan.profile.output
    rows = []
    for i in range(episodes):
        ep = build_episode(plan, i).row()
        if output.layout == "sessions":
            rows.append([session_row(ep, output.timestamps)])
        else:
            mts, steps = chat_rows(ep, output.timestamps, output.max_context_tokens)
            rows.append([ep, *mts, *steps])
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with open(out / "rows.jsonl", "w") as f:
        for block in rows:
            for row in block:
                f.write(dumps(row) + "\n")
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    ap.add_argument("--min-speedup", type=float, default=1.8)
    ap.add_argument("--max-rss-mb", type=float, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        one = generate(a.config, a.episodes, 1, tmp / "w1")
        two = generate(a.config, a.episodes, 2, tmp / "w2")
        check = run(["validate", str(tmp / "w1"), "--workers", "2"])
        floor = serialization_floor(a.config, a.episodes, tmp / "floor")
    print(f"{a.config}: {a.episodes} episodes, output {one['mb']:.0f} MB")
    for name, r in (("generate, 1 worker", one), ("generate, 2 workers", two), ("validate, 2 workers", check)):
        print(f"{name:20} {r['wall']:7.1f} s wall {r['cpu']:7.1f} s CPU  {a.episodes / r['wall']:7.1f} episodes/s"
              f"  {one['mb'] / r['wall']:6.1f} MB/s  peak RSS {r['rss_mb']:.0f} MB")
    ratio, speedup, checked = one["wall"] / floor, one["wall"] / two["wall"], check["wall"] / two["wall"]
    print(f"serialization floor {floor:.1f} s ({one['mb'] / floor:.1f} MB/s)")
    print(f"ratio generate/floor (1 worker) {ratio:.2f}   speedup 2 workers vs 1: {speedup:.2f}x   "
          f"validate/generate (2 workers): {checked:.2f}")
    missed = [m for m, bad in (
        ("the 1- and 2-worker outputs differ", one["digest"] != two["digest"]),
        ("validate found problems", check["code"] != 0),
        (f"ratio generate/floor {ratio:.2f} > {a.max_ratio}", ratio > a.max_ratio),
        (f"speedup {speedup:.2f}x < {a.min_speedup}x", speedup < a.min_speedup),
        (f"validate {check['wall']:.1f} s > generate {two['wall']:.1f} s", checked > 1.0),
        (f"peak RSS {max(r['rss_mb'] for r in (one, two, check)):.0f} MB > {a.max_rss_mb:.0f} MB",
         max(r["rss_mb"] for r in (one, two, check)) > a.max_rss_mb)) if bad]
    for m in missed:
        print(f"missed: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
