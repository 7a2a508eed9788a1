"""Does the parent, a third busy process on a 2-worker run's two cores, cost the workers their speed? (issue 32)

    python scripts/parent_core.py [--config kernelstrain] [--episodes 300] [--rounds 2] [--cpus 2,3,4]

A device host job (idle cores; docs/speed_issue32_s14.md): `generate --workers 2` of the same episodes (seed 0,
the solutions' store off, the plain pool forked after the matcher, as where the workers take every core), each
run in a fresh process, in three placements, alternated for `--rounds` rounds:
  one     1 worker, the process pinned to the first CPU (the 1-worker wall, for the speedups);
  shared  2 workers and the parent all pinned to the first two CPUs (this 2-core machine's case);
  apart   as shared up to the episodes; then each worker pinned to its own one of the first two CPUs, the
          parent to the third (set where it starts writing episodes, before the episode pool forks).
Prints each run's wall seconds and CPU (parent, workers) and the output's sha256 (all runs must agree), then the
mean speedups one/shared and one/apart: where apart is near 2x and shared is not, the parent's share of the two
cores is the gap (docs/speed_issue32_s13.md section 1). Refuses under CI or a test (bench_generate.guard).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, multiprocessing, os, resource, sys, time
cpus, placement = [int(c) for c in sys.argv[1].split(",")], sys.argv[2]
from kernelstrain import generation
from kernelstrain.cli import main
generation.spare_core = lambda workers: False          # the plain pool in every placement
os.sched_setaffinity(0, set(cpus[:1] if placement == "one" else cpus[:2]))    # the set-up alike in shared, apart
if placement == "apart":
    plain, writing = generation._init_worker, generation._write_episodes

    def pinned(*args, **kwargs):                        # a pool worker: its own CPU of the first two
        os.sched_setaffinity(0, {cpus[(multiprocessing.current_process()._identity[-1] - 1) % 2]})
        return plain(*args, **kwargs)

    def parent_apart(*args, **kwargs):                  # before the episode pool forks (at the first episode)
        os.sched_setaffinity(0, {cpus[2]})
        return writing(*args, **kwargs)
    generation._init_worker, generation._write_episodes = pinned, parent_apart
t = time.perf_counter()
code = main(sys.argv[3:])
wall = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "wall": wall, "parent": me.ru_utime + me.ru_stime,
                  "workers": kids.ru_utime + kids.ru_stime}))
"""


def digest(out: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in out.rglob("*") if q.is_file()):
        h.update(p.relative_to(out).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def run(placement: str, a, tmp: Path) -> dict:
    out = tmp / placement
    workers = "1" if placement == "one" else "2"
    env = {**os.environ, "KERNELSTRAIN_SOLUTIONS": "off"}
    r = subprocess.run([sys.executable, "-c", CHILD, a.cpus, placement, "generate", "--seed", "0", "--config",
                        a.config, "--episodes", str(a.episodes), "--workers", workers, "--out", str(out), "--quiet",
                        "--force"], capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"parent_core: {placement} failed:\n{r.stderr[-2000:]}")
    found = json.loads(r.stdout.strip().splitlines()[-1])
    found["sha"] = digest(out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return found


def main() -> int:
    from bench_generate import guard
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cpus", default="2,3,4", help="three CPUs: the workers' two, then the parent's when apart")
    a = ap.parse_args()
    guard()
    if len(a.cpus.split(",")) != 3:
        ap.error("--cpus: three CPUs")
    runs = {"one": [], "shared": [], "apart": []}
    with tempfile.TemporaryDirectory(prefix="parent-core-") as tmp:
        for k in range(a.rounds):
            for placement in (("one", "shared", "apart") if k % 2 == 0 else ("apart", "shared", "one")):
                r = run(placement, a, Path(tmp))
                runs[placement].append(r)
                print(f"round {k + 1} {placement:6} wall {r['wall']:7.2f} s  CPU parent {r['parent']:6.2f} workers "
                      f"{r['workers']:6.2f}  sha {r['sha']}  load {os.getloadavg()[0]:.1f}", flush=True)
    shas = {r["sha"] for rs in runs.values() for r in rs}
    mean = {p: sum(r["wall"] for r in rs) / len(rs) for p, rs in runs.items()}
    print(f"{a.config}, {a.episodes} episodes, cpus {a.cpus}: speedup shared {mean['one'] / mean['shared']:.2f}x, "
          f"apart {mean['one'] / mean['apart']:.2f}x; outputs {'the same' if len(shas) == 1 else 'DIFFER'}")
    return 0 if len(shas) == 1 else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.exit(main())
