"""Generation throughput against the serialization floor.

    python scripts/bench_generate.py [--episodes 2000]

Runs `generate` for a fixed number of episodes with 1 and with 2 workers (each in a fresh
process, peak RSS of the process tree measured), then measures the serialization floor:
the time to JSON-encode and write the same rows already held in memory. Prints
episodes/s, MB/s, peak RSS, the 2-worker speedup and the ratio generate/floor.
"""
import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN = """
import resource, sys, time
from kernelstrain.cli import main
t = time.perf_counter()
assert main(["generate", "--seed", "0", "--out", sys.argv[1], "--episodes", sys.argv[2], "--workers", sys.argv[3], "--quiet"]) == 0
wall = time.perf_counter() - t
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(wall, self_kb, child_kb)
"""


def run_generate(episodes: int, workers: int, out: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", RUN, str(out), str(episodes), str(workers)], capture_output=True,
                       text=True, check=True, cwd=ROOT)
    wall, self_kb, child_kb = r.stdout.split()
    size = sum(f.stat().st_size for f in out.iterdir())
    return {"wall": float(wall), "mb": size / 1e6, "rss_mb": max(int(self_kb), int(child_kb)) / 1024}


def serialization_floor(episodes: int, out: Path) -> float:
    """Seconds to json-encode and write rows that are already built in memory."""
    from kernelstrain.episodes import build_episode, chat_rows, dumps
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import DEFAULT_PROFILE, load_profile
    plan = make_plan(load_profile(DEFAULT_PROFILE), 0)
    rows = []
    for i in range(episodes):
        ep = build_episode(plan, i).row()
        rows.append((ep, *chat_rows(ep, plan.profile.output.timestamps, plan.profile.output.max_context_tokens)))
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with open(out / "e", "w") as fe, open(out / "m", "w") as fm, open(out / "s", "w") as fs:
        for ep, mts, steps in rows:
            fe.write(dumps(ep) + "\n")
            for mt in mts:
                fm.write(dumps(mt) + "\n")
            for s in steps:
                fs.write(dumps(s) + "\n")
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=2000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        one = run_generate(a.episodes, 1, tmp / "w1")
        two = run_generate(a.episodes, 2, tmp / "w2")
        floor = serialization_floor(a.episodes, tmp / "floor")
    print(f"episodes: {a.episodes}, output {one['mb']:.0f} MB")
    for name, r in (("1 worker", one), ("2 workers", two)):
        print(f"{name:10} {r['wall']:7.1f} s  {a.episodes / r['wall']:7.1f} episodes/s  {r['mb'] / r['wall']:6.1f} MB/s"
              f"  peak RSS {r['rss_mb']:.0f} MB")
    print(f"serialization floor {floor:.1f} s ({one['mb'] / floor:.1f} MB/s)")
    print(f"ratio generate/floor (1 worker) {one['wall'] / floor:.2f}   speedup 2 workers vs 1: {one['wall'] / two['wall']:.2f}x")


if __name__ == "__main__":
    main()
