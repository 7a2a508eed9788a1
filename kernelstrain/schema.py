"""Record types, kinds, statuses and key orders of every row — defined once.

Engine, writers, stats, validate, qa and the card import these names; a row's key order
is its dataclass's field order, so `Step(...).row()` and `list(STEP_KEYS)` always agree.

>>> s = Step(1, "rebench", "naive", {}, "code", "ok", None, None, None, 0.5, 0, 32, None, False, 0.5, 60)
>>> list(s.row()) == list(STEP_KEYS)
True
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .fields import params_field

SCHEMA = {
    "episode": "kernelstrain/episode@3",
    "session": "kernelstrain/session@2",
    "multiturn": "kernelstrain/sft_multiturn@3",
    "step": "kernelstrain/sft_step@3",
    "prompt_completion": "kernelstrain/sft_prompt_completion@1",
    "holdout": "kernelstrain/holdout_task@1",
    "stats": "kernelstrain/stats@1",
    "qa": "kernelstrain/qa@1",
    "qa_batch": "kernelstrain/qa_batch@1",
    "manifest": "kernelstrain/manifest@1",
    "kernelbench_export": "kernelstrain/kernelbench_export@1",     # an export's index.json
    "fused_stats": "kernelstrain/fused_stats@1",                   # a fused-task directory's stats.json
}

# What a step changed, relative to the current best (the code the agent edits):
#   structural  - the variant (rung) differs
#   param_sweep - same variant, exactly one parameter differs
#   joint       - same variant, two or more parameters differ
#   rebench     - the best's code resubmitted unchanged (a re-measurement)
#   endgame     - late in the episode: one parameter moved to an adjacent value
KINDS = ("structural", "param_sweep", "joint", "rebench", "endgame")
STATUSES = ("ok", "wrong_result", "compile_error")
ENDS = ("converged", "budget", "time")      # why a session ended: nothing left / step budget / time budget
# Why a step failed (null when ok): compile-time classes, then run-time ones.
# type / constexpr: the slips catalogue's kinds other than a typo (kernelstrain/slips)
FAILURES = ("arch", "smem", "resources", "syntax", "mismatch", "fault", "type", "constexpr")
COMPILE_FAILURES = ("arch", "smem", "resources", "syntax", "type", "constexpr")


@dataclass(frozen=True)
class Step:
    """One candidate: what was submitted, what the harness said, the best after it."""
    step: int
    kind: str
    tag: str                  # the variant
    params: dict
    code: str
    status: str
    failure: str | None       # one of FAILURES, null when ok
    bug: str | None           # the risky transformation written into the code (ops.base.BUGS)
    typo: int | None          # the slip written into the code (slips.apply): kind slips.NAMES[typo // 1000]
                              # (0: a misspelt name, mutations.py), site typo % 1000; null when none
    time_ms: float | None     # this step's measurement, null unless ok
    smem_bytes: int
    regs: int
    error: str | None         # the tool's text when not ok
    kept: bool
    best_ms: float            # recorded time of the best after this step (mean of its runs)
    elapsed_s: int

    def row(self) -> dict:
        return {f: params_field(self.params) if f == "params" else getattr(self, f) for f in STEP_KEYS}


@dataclass(frozen=True)
class Baseline:
    tag: str
    params: dict
    code: str
    time_ms: float

    def row(self) -> dict:
        return {"tag": self.tag, "params": params_field(self.params), "code": self.code, "time_ms": self.time_ms}


@dataclass(frozen=True)
class Episode:
    """A whole trajectory; `row()` is the episodes.jsonl object in EPISODE_KEYS order."""
    schema: str
    id: str
    task_id: str
    op: str
    impl: str
    module: str
    family: str
    gpu: str
    arch: str
    dtype: str
    shape: list               # [{dim, value}, ...] (fields.shape_field)
    signature: str
    desc: str
    baseline: Baseline
    torch_eager_ms: float | None      # the PyTorch reference program's time, eager (episodes.torch_times)
    torch_compile_ms: float | None    # and under torch.compile; null where the calibration has none
    steps: tuple              # Step, ...
    best: dict                # {step, time_ms, speedup, speedup_vs_torch}
    attempts: dict            # {kept, reverted, errors, rebench}
    end: str                  # one of ENDS
    elapsed_s: int
    seed: int
    generator: str

    def row(self) -> dict:
        out = {f: getattr(self, f) for f in EPISODE_KEYS}
        out["baseline"] = self.baseline.row()
        out["steps"] = [s.row() for s in self.steps]
        return out


STEP_KEYS = tuple(f.name for f in fields(Step))
EPISODE_KEYS = tuple(f.name for f in fields(Episode))
# sessions layout: a step of the trace is the episode's step without its code (re-rendered
# from tag, params, bug and typo); the session carries the whole chat in `messages`
TRACE_KEYS = tuple(k for k in STEP_KEYS if k != "code")
SESSION_KEYS = ("schema", "id", "task_id", "op", "impl", "module", "family", "gpu", "arch", "dtype", "shape",
                "signature", "desc", "baseline_ms", "torch_eager_ms", "torch_compile_ms", "baseline", "best", "attempts", "end", "num_steps", "elapsed_s",
                "elapsed_hms", "seed", "generator", "trace", "messages")
MULTITURN_KEYS = ("schema", "id", "task_id", "window", "windows", "module", "op", "impl", "gpu", "dtype",
                  "shape", "num_steps", "torch_eager_ms", "torch_compile_ms", "best_speedup",
                  "best_speedup_vs_torch", "messages")
STEP_ROW_KEYS = ("schema", "id", "episode_id", "step", "kind", "status", "failure", "kept", "weight",
                 "module", "gpu", "impl", "torch_eager_ms", "torch_compile_ms", "messages")
PROMPT_COMPLETION_KEYS = ("schema", "id", "episode_id", "step", "kind", "module", "gpu", "impl", "prompt", "completion")


# -- the configs' features, declared in the dataset card (card.py) -------------------------
# `datasets` infers each chunk's Arrow schema alone: a field that is null in every row of a
# chunk (a step's bug, typo, error) would become a null column there and fail to cast later.
# Declaring the features fixes each column's type. A type is a dtype name, a dict (struct) or
# a one-element list (a list of that type).
_PAIR = {"name": "string", "value": "int64"}
_DIM = {"dim": "string", "value": "int64"}
_BEST = {"step": "int64", "time_ms": "float64", "speedup": "float64", "speedup_vs_torch": "float64"}
_MESSAGE = {"role": "string", "content": "string", "weight": "int64", "status": "string"}
_TASK = {"schema": "string", "op": "string", "impl": "string", "module": "string", "family": "string",
         "gpu": "string", "arch": "string", "dtype": "string", "shape": [_DIM], "signature": "string",
         "desc": "string"}
STEP_FEATURES = {"step": "int64", "kind": "string", "tag": "string", "params": [_PAIR], "code": "string",
                 "status": "string", "failure": "string", "bug": "string", "typo": "int64", "time_ms": "float64",
                 "smem_bytes": "int64", "regs": "int64", "error": "string", "kept": "bool", "best_ms": "float64",
                 "elapsed_s": "int64"}
FEATURES = {
    "episodes": {**{k: "string" for k in ("schema", "id", "task_id")}, **_TASK,
                 "baseline": {"tag": "string", "params": [_PAIR], "code": "string", "time_ms": "float64"},
                 "torch_eager_ms": "float64", "torch_compile_ms": "float64",
                 "steps": [STEP_FEATURES], "best": _BEST,
                 "attempts": {k: "int64" for k in ("kept", "reverted", "errors", "rebench")},
                 "end": "string", "elapsed_s": "int64", "seed": "int64", "generator": "string"},
    "sft_multiturn": {"schema": "string", "id": "string", "task_id": "string", "window": "int64", "windows": "int64",
                      **{k: "string" for k in ("module", "op", "impl", "gpu", "dtype")}, "shape": [_DIM],
                      "num_steps": "int64", "torch_eager_ms": "float64", "torch_compile_ms": "float64",
                      "best_speedup": "float64", "best_speedup_vs_torch": "float64", "messages": [_MESSAGE]},
    "sft_steps": {"schema": "string", "id": "string", "episode_id": "string", "step": "int64", "kind": "string",
                  "status": "string", "failure": "string", "kept": "bool", "weight": "int64",
                  **{k: "string" for k in ("module", "gpu", "impl")}, "torch_eager_ms": "float64",
                  "torch_compile_ms": "float64", "messages": [_MESSAGE]},
    "sft_prompt_completion": {**{k: "string" for k in ("schema", "id", "episode_id")}, "step": "int64",
                              **{k: "string" for k in ("kind", "module", "gpu", "impl")},
                              "prompt": [{"role": "string", "content": "string"}],
                              "completion": [{"role": "string", "content": "string"}]},
    "sessions": {**{k: "string" for k in ("schema", "id", "task_id")}, **_TASK, "baseline_ms": "float64",
                 "torch_eager_ms": "float64", "torch_compile_ms": "float64",
                 "baseline": {"tag": "string", "params": [_PAIR]}, "best": _BEST,
                 "attempts": {k: "int64" for k in ("kept", "reverted", "errors", "rebench")},
                 "end": "string", "num_steps": "int64", "elapsed_s": "int64", "elapsed_hms": "string",
                 "seed": "int64", "generator": "string",
                 "trace": [{k: v for k, v in STEP_FEATURES.items() if k != "code"}], "messages": [_MESSAGE]},
    "holdout": {"task_id": "string", "split": "string", **_TASK, "prompt": "string", "system": "string",
                "baseline": {"tag": "string", "code": "string", "time_ms": "float64"}, "reference": "string"},
}


# The check each finding fails, by id. The row checks are the mechanical checks a sessions
# batch's QA report scores (validate_sessions.MECHANICAL); the rest concern the files as a whole.
ROW_CHECKS = {
    "rows_and_schema": "every line a JSON object of schema session@2, keys in order, fields typed",
    "ids_and_task": "ids in order; task fields, task id, seed and generator; no held-out combo",
    "code_and_feedback": "code re-rendered from the trace; messages rebuilt from the steps up to their own",
    "stamps": "feedback stamps [t+H:MM:SS] monotone and equal to each step's elapsed_s; elapsed_hms",
    "best_running_minimum": "best_ms the recorded best after every step; best and speedup",
    "keep_rule": "kept exactly when the noise-aware keep rule keeps; a rebench never kept",
    "non_ok_never_kept": "a compile_error or wrong_result step is never kept",
    "time_ms_iff_ok": "time_ms null and error set exactly when not ok; bugs and typos only on failures",
    "arch_gates": "no arch-gated feature on a GPU without it; error texts are the compiler's",
    "smem_caps": "shared memory within the GPU's per-block cap; smem and registers the simulator's",
    "attempts_and_kinds": "attempts counted from the trace; each kind says what changed",
}
CHECKS = {**ROW_CHECKS,
          "files": "every file present, with the rows, bytes and sha256 stats.json records; batches concatenate",
          "manifest": "the run manifest and stats.json describe the same run",
          "stats": "stats.json recomputed from the files",
          "holdout": "the held-out rows are the plan's split",
          "contamination": "no held-out op, GPU or solution in training; contamination figures as recorded",
          "derived": "the card and the QA reports are what generate writes for the data"}
