"""Which rung parameters' launch demand is not monotone (grid_limits.MIXED), over every task of the profiles.

    python scripts/grid_monotone.py [--configs kernelstrain kernelinfer] [--per-module N]

For each profile's tasks (plan.all_combos; --per-module: the first N of each module's), each rung as the
engine builds it (knobs.extend with the profile's knobs), grid_limits.unordered: the (module, rung,
parameter) along whose values some config's shared memory or threads fall (a knob's: move at all). Prints
those found, and those MIXED lists that none of these tasks showed (kept to be safe, or stale).
"""
import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import grid_limits, knobs  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.plan import all_combos  # noqa: E402
from kernelstrain.profiles import load_profile  # noqa: E402


def ladder(module, task, names: tuple) -> list:
    """The rungs of `module` as an episode on `task` builds them (Episode.__init__)."""
    return [knobs.extend(v, module.impl, module.render(v, v.defaults(), task), names, task.gpu) if names else v
            for v in module.variants]


def mixed(config: str, per_module: int | None = None) -> dict:
    """{(module, rung, parameter): a task key where it is not monotone} over the profile's tasks."""
    profile = load_profile(config)
    by_module = defaultdict(list)
    for t in all_combos(profile):
        by_module[t.module].append(t)
    found = {}
    for name, tasks in by_module.items():
        m = REGISTRY[name]
        if hasattr(m, "simulate"):
            continue
        for t in tasks[:per_module]:
            for v in ladder(m, t, tuple(profile.search.knobs)):
                for p in grid_limits.unordered(m, v, t):
                    found.setdefault((name, v.tag, p), t.key)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=["kernelstrain", "kernelinfer"])
    ap.add_argument("--per-module", type=int, default=None)
    a = ap.parse_args()
    found = {}
    for config in a.configs:
        t = time.process_time()
        here = mixed(config, a.per_module)
        print(f"{config}: {len(here)} not monotone ({time.process_time() - t:.0f} s CPU)", file=sys.stderr)
        for k, where in here.items():
            found.setdefault(k, where)
    for k in sorted(found):
        print(f"    {k!r},    # {found[k]}" + ("" if k[2] in grid_limits.MIXED.get(k[:2], ()) else "  (not in MIXED)"))
    for rung, params in sorted(grid_limits.MIXED.items()):
        for p in params:
            if (*rung, p) not in found:
                print(f"in MIXED, monotone on these tasks: {rung} {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
