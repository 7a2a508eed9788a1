"""One episode index -> its rows: the raw episode, the multi-turn chat, the step rows.

Pure function of (plan, index): workers and shards can compute any episode alone.
"""
from __future__ import annotations

import json

from . import __version__, feedback
from .engine import Episode, draw_steps
from .fields import as_dict, params_field, shape_field
from .ops import REGISTRY
from .plan import Plan, episode_id, episode_rng, task_id
from .tasks import make_task

SCHEMA = {
    "episode": "kernelstrain/episode@1",
    "multiturn": "kernelstrain/sft_multiturn@1",
    "step": "kernelstrain/sft_step@1",
    "holdout": "kernelstrain/holdout_task@1",
    "stats": "kernelstrain/stats@1",
}


def dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def task_fields(module, task) -> dict:
    return {"op": module.op, "impl": module.impl, "module": module.name, "family": module.family,
            "gpu": task.gpu.name, "arch": task.gpu.arch, "dtype": task.dtype, "shape": shape_field(task.dims),
            "signature": module.signature(task), "desc": module.desc}


def build_episode(plan: Plan, index: int) -> dict:
    """The raw episode row (steps with private fields for the chat builders)."""
    task = plan.task(index)
    module = REGISTRY[task.module]
    rng = episode_rng(plan, index)
    prof = plan.profile
    n = draw_steps(rng, prof.steps.min, prof.steps.max, prof.steps.mean)
    ep = Episode(module, task, rng, n, prof.status.compile_error, prof.status.wrong_result)
    steps = ep.run()
    ok_kept = [s for s in steps if s["kept"]]
    best = min(ok_kept, key=lambda s: (s["time_ms"], s["step"])) if ok_kept else None
    best_ms = best["time_ms"] if best else ep.baseline_ms
    return {
        "schema": SCHEMA["episode"], "id": episode_id(plan, index), "task_id": task_id(task),
        **task_fields(module, task),
        "baseline": {"tag": module.variants[0].tag, "code": ep.baseline_code, "time_ms": ep.baseline_ms},
        "steps": steps,
        "best": {"step": best["step"] if best else 0, "time_ms": best_ms,
                 "speedup": round(ep.baseline_ms / best_ms, 4)},
        "attempts": {
            "kept": len(ok_kept),
            "reverted": sum(1 for s in steps if not s["kept"] and s["kind"] != "rebench" and s["status"] != "compile_error"),
            "errors": sum(1 for s in steps if s["status"] == "compile_error"),
            "rebench": sum(1 for s in steps if s["kind"] == "rebench"),
        },
        "elapsed_s": steps[-1]["elapsed_s"] if steps else 0,
        "seed": plan.seed,
        "generator": f"kernelstrain {__version__}",
        "_module": module, "_task": task,
    }


def episode_rows(plan: Plan, index: int) -> tuple[str, str, list[str], dict]:
    """(episode line, multiturn line, step lines, the public episode dict)."""
    ep, mt, step_rows = episode_dicts(plan, index)
    return dumps(ep), dumps(mt), [dumps(r) for r in step_rows], ep


def episode_dicts(plan: Plan, index: int) -> tuple[dict, dict, list[dict]]:
    """The three kinds of rows of one episode, as dicts in their fixed key order."""
    ep = build_episode(plan, index)
    ep.pop("_module"), ep.pop("_task")
    for s in ep["steps"]:
        del s["_prev_best"], s["_best_step"]
        s["params"] = params_field(s["params"])   # one schema for every row: see fields.py
    mt, step_rows = chat_rows(ep, plan.profile.output.timestamps)
    return ep, mt, step_rows


def chat_rows(ep: dict, timestamps: bool = False) -> tuple[dict, list[dict]]:
    """(multiturn row, step rows) of a public episode row: a pure function of the row, so
    `validate` rebuilds them and compares. `timestamps` is the profile's output.timestamps."""
    module = REGISTRY[ep["module"]]
    task = make_task(module, ep["gpu"], ep["dtype"], as_dict(ep["shape"]))
    impl, steps = module.impl, ep["steps"]
    reference = module.reference(task)
    baseline_ms = ep["baseline"]["time_ms"]
    first = feedback.task_prompt(module, task, ep["baseline"]["code"], baseline_ms, reference)
    header = feedback.task_header(module, task, reference)
    messages = [{"role": "system", "content": feedback.SYSTEM}, {"role": "user", "content": first}]
    step_rows, history = [], []
    best_code, best_ms, best_step = ep["baseline"]["code"], baseline_ms, 0
    for i, s in enumerate(steps):
        prompt = feedback.step_prompt(header, history, best_code, impl, best_ms, baseline_ms, best_step)
        step_rows.append({
            "schema": SCHEMA["step"], "id": f"{ep['id']}-{s['step']:03d}", "episode_id": ep["id"],
            "step": s["step"], "kind": s["kind"], "status": s["status"], "kept": s["kept"],
            "module": ep["module"], "gpu": ep["gpu"], "impl": impl,
            "messages": [{"role": "system", "content": feedback.SYSTEM}, {"role": "user", "content": prompt},
                         {"role": "assistant", "content": feedback.fence(s["code"], impl)}],
        })
        prev_best = best_ms
        if s["kept"]:
            best_code, best_ms, best_step = s["code"], s["time_ms"], s["step"]
        stamp = feedback.hms(s["elapsed_s"]) if timestamps else ""
        messages.append({"role": "assistant", "content": feedback.fence(s["code"], impl)})
        if i < len(steps) - 1:
            messages.append({"role": "user", "content": feedback.step_feedback(
                s, prev_best, baseline_ms, best_step, stamp)})
        history.append(feedback.history_line(s))
    mt = {"schema": SCHEMA["multiturn"], "id": ep["id"], "task_id": ep["task_id"], "module": ep["module"],
          "op": ep["op"], "impl": impl, "gpu": ep["gpu"], "dtype": ep["dtype"], "shape": ep["shape"],
          "num_steps": len(steps), "best_speedup": ep["best"]["speedup"], "messages": messages}
    return mt, step_rows
