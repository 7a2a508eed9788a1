"""How much slower an episode is built while another process builds episodes on the other core: the most
that 2 workers can gain on this machine's cores, whatever the pool does (issue 32's 2-worker target).

    python scripts/core_contention.py [--config kernelstrain] [--episodes 60] [--rounds 3] [--cpus 0,1]

The plan and the contamination matcher are made once in this process; then, alternately, one forked
child builds episodes 0..N-1 (`_work`, as a worker does) pinned to the first CPU, and two children run at
once, each pinned to its own CPU: the first builds the same episodes, the second episodes N..2N-1. Each
child reports its wall and CPU seconds. `slowdown` is the first child's mean wall (and CPU) beside the other
over its mean alone; `ceiling` = 2 / slowdown is the 2-worker speedup the cores allow for a pool that wastes
nothing (a 2-vCPU VM whose vCPUs share a physical core, or share caches and memory bandwidth, shows it above
1). The wall figure needs idle cores; the CPU one leaves out time a third process took (it prints the load
average before each round). It refuses under CI or a test, like scripts/bench_generate.py.
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
        os.write(w, f"{cpu} {time.perf_counter() - t:.4f} {time.process_time() - c:.4f}\n".encode())
    finally:
        os._exit(0)


def batch(cpus: list, indices: range) -> list:
    """(wall, cpu) of each child, all started together: the first builds `indices`, the second the as many
    episodes after them (another worker's share of a run: the same work would share the parent's pages and
    caches), each answer on a line that starts with its CPU."""
    r, w = os.pipe()
    n = len(indices)
    pids = [child(c, range(indices.start + k * n, indices.stop + k * n), w) for k, c in enumerate(cpus)]
    for p in pids:
        os.waitpid(p, 0)
    os.close(w)
    with os.fdopen(r) as f:
        found = {int(c): (float(x), float(y)) for c, x, y in (line.split() for line in f.read().split("\n") if line)}
    return [found[c] for c in cpus]


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
        print(f"round {k}: load {load:.2f}; alone wall {one[0][0]:.2f} s (cpu {one[0][1]:.2f}); two at once wall "
              f"{' / '.join(f'{x[0]:.2f}' for x in two)} s (cpu {' / '.join(f'{x[1]:.2f}' for x in two)})", flush=True)
    def mean(xs, i):
        return sum(x[i] for x in xs) / len(xs)
    first = beside[0::2]                    # the first child's runs: the same episodes as alone
    by_wall, by_cpu = mean(first, 0) / mean(alone, 0), mean(first, 1) / mean(alone, 1)
    print(f"{a.config} {a.episodes} episodes, cpus {cpus}: alone {mean(alone, 0):.2f} s wall / {mean(alone, 1):.2f} s "
          f"CPU, beside another {mean(first, 0):.2f} / {mean(first, 1):.2f} s: slowdown by wall {by_wall:.3f} "
          f"(2-worker ceiling {2 / by_wall:.2f}x), by CPU {by_cpu:.3f} (ceiling {2 / by_cpu:.2f}x; CPU seconds do "
          f"not count time a third process took, so on a shared machine read this one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
