"""What one session has learned about the hardware's limits (the engine's feasibility memory).

A candidate that overflows a per-block limit names the resource and its demand in the tool's
text (shared memory bytes, a block of more than 1024 threads, registers x threads over the
register file). Demand is monotone in each resource: a config of the same rung that asks for
at least as much fails the same way. So once (rung, resource) has failed at some demand, the
engineer proposes nothing on that rung that needs as much or more of it; an arch failure
teaches that a feature is missing on this GPU.

>>> memory = Limits()
>>> memory.learn("tiled", "smem", 131072)
>>> memory.known_to_fail("tiled", {"smem": 163840, "threads": 256, "regs": 16384})
True
>>> memory.known_to_fail("tiled", {"smem": 98304, "threads": 256, "regs": 16384}), memory.hit("tiled", "smem")
(False, True)
"""
from __future__ import annotations

from . import knobs
from .sim import simulate

RESOURCES = ("smem", "threads", "regs")
MAX_THREADS = 1024                # threads per block on every NVIDIA GPU of the catalog


def demand(module, variant, params: dict, task) -> dict:
    """{resource: amount} of one candidate: shared memory per block, threads per block, and
    registers x threads of a block (registers as ptxas allocates them, spills capped)."""
    r = simulate(module, variant, params, task)
    threads = knobs.launch(module, variant, params, task).threads
    return {"smem": r.smem_bytes, "threads": threads, "regs": r.regs * threads}


def overflow(module, variant, params: dict, task) -> tuple[str, int] | None:
    """(resource, demand) a candidate fails on; None when it fits, fails otherwise (arch) or
    carries a slip (a missing opt-in or a stale launch bound: the code, not the config)."""
    if any(params.get(k) for k in knobs.SLIPS):
        return None
    r = simulate(module, variant, params, task)
    if r.error_class not in ("smem", "resources"):
        return None
    need = demand(module, variant, params, task)
    resource = "smem" if r.error_class == "smem" else "threads" if need["threads"] > MAX_THREADS else "regs"
    return resource, need[resource]


_FAILING: dict = {}         # (module, rung tag, rung params, task, failure class) -> indices into the rung's configs
FAILING_MAX = 1 << 15       # entries (most an empty tuple): a full run's tasks, each rung scanned and class


def rung_failing(key: tuple, configs: list, fails) -> list:
    """The configs of one rung that `fails` (a pure test of one config), in their order, found once
    per `key` in this process: every episode of a task asks it of the same rungs (a full default
    run holds ~6 episodes a task), and the whole grid is the engine's costliest question."""
    found = _FAILING.get(key)
    if found is None:
        if getattr(fails, "groups", None) is not None:
            # configs whose launch answer is one (`fails.groups`: grid positions; Episode._failing_test):
            # the launch asked of each group's first config, `fails.keep` of each config of a group that fails
            found = tuple(sorted(i for group in fails.groups if fails.launch(configs[group[0]])
                                 for i in group if fails.keep(configs[i])))
        else:
            found = tuple(i for i, c in enumerate(configs) if fails(c))
        if len(_FAILING) >= FAILING_MAX:
            _FAILING.clear()
        _FAILING[key] = found
    return [configs[i] for i in found]


class Limits:
    """Per session: the smallest demand that failed, by (rung, resource); features missing."""

    def __init__(self):
        self.failed: dict = {}        # (tag, resource) -> smallest demand that failed
        self.missing: set = set()     # features an arch failure showed this GPU lacks

    def learn(self, tag: str, resource: str, amount: int) -> None:
        key = (tag, resource)
        self.failed[key] = min(amount, self.failed.get(key, amount))

    def hit(self, tag: str, resource: str) -> bool:
        return (tag, resource) in self.failed

    def learned(self, tag: str) -> bool:
        """Some limit of rung `tag` has failed (else no config of it is known to fail, nor hits one)."""
        return any(t == tag for t, _ in self.failed)

    def known_to_fail(self, tag: str, need: dict) -> bool:
        """A config of rung `tag` needing `need` asks for at least what already failed."""
        return any(need[res] >= self.failed[(tag, res)] for res in RESOURCES if (tag, res) in self.failed)


def replay(module, task, steps) -> tuple[int, int, int]:
    """(limit failures, dominated repeats, arch repeats) of a session's steps (dicts with
    status, failure, tag and params as a dict): a dominated repeat fails a limit on a rung and
    resource that already failed at no larger demand; an arch repeat fails on a feature an
    earlier arch failure showed missing. The engine makes neither."""
    memory, hits, dominated, arch_again = Limits(), 0, 0, 0
    for s in steps:
        if s["status"] != "compile_error":
            continue
        variant = module.variant(s["tag"])
        if s["failure"] == "arch":
            lacks = variant.needs - task.gpu.features
            arch_again += bool(lacks & memory.missing)
            memory.missing |= lacks
            continue
        hit = overflow(module, variant, s["params"], task) if s["failure"] in ("smem", "resources") else None
        if hit is not None:
            hits += 1
            dominated += memory.hit(s["tag"], hit[0]) and memory.failed[(s["tag"], hit[0])] <= hit[1]
            memory.learn(s["tag"], *hit)
    return hits, dominated, arch_again
