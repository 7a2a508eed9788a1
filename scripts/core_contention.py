"""How much slower an episode is built while another process builds episodes on the other core: the most
that 2 workers can gain on this machine's cores, whatever the pool does (issue 32's 2-worker target).

    python scripts/core_contention.py [--config kernelstrain] [--episodes 60] [--rounds 3] [--cpus 0,1]

The plan and the contamination matcher are made once in this process; then, alternately, one forked
child builds episodes 0..N-1 (`_work`, as a worker does) pinned to the first CPU, and two children build
them at once, each pinned to its own CPU. Each child reports its wall and CPU seconds. `slowdown` is the
mean wall of a child beside another over the mean wall of one alone; `ceiling` = 2 / slowdown is the
2-worker speedup the cores allow for a pool that wastes nothing (a 2-vCPU VM whose vCPUs share a physical
core, or share caches and memory bandwidth, shows it above 1). Read it only on idle cores (it prints the
load average before each round); it refuses under CI or a test, like scripts/bench_generate.py.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(cpu: int, indices: range, w: int) -> int:
    """Fork a child pinned to `cpu` that builds the episodes and writes 'wall cpu' to fd w."""
    pid = os.fork()
    if pid:
        return pid
    try:
        from kernelstrain import generation
        os.sched_setaffinity(0, {cpu})
        t, c = time.perf_counter(), time.process_time()
        for i in indices:
            generation._work(i)
        os.write(w, f"{time.perf_counter() - t:.4f} {time.process_time() - c:.4f}\n".encode())
    finally:
        os._exit(0)


def batch(cpus: list, indices: range) -> list:
    """(wall, cpu) of each child, all started together."""
    r, w = os.pipe()
    pids = [child(c, indices, w) for c in cpus]
    for p in pids:
        os.waitpid(p, 0)
    os.close(w)
    with os.fdopen(r) as f:
        return [tuple(map(float, line.split())) for line in f.read().split("\n") if line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpus", default=None, help="two CPUs (default: the first two this process may use)")
    a = ap.parse_args()
    if os.environ.get("CI") or "PYTEST_CURRENT_TEST" in os.environ:
        print("core_contention: not under CI or a test (it times the machine)", file=sys.stderr)
        return 2
    cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) != 2:
        print("core_contention: needs two CPUs", file=sys.stderr)
        return 2
    os.environ["KERNELSTRAIN_SOLUTIONS"] = "off"
    from kernelstrain import generation
    from kernelstrain.profiles import load_profile
    plan = generation.make_plan(load_profile(a.config), 0)
    generation._PLAN = plan
    generation.boilerplate()
    generation._SCAN = generation.contamination_scan(plan)
    indices = range(a.episodes)
    batch(cpus[:1], range(2))       # warm what a first child would pay (bytecode, lazy imports)
    alone, beside = [], []
    for k in range(a.rounds):
        load = os.getloadavg()[0]
        one = batch(cpus[:1], indices)
        two = batch(cpus, indices)
        alone += one
        beside += two
        print(f"round {k}: load {load:.2f}; alone wall {one[0][0]:.2f} s; two at once wall "
              f"{' / '.join(f'{x[0]:.2f}' for x in two)} s (cpu {' / '.join(f'{x[1]:.2f}' for x in two)})", flush=True)
    mean = lambda xs: sum(x[0] for x in xs) / len(xs)
    slowdown = mean(beside) / mean(alone)
    print(f"{a.config} {a.episodes} episodes, cpus {cpus}: alone {mean(alone):.2f} s, beside another "
          f"{mean(beside):.2f} s: slowdown {slowdown:.3f}, 2-worker ceiling {2 / slowdown:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
