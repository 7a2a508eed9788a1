"""One episode index -> its rows: the raw episode, the multi-turn chat windows, the step rows.

`build_episode` is a pure function of (plan, index): workers and shards compute any episode
alone. `chat_rows` is a pure function of the public episode row, so validate can rebuild
the chat rows and compare.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

from . import knobs, messages, profiler
from .version import __version__
from .references import reference_ms
from .engine import STREAMS, Episode as Agent, draw_steps
from .fields import as_dict, shape_field
from .ledger import Ledger, mean_ms, required_gain
from .ops import REGISTRY
from .plan import Plan, episode_id, task_id
from .rng import seeded_rng
from .schema import MULTITURN_KEYS, SCHEMA, STEP_ROW_KEYS, Baseline, Episode
from .sim import noise_cv, simulate
from .tasks import make_task


def dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def task_fields(module, task) -> dict:
    return {"op": module.op, "impl": module.impl, "module": module.name, "family": module.family,
            "gpu": task.gpu.name, "arch": task.gpu.arch, "dtype": task.dtype, "shape": shape_field(task.dims),
            "signature": module.signature(task), "desc": module.desc}


def torch_times(module, task) -> tuple[float | None, float | None]:
    """(eager, torch.compile) time in ms of the task's PyTorch reference program
    (references.reference_ms: measured on the H200 at the module's menu shapes, scaled to
    other GPUs, dtypes and shapes by the roofline floor); None where a mode has no measurement.
    A fused program's times come from its own model (fused/timing.py)."""
    if hasattr(module, "torch_ms"):
        return tuple(round(t, 6) for t in module.torch_ms(task))
    return tuple(None if t is None else round(t, 6) for t in (reference_ms(module, task, mode)
                                                              for mode in ("eager", "compiled")))


def speedup_vs_torch(torch_eager_ms: float | None, time_ms: float) -> float | None:
    """The PyTorch eager reference's time over `time_ms` (None without a reference)."""
    return None if torch_eager_ms is None else round(torch_eager_ms / time_ms, 4)


def episode_streams(plan: Plan, index: int) -> dict:
    """One random.Random per purpose (engine.STREAMS), each seeded from sha256."""
    return {s: seeded_rng(plan.profile.key, plan.seed, "episode", index, s) for s in STREAMS}


def as_built(step, arch: str):
    """`step` with its build error as the harness sees it: a solution that builds its CUDA with
    load_inline (a fused candidate) gets nvcc's text inside load_inline's RuntimeError
    (messages.load_inline_error); a launch's error, and every other step, as they are."""
    if step.status != "compile_error" or messages.fails_at_launch(step.failure, step.error):
        return step
    built = messages.load_inline_error(step.error, step.code, arch)
    return step if built == step.error else replace(step, error=built)


def build_episode(plan: Plan, index: int) -> Episode:
    task = plan.task(index)
    module = REGISTRY[task.module]
    streams = episode_streams(plan, index)
    prof = plan.profile
    q = prof.search
    budget = draw_steps(streams["policy"], prof.steps.min, prof.steps.max, prof.steps.mean * q.budget_scale)
    agent = Agent(module, task, streams, min(prof.steps.max, budget), prof.status.compile_error * q.compile_scale,
                  prof.status.wrong_result * q.failure_scale, prof.steps.min, q, prof.clock)
    steps = tuple(as_built(s, task.gpu.arch) for s in agent.run())
    best_step = max((s.step for s in steps if s.kept), default=0)
    best_ms = steps[-1].best_ms if steps else agent.baseline_ms
    base = agent.base
    eager_ms, compile_ms = torch_times(module, task)
    return Episode(
        schema=SCHEMA["episode"], id=episode_id(plan, index), task_id=task_id(task), **task_fields(module, task),
        baseline=Baseline(base.variant.tag, knobs.own(base.params), agent.baseline_code, agent.baseline_ms),
        torch_eager_ms=eager_ms, torch_compile_ms=compile_ms, steps=steps,
        # the baseline's recorded time (the mean of its runs, as the best's is): a best that is
        # the baseline is 1.0x, never below
        best={"step": best_step, "time_ms": best_ms, "speedup": round(agent.book.mean(agent.baseline_code) / best_ms, 4),
              "speedup_vs_torch": speedup_vs_torch(eager_ms, best_ms)},
        attempts={"kept": sum(s.kept for s in steps),
                  "reverted": sum(1 for s in steps if not s.kept and s.kind != "rebench" and s.status == "ok"),
                  "errors": sum(1 for s in steps if s.status != "ok"),
                  "rebench": sum(1 for s in steps if s.kind == "rebench")},
        end=agent.end, elapsed_s=steps[-1].elapsed_s if steps else 0, seed=plan.seed,
        generator=f"kernelstrain {__version__}")


@dataclass(frozen=True)
class Verdict:
    """The ledger's view of one step, replayed from the public row."""
    prev_best_ms: float      # recorded best before the step
    best_step: int           # step whose code is the best after it (0 = baseline)
    runs: int                # measurements of this step's code so far (ok steps)
    mean_ms: float | None    # their mean
    noise: float             # the best's CV, as the keep rule saw it
    needed: float            # the gain a keep needed (ledger.required_gain)
    fix: bool                # an ok repair of the previous step's slip or bug (repairs)
    remeasure: bool = False  # the best's code again (a harness tells code identity)


def repairs(prev: dict | None, s: dict) -> bool:
    """Whether step `s` is the repair of `prev`: prev's candidate failed on its author's own
    slip (a typo or another slip kind, a launch-bound or opt-in slip) or bug, and `s` is the
    same rung and configuration written right, and ran ok."""
    if prev is None or prev["status"] == "ok" or s["status"] != "ok" or s["tag"] != prev["tag"]:
        return False
    before = as_dict(prev["params"])
    slipped = {k: knobs.OFF for k in knobs.SLIPS if before.get(k)}
    if prev["typo"] is None and prev["bug"] is None and not slipped:
        return False
    return as_dict(s["params"]) == {**before, **slipped}


def replay(row: dict):
    """Yield (step, Verdict) for each step of a public episode row."""
    book = Ledger(row["baseline"]["code"], row["baseline"]["time_ms"])
    prev = None
    for s in row["steps"]:
        before, noise, best_runs = book.best_ms, noise_cv(book.best_ms), book.best_runs()
        runs = mean = None
        remeasure = s["code"] == book.best_code
        needed = required_gain(before, 1 + len(book.runs.get(s["code"], ())), best_runs)
        if s["status"] == "ok":
            book.record(s["code"], s["time_ms"], s["step"])
            runs = len(book.runs[s["code"]])
            mean = mean_ms(book.runs[s["code"]])
        yield s, Verdict(before, book.best_step, runs or 0, mean, noise, needed, repairs(prev, s), remeasure)
        prev = s


def kind_mismatch(s: dict, best_tag: str, best_params: dict, best_code: str, module) -> str | None:
    """Why a step's kind does not say what changed relative to the best, or None."""
    params = as_dict(s["params"])
    best_params = as_dict(best_params)
    kind, changed = s["kind"], [k for k in params if params[k] != best_params.get(k, knobs.default(k))]
    if s["tag"] != best_tag:
        return None if kind == "structural" else f"kind {kind} but the variant changed ({best_tag} -> {s['tag']})"
    if kind == "structural":
        return "kind structural but the variant is unchanged"
    if kind == "rebench":
        return None if s["code"] == best_code else "kind rebench but the code is not the best's"
    if kind == "joint":
        return None if len(changed) > 1 else f"kind joint but {len(changed)} parameter(s) changed"
    if len(changed) != 1:
        return f"kind {kind} but {len(changed)} parameters changed"
    if kind == "endgame":
        try:
            values = knobs.param(module.variant(s["tag"]), changed[0]).values
            step = abs(values.index(params[changed[0]]) - values.index(best_params.get(changed[0], knobs.default(changed[0]))))
        except (KeyError, ValueError):
            return "kind endgame on an unknown parameter"
        return None if step == 1 else f"kind endgame but {changed[0]} moved {step} values"
    return None


def weight(s: dict, v: Verdict) -> int:
    """1 for a target worth learning: a kept step, or a repair (see `repairs`) whose code is
    not slower than the best before it by more than the noise (its mean within the keep
    rule's margin, ledger.required_gain); 0 for failed code, explorations that lost,
    re-measures, and repairs that restore a slow candidate."""
    return int(s["status"] == "ok" and (s["kept"] or v.fix and v.mean_ms <= v.prev_best_ms * (1 + v.needed)))


def _tokens(msgs: list) -> int:
    return sum(map(messages.message_tokens, msgs))


def _opening(row: dict):
    """(module, task, system message, first user message, reference) of a public episode row."""
    module = REGISTRY[row["module"]]
    task = make_task(module, row["gpu"], row["dtype"], row["shape"])
    reference = module.reference(task)
    base = row["baseline"]
    system = {"role": "system", "content": messages.SYSTEM}
    facts = baseline_facts(module, task, base["tag"], base["params"], base["time_ms"])
    first = {"role": "user", "content": messages.task_prompt(module, task, base["code"], base["time_ms"], reference, facts)}
    return module, task, system, first, reference


def baseline_facts(module, task, tag: str, params, time_ms: float) -> str:
    """What the harness reports of the baseline beside its time (messages.baseline_line): its registers and
    shared memory, and the profiler's report at its measured time, as a correct step's feedback prints them
    (step_profile); nothing for a fused program, whose baseline is the eager PyTorch program itself."""
    if messages.is_solution(module, task):
        return ""
    variant = module.variant(tag)
    params = {**variant.defaults(), **as_dict(params)}
    r = simulate(module, variant, params, task)
    return (f", {r.regs} registers, {r.smem_bytes} B shared memory\n"
            + profiler.text(profiler.profile(module, variant, params, task, time_ms)))


def turns(row: dict, timestamps: bool):
    """Yield, for each step of a public episode row: (step, verdict, weight, assistant message,
    feedback message, (best code, best ms, best step) before the step)."""
    module, base = REGISTRY[row["module"]], row["baseline"]
    task = make_task(module, row["gpu"], row["dtype"], row["shape"])
    best_code, best_ms, best_step = base["code"], base["time_ms"], 0
    for s, v in replay(row):
        w = weight(s, v)
        answer = {"role": "assistant", "content": messages.fence(s["code"], module.impl), "weight": w, "status": s["status"]}
        stamp = messages.hms(s["elapsed_s"]) if timestamps else ""
        feedback = {"role": "user", "content": messages.step_feedback(s, v, base["time_ms"], stamp, step_profile(module, task, s, v))}
        yield s, v, w, answer, feedback, (best_code, best_ms, best_step)
        best_ms, best_step = s["best_ms"], v.best_step
        if s["kept"]:
            best_code = s["code"]


def step_profile(module, task, s: dict, v: Verdict) -> str:
    """The profiler's report of a correct step's candidate at its measured time (profiler.text), recomputed
    from the simulator's launch and cost model; none for a failed step or a re-measure of the best's code."""
    if s["status"] != "ok" or v.remeasure:
        return ""
    return profiler.text(profiler.profile(module, module.variant(s["tag"]), as_dict(s["params"]), task, s["time_ms"]))


def _steps(row: dict, timestamps: bool):
    """(system, first user message, [(step, weight, assistant, feedback)], opener) of a public
    episode row; opener(k) is step k's prompt: the task, the compact history, the last result
    and the current best (the step row's user turn, a later window's first user turn)."""
    module, task, system, first, reference = _opening(row)
    impl, base = module.impl, row["baseline"]
    header = messages.task_header(module, task, reference)
    pairs, states, history, last_fb = [], [], [], None
    unit = messages.time_unit(base["time_ms"])
    first_run = {base["code"]: 0}               # code -> the step that first submitted it (0: the baseline)
    fixed = messages.task_constants(module, task, [base["tag"]] + [s["tag"] for s in row["steps"]])
    facts = baseline_facts(module, task, base["tag"], base["params"], base["time_ms"])
    for s, v, w, answer, feedback, best in turns(row, timestamps):
        states.append((len(history), best, last_fb))
        pairs.append((s, w, answer, feedback))
        history.append(messages.history_line(s, unit, first_run.get(s["code"]), fixed, v.remeasure))
        first_run.setdefault(s["code"], s["step"])
        last_fb = feedback["content"]

    def opener(k: int) -> str:
        n, (best_code, best_ms, best_step), last = states[k]
        return messages.step_prompt(header, history[:n], best_code, impl, best_ms, base["time_ms"], best_step, last, facts)
    return system, first, pairs, opener


def multiturn_rows(row: dict, timestamps: bool = False, max_context_tokens: int = 0, steps=None) -> list:
    """The multi-turn window rows of a public episode row (`steps`: its _steps, when built).

    With max_context_tokens > 0 a session longer than the budget is split into windows;
    each later window opens with the step prompt (opener) of its first step
    (messages.message_tokens counts tokens). A window always holds at least one step."""
    system, first, pairs, opener = steps or _steps(row, timestamps)
    windows = _windows(system, first, [(a, f) for _, _, a, f in pairs], opener, max_context_tokens)
    meta = {"schema": SCHEMA["multiturn"], "id": row["id"], "task_id": row["task_id"], "module": row["module"],
            "op": row["op"], "impl": REGISTRY[row["module"]].impl, "gpu": row["gpu"], "dtype": row["dtype"],
            "shape": row["shape"], "num_steps": len(row["steps"]), "torch_eager_ms": row["torch_eager_ms"],
            "torch_compile_ms": row["torch_compile_ms"], "best_speedup": row["best"]["speedup"],
            "best_speedup_vs_torch": row["best"]["speedup_vs_torch"]}
    return [{k: {**meta, "window": i, "windows": len(windows), "messages": msgs}[k] for k in MULTITURN_KEYS}
            for i, msgs in enumerate(windows)]


def chat_rows(row: dict, timestamps: bool = False, max_context_tokens: int = 0) -> tuple[list, list]:
    """(multi-turn windows, step rows) of a public episode row."""
    steps = _steps(row, timestamps)
    system, _, pairs, opener = steps
    impl = REGISTRY[row["module"]].impl
    step_rows = []
    for i, (s, w, answer, _) in enumerate(pairs):
        values = {"schema": SCHEMA["step"], "id": f"{row['id']}-{s['step']:03d}", "episode_id": row["id"],
                  "step": s["step"], "kind": s["kind"], "status": s["status"], "failure": s["failure"],
                  "kept": s["kept"], "weight": w, "module": row["module"], "gpu": row["gpu"], "impl": impl,
                  "torch_eager_ms": row["torch_eager_ms"], "torch_compile_ms": row["torch_compile_ms"],
                  "messages": [system, {"role": "user", "content": opener(i)}, answer]}
        step_rows.append({k: values[k] for k in STEP_ROW_KEYS})
    return multiturn_rows(row, timestamps, max_context_tokens, steps), step_rows


def session_messages(row: dict, timestamps: bool) -> list:
    """The whole session as one chat: system, user task, then each step's assistant turn and
    its feedback turn (the last step's feedback too: it reports the final best)."""
    _, _, system, first, _ = _opening(row)
    msgs = [system, first]
    for _, _, _, answer, feedback, _ in turns(row, timestamps):
        msgs += [answer, feedback]
    return msgs


def _windows(system: dict, first: dict, turns: list, opener, budget: int) -> list[list]:
    """Split the session into windows within `budget` tokens; each ends on an assistant turn."""
    out, msgs = [], [system, first]
    size, has_step = _tokens(msgs), False
    for k, (answer, feedback) in enumerate(turns):
        need = messages.message_tokens(answer)
        if budget and has_step and size + need > budget:
            out.append(msgs[:-1])                      # drop the trailing feedback: the opener carries it
            msgs = [system, {"role": "user", "content": opener(k)}]
            size = _tokens(msgs)
        msgs.append(answer)
        size += need
        has_step = True
        if k < len(turns) - 1:
            msgs.append(feedback)
            size += messages.message_tokens(feedback)
    out.append(msgs)
    return out


def episode_rows(plan: Plan, index: int) -> tuple[dict, dict]:
    """({file key (writers.STREAMED): rows}, the public episode row) of one plan index."""
    from .training import prompt_completion_rows
    row = build_episode(plan, index).row()
    out = plan.profile.output
    mts, steps = chat_rows(row, out.timestamps, out.max_context_tokens)
    return {"episodes": [row], "sft_multiturn": mts, "sft_steps": steps,
            "sft_prompt_completion": prompt_completion_rows(steps)}, row
