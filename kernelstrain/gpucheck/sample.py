"""Which steps of a dataset `gpu-check` runs: a stratified sample, as cases for the runtime.

Per module (all modules equally): up to EPISODES_PER_MODULE episodes (fewer, so that each gives
>= MIN_PER_EPISODE, which a small `sample` raises to) with >= 3 distinct ok candidates (episodes whose task shape
runs in seconds first, then those with >= MIN_PER_EPISODE), their distinct ok candidates taken
round-robin over variant tags (so the within-episode ranking has several variants and
parameters), then wrong_result candidates round-robin over (variant, bug). Only episodes of the
local GPU's architecture are sampled; compile errors are `kernelstrain verify`'s job.

A candidate runs as recorded at the episode's task shape when that shape fits (<= 4 GB, at most
8x the check shape's bytes and FLOPs, every candidate simulated <= 60 ms); otherwise it is
re-rendered at the op's check shape (the op spec's check_shape) from its variant, params and bug.
A step without code (a session's trace record) is rendered from its recipe at the task shape; a
case's `rendered` says kernelstrain wrote its code (nothing of the dataset's text runs).
"""
from __future__ import annotations

import hashlib

from .. import knobs
from ..ops import REGISTRY
from ..sim import simulate
from ..tasks import make_task
from ..fields import as_dict
from .adapters import check_shape

EPISODES_PER_MODULE = 3
MIN_PER_EPISODE = 5             # ok candidates of one episode, so its ranking says something
WRONG_SHARE = 0.25                # of each module's quota, where it has wrong_result steps
MAX_BYTES = 4e9
MAX_OVER_CHECK = 8.0
MAX_SIM_MS = 60.0


def fits(module, dtype: str, shape: dict, gpu: str = "H200") -> bool:
    """Whether a task shape runs in seconds on the GPU (against the op's check shape)."""
    task = make_task(module, gpu, dtype, shape)
    cost = module.cost(task)
    if cost.bytes > MAX_BYTES:
        return False
    check = check_shape(module)
    if check:
        ref = module.cost(make_task(module, gpu, dtype, check))
        if cost.bytes > MAX_OVER_CHECK * max(ref.bytes, 1) or cost.flops > MAX_OVER_CHECK * max(ref.flops, 1):
            return False
    return True


def _candidate_key(step: dict) -> tuple:
    return step["tag"], tuple(sorted(as_dict(step["params"]).items())), step.get("bug"), step["status"]


def candidates(episode: dict) -> list:
    """Distinct ok / wrong_result steps of an episode (first occurrence; no rebench)."""
    seen, out = set(), []
    for s in episode["steps"]:
        if s["status"] not in ("ok", "wrong_result") or s["kind"] == "rebench":
            continue
        key = _candidate_key(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _round_robin(steps: list, key, n: int) -> list:
    groups = {}
    for s in steps:
        groups.setdefault(key(s), []).append(s)
    order, depth = sorted(groups), 0
    chosen = []
    while len(chosen) < n and any(len(groups[k]) > depth for k in order):
        for k in order:
            if depth < len(groups[k]) and len(chosen) < n:
                chosen.append(groups[k][depth])
        depth += 1
    return chosen


def _case(episode: dict, step: dict, sim_gpu: str) -> dict | None:
    module = REGISTRY[episode["module"]]
    variant = module.variant(step["tag"])
    shape, at, code = as_dict(episode["shape"]), "task", step.get("code")
    params = as_dict(step["params"])
    bug = step.get("bug")
    rendered = code is None
    too_slow = simulate(module, variant, params, make_task(module, sim_gpu, episode["dtype"], shape))
    if not fits(module, episode["dtype"], shape, sim_gpu) or (too_slow.ok and too_slow.time_ms > MAX_SIM_MS):
        if not check_shape(module) or (step["status"] == "wrong_result" and not bug):
            return None            # a wrong result with no recorded bug cannot be re-rendered
        shape, at = dict(check_shape(module)), "check"
        task = make_task(module, sim_gpu, episode["dtype"], shape)
        if not simulate(module, variant, params, task).ok:
            return None
        code, rendered = knobs.render(module, variant, params, task, bug), True
    elif rendered:
        code = knobs.render(module, variant, params, make_task(module, episode["gpu"], episode["dtype"], shape), bug)
    return {"id": f"{episode['id']}|{step['step']}", "episode": episode["id"], "step": step["step"],
            "module": module.name, "impl": module.impl, "variant": step["tag"], "params": params,
            "dtype": episode["dtype"], "shape": dict(shape), "at": at, "label": step["status"],
            "kind": step["status"], "bug": bug if step["status"] == "ok" else (bug or "wrong_result"),
            "bug_repeats": 3 if step["status"] == "wrong_result" else 1, "main": True, "code": code,
            "rendered": rendered}


def _order(seed: int, *parts) -> str:
    """A sort key: the sample of a dataset's subset holding the sampled episodes is the same."""
    return hashlib.sha256("\x1f".join(map(str, ("gpu-check", seed, *parts))).encode()).hexdigest()


def sample_cases(episodes, sample: int, seed: int, arch: str = "sm_90a", sim_gpu: str = "H200") -> list:
    """Cases for about `sample` candidates, deterministic for (episodes, sample, seed)."""
    by_module = {}
    for ep in episodes:
        if ep["arch"] == arch and ep["module"] in REGISTRY:
            by_module.setdefault(ep["module"], []).append(ep)
    if not by_module:
        return []
    quota = max(4, -(-sample // len(by_module)))
    cases = []
    for name in sorted(by_module):
        module = REGISTRY[name]
        eps = sorted(by_module[name], key=lambda e: _order(seed, e["id"]))
        oks = {e["id"]: len([s for s in candidates(e) if s["status"] == "ok"]) for e in eps}
        # episodes with 3+ ok candidates give an ordering to check, those with MIN_PER_EPISODE+ first; where a
        # module has none (short episodes that ended on evidence), its ok labels are still checked
        ranked = [e for e in eps if oks[e["id"]] >= 3] or [e for e in eps if oks[e["id"]]]
        ranked.sort(key=lambda e: (not fits(module, e["dtype"], as_dict(e["shape"]), sim_gpu),
                                   oks[e["id"]] < MIN_PER_EPISODE))
        wrong_pool = sorted((c for e in eps for s in candidates(e)
                             if s["status"] == "wrong_result" and (c := _case(e, s, sim_gpu))),
                            key=lambda c: _order(seed, c["id"]))
        n_wrong = min(len(wrong_pool), round(quota * WRONG_SHARE))
        chosen = ranked[:max(1, min(EPISODES_PER_MODULE, (quota - n_wrong) // MIN_PER_EPISODE))]
        # never fewer than MIN_PER_EPISODE where the episode has them, whatever `sample` leaves a module: on an
        # H100 (seed 30303, --sample 250 over ~55 modules) 4 an episode put 17% of the pairs within 2% of each
        # other (the hardware's own re-time misorders a third of those), each episode's Spearman one of 11 values
        # and the mean's standard error at 0.07 (0.53 an episode; 5-7 an episode on the H200: 0.18-0.19)
        per_episode = max(MIN_PER_EPISODE, -(-(quota - n_wrong) // max(1, len(chosen))))
        for e in chosen:
            oks = sorted((c for s in candidates(e) if s["status"] == "ok" and (c := _case(e, s, sim_gpu))),
                         key=lambda c: _order(seed, c["id"]))
            cases += _round_robin(oks, lambda c: c["variant"], per_episode)
        cases += _round_robin(wrong_pool, lambda c: (c["variant"], c["bug"]), n_wrong)
    for i, c in enumerate(cases):
        c["idx"] = i
    return cases
