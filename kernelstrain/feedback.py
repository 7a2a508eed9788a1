"""The text the model sees: system prompt, task prompt, per-step result feedback, and
the compact history of the step-level rows. Feedback reports this step and the best so
far, never anything later."""
from __future__ import annotations

from .fields import as_dict
from .ops.base import OpModule, Task

LANG = {"cuda": "cuda", "triton": "python"}
LANG_NAME = {"cuda": "CUDA C++", "triton": "Triton"}
TOLERANCE = {"fp32": (1e-4, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (2e-2, 2e-2), "fp8": (6e-2, 6e-2),
             "int8": (0.0, 0.0)}

SYSTEM = ("You are a GPU kernel engineer. Each turn, reply with one complete kernel source file in a "
          "single fenced code block and nothing else. The harness compiles it, checks it against the "
          "PyTorch reference and benchmarks it on the target GPU; the fastest correct version is kept.")


def fence(code: str, impl: str) -> str:
    return f"```{LANG[impl]}\n{code}\n```"


def fmt_ms(ms: float) -> str:
    return f"{ms:.4f} ms" if ms >= 0.001 else f"{ms * 1000:.2f} us"


def hms(seconds: float) -> str:
    s = int(seconds)
    return f"[t+{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}] "


def task_prompt(module: OpModule, task: Task, baseline_code: str, baseline_ms: float, reference: str) -> str:
    """The first user turn: the task, the reference program and the baseline to beat."""
    return (f"{task_header(module, task, reference)}\n"
            f"Baseline: {fmt_ms(baseline_ms)}\n{fence(baseline_code, module.impl)}\n"
            f"Reply with the complete {LANG_NAME[module.impl]} source in one fenced block.")


def task_header(module: OpModule, task: Task, reference: str) -> str:
    gpu = task.gpu
    shape = ", ".join(f"{k}={v}" for k, v in task.shape)
    dims = "; ".join(f"{k}: {v}" for k, v in module.dims.items())
    return (
        f"Task: make this {LANG_NAME[module.impl]} kernel faster — {module.title}.\n"
        f"GPU: {gpu.name} ({gpu.arch}, {gpu.sms} {'CUs' if gpu.vendor == 'amd' else 'SMs'}, "
        f"{gpu.bw_tbs} TB/s, {gpu.smem_per_block} B shared memory per block, warp {gpu.warp})\n"
        f"dtype: {task.dtype}; shape: {shape} ({dims})\n"
        f"Semantics: {module.desc}\n"
        f"Entry point: {module.signature(task)}\n"
        f"Reference (PyTorch):\n{fence(reference.rstrip(), 'triton')}"
    )


def best_line(best_ms: float, baseline_ms: float, best_step: int) -> str:
    origin = "baseline" if best_step == 0 else f"step {best_step}"
    return f"Best so far: {fmt_ms(best_ms)} ({baseline_ms / best_ms:.2f}x over baseline, {origin})."


def step_feedback(step: dict, prev_best_ms: float, baseline_ms: float, best_step: int,
                  stamp: str = "") -> str:
    """Feedback for one step, from that step's record and the best before/after it."""
    k, status = step["step"], step["status"]
    head = f"{stamp}Step {k} ({step['kind']}): "
    best = best_line(step["best_ms"], baseline_ms, best_step)
    if status == "compile_error":
        return f"{head}compile error.\n{step['error']}\nReverted. {best}"
    if status == "wrong_result":
        return f"{head}wrong result.\n{step['error']}\nReverted. {best}"
    res = f"{fmt_ms(step['time_ms'])}, {step['regs']} registers, {step['smem_bytes']} B shared memory"
    if step["kind"] == "rebench":
        spread = (step["time_ms"] / step["best_ms"] - 1) * 100
        return f"{head}rebenchmark of the current best: {res} ({spread:+.1f}% vs recorded). {best}"
    if step["kept"]:
        gain = prev_best_ms / step["time_ms"]
        return f"{head}correct, {res}. {gain:.2f}x faster than the previous best {fmt_ms(prev_best_ms)}: kept. {best}"
    slower = (step["time_ms"] / prev_best_ms - 1) * 100
    return f"{head}correct, {res}. {slower:+.1f}% vs best: reverted. {best}"


def mismatch_text(bug: str, module: OpModule, task: Task, rng) -> str:
    """A plausible correctness-harness report for a candidate carrying `bug`."""
    atol, rtol = TOLERANCE.get(task.dtype, (1e-2, 1e-2))
    dims = [v for _, v in task.shape]
    index = tuple(rng.randrange(max(1, d)) for d in dims[:2])
    if bug == "no_bounds_check" and module.impl == "cuda" and rng.random() < 0.5:
        return ("CUDA error: an illegal memory access was encountered (during the correctness run; "
                "compute-sanitizer: invalid __global__ write of size 16 bytes)")
    if bug == "no_bounds_check":
        index = tuple(max(0, d - 1 - rng.randrange(4)) for d in dims[:2])
    frac = {"missing_barrier": rng.uniform(0.1, 3), "half_accumulator": rng.uniform(5, 60),
            "wrong_init": rng.uniform(40, 100), "missing_scale": rng.uniform(90, 100),
            "off_by_one": rng.uniform(0.01, 2), "no_bounds_check": rng.uniform(0.01, 1),
            "bad_combine_index": rng.uniform(20, 95), "racy_update": rng.uniform(1, 30)}.get(bug, 10.0)
    err = {"half_accumulator": rng.uniform(3, 12) * max(atol, 1e-3), "missing_barrier": rng.uniform(0.2, 4),
           "off_by_one": rng.uniform(0.05, 1.5)}.get(bug, rng.uniform(0.3, 8))
    text = (f"Mismatch vs reference: max abs error {err:.3e} at index {index} "
            f"(atol={atol:g}, rtol={rtol:g}); {frac:.2f}% of elements outside tolerance.")
    if bug in ("missing_barrier", "racy_update"):
        text += " Two runs on the same input disagree."
    return text


def history_line(step: dict) -> str:
    """One line of the compact history in a step-level row."""
    params = ", ".join(f"{k}={v}" for k, v in as_dict(step["params"]).items())
    if step["status"] == "ok":
        res = f"{fmt_ms(step['time_ms'])}{' kept' if step['kept'] else ''}"
    else:
        res = step["status"]
    return f"- step {step['step']} {step['kind']} {step['tag']}({params}): {res}"


def step_prompt(header: str, history: list[str], best_code: str, impl: str, best_ms: float,
                baseline_ms: float, best_step: int) -> str:
    hist = "\n".join(history) if history else "(none yet)"
    return (f"{header}\nBaseline: {fmt_ms(baseline_ms)}\n\nHistory:\n{hist}\n{best_line(best_ms, baseline_ms, best_step)}\n"
            f"Current best:\n{fence(best_code, impl)}\nPropose the next candidate.")
