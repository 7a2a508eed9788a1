"""Agent workspaces: one directory per task that an agent (or a person) can implement ->
build -> verify -> profile -> iterate in, runnable as it is on a GPU machine with PyTorch.

    model.py            the reference (KernelBench form: Model, get_inputs, get_init_inputs)
    model_new.py        ModelNew: the reference's constructor, forward through the custom kernel
    kernels/            the candidate (the baseline, or step N of an episode)
    binding/            CUDA: binding.cpp (from the op's entry) and trampoline.cu
    build.py verify.py profile.py harness.py    the scripts (read-only for the agent)
    task.json           the task, the candidate, the tolerance, the recorded times
    SKILL.md            the rules and the target to beat
    kernelbench/        single-op tasks: problem.py and solution.py, the task and the candidate as
                        the KernelBench export writes them (one self-contained file each, no __file__)
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from ..errors import UsageError
from ..gpucheck.adapters import TOLS, tolerance
from ..tolerances import KERNELBENCH, KERNELBENCH_DEFAULT
from ..ops.contract import TORCH
from ..safety import check_tree_out, write_tree
from .render import binding_sources, fused_forward, kernel_file, model_new
from .subject import Subject, find_subject

SCRIPTS = ("harness.py", "build.py", "verify.py", "profile.py")
# what a workspace holds at its top level: --force replaces these and leaves every other file
WORKSPACE_NAMES = ("model.py", "model_new.py", "task.json", "SKILL.md", "kernels", "binding", "kernelbench", *SCRIPTS)


def template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def task_tolerance(subject: Subject) -> dict:
    """The task's tolerance: the op's own class (the gpu-check one), KernelBench's for fused tasks."""
    if subject.kind == "fused":
        t = KERNELBENCH.get(subject.dtype, KERNELBENCH_DEFAULT)
        return {"class": "kernelbench", "atol": t, "rtol": t}
    name = tolerance(subject.module, subject.dtype)
    return {"class": name, **TOLS[name]}


def output_tolerances(subject: Subject) -> list | None:
    """One tolerance per result, in the reference's return order, where the entry gives a result
    its own class (Arg.tol) or a dtype to compare it as (Arg.view: torch's name); else None."""
    if subject.kind == "fused":
        return None
    e = subject.module.entry
    args = [e.arg(n) for n in e.results]
    if not any(a.tol or a.view for a in args):
        return None
    base = task_tolerance(subject)
    return [{"name": a.name, **({"class": a.tol, **TOLS[a.tol]} if a.tol else base),
             "view": TORCH[a.view] if a.view else None} for a in args]


def hand_adapted(subject: Subject) -> bool:
    """True when gpu-check feeds this op through a hand-written adapter or input preparation
    (the spec's check_adapter / check_prepare): a stricter check than KernelBench's (prepared
    inputs, a per-output tolerance class). ModelNew itself takes its arguments from the entry."""
    m = subject.module
    return bool(m and (getattr(m, "check_adapter", None) or getattr(m, "check_prepare", None)))


def task_json(subject: Subject) -> dict:
    c = subject.candidate
    return {"task_id": subject.task_id, "kind": subject.kind, "split": subject.split, "title": subject.title,
            "desc": subject.desc, "dtype": subject.dtype, "gpu": subject.gpu, "arch": subject.arch,
            "module": subject.module.name if subject.module else None,
            "impl": subject.module.impl if subject.module else None,
            "shape": dict(subject.task.shape) if subject.task else None,
            "candidate": {"label": c.label if c else "PyTorch reference forward (no custom kernel yet)",
                          "episode": c.episode if c else None, "step": c.step if c else None,
                          "tag": c.tag if c else None, "status": c.status if c else None,
                          "time_ms": c.time_ms if c else None},
            "baseline_ms": subject.baseline_ms, "best_ms": subject.best_ms,
            "eager_ms": subject.eager_ms, "compiled_ms": subject.compiled_ms,
            "tolerance": task_tolerance(subject), "output_tolerances": output_tolerances(subject),
            "needs_grad": ".backward(" in subject.reference,
            "hand_adapted": hand_adapted(subject),
            "kernel": f"kernels/{kernel_file(subject)}"}


def workdir_files(subject: Subject) -> dict:
    """{relative path: text} of the workspace."""
    files = {"model.py": subject.reference, "model_new.py": model_new(subject),
             "task.json": json.dumps(task_json(subject), indent=2) + "\n", "SKILL.md": skill(subject)}
    kfile = f"kernels/{kernel_file(subject)}"
    if subject.kind == "fused":
        files[kfile] = subject.candidate.code if subject.candidate else fused_forward(subject.reference)
    else:
        files[kfile] = subject.candidate.code
        if subject.module.impl == "cuda":
            files["binding/binding.cpp"], files["binding/trampoline.cu"] = binding_sources(subject)
        # model_new.py reads kernels/ beside it (__file__), which KernelBench's exec cannot give it:
        # the KernelBench form of the same candidate is the export's (imported here: the export
        # package imports this one)
        from ..export.kb_form import problem_source, solution_source
        files["kernelbench/problem.py"], files["kernelbench/solution.py"] = \
            problem_source(subject), solution_source(subject)
    files.update({name: template(name) for name in SCRIPTS})
    return files


def build_workdir(data: Path, task_id: str, out: Path, step: int | None = None, episode: str | None = None,
                  force: bool = False) -> tuple[Subject, dict]:
    """Write the workspace of one task to `out` (staged, then renamed into place)."""
    check_tree_out(out, [data], force)
    subject = find_subject(data, task_id, step=step, episode=episode)
    files = workdir_files(subject)
    write_tree(out, files.items(), WORKSPACE_NAMES)
    return subject, files


def skill(subject: Subject) -> str:
    """SKILL.md: the workflow, the rules, and the target to beat."""
    fused = subject.kind == "fused"
    impl = "CUDA or Triton" if fused else subject.module.impl.upper() if subject.module.impl == "cuda" else "Triton"
    kfile = f"kernels/{kernel_file(subject)}"
    if fused and subject.candidate:
        c = subject.candidate
        start = (f"`{kfile}` holds the candidate to improve, a complete KernelBench solution (class ModelNew): "
                 f"{c.label}, recorded status `{c.status}`. Library calls it keeps (GEMM, convolution ...) are "
                 "allowed; fuse what surrounds them.")
        target = _times("recorded eager", subject.eager_ms, "recorded torch.compile", subject.compiled_ms)
        target += f", recorded best {subject.best_ms:.4f} ms (simulated on {subject.gpu}, {subject.arch})"
    elif fused:
        start = (f"`{kfile}` holds the fused program's forward in PyTorch operators: there is no custom kernel for "
                 "this task yet. It is the starting point to replace, and it breaks rule 1 until you do.")
        target = _times("measured eager", subject.eager_ms, "measured torch.compile", subject.compiled_ms)
    else:
        c = subject.candidate
        start = f"`{kfile}` holds the candidate to improve: {c.label}, recorded status `{c.status}`."
        target = _times("recorded baseline", subject.baseline_ms, "recorded best", subject.best_ms)
        target += f" (simulated on {subject.gpu}, {subject.arch})"
    binding = "" if fused or subject.module.impl != "cuda" else (
        "- `binding/binding.cpp` is the PyTorch binding generated from the op's entry point (it checks every "
        "tensor's device, dtype and shape, allocates the outputs and calls the kernel through "
        "`binding/trampoline.cu`). Keep the host function's signature so both still fit.\n")
    if not fused:
        from ..export.kb_form import precision        # the export package imports this one
        binding += ("- `kernelbench/problem.py` and `kernelbench/solution.py` are this task and the candidate above as "
                    "KernelBench's harness runs them (`eval_kernel_against_ref` with backend "
                    f"`{subject.module.impl}`, precision `{precision(subject)}`): one self-contained file each, "
                    "written with the workspace; they keep the candidate you were given, not your edits.\n")
    return f"""# Task: {subject.title} ({subject.dtype})

{subject.desc}

{start}

## Workflow
1. Edit the kernel in `kernels/` ({impl}).
2. `python3 build.py` compiles it (errors show the compiler's message).
3. `python3 verify.py` checks it against `model.py` on 5 seeded random inputs with poisoned outputs and
   the tolerance in `task.json`; it names the first failing element.
4. `python3 profile.py` times eager PyTorch, `torch.compile` and your kernel (CUDA events, L2 flushed,
   median and spread over 30 trials).
5. Keep a change only when verify passes and profile shows it faster; iterate.

## Rules
1. No PyTorch operators on the custom path: `ModelNew.forward` only calls the custom kernel (allocating
   outputs in the binding or the kernel's wrapper is fine; computing with torch.* is not).
2. `build.py`, `verify.py`, `profile.py`, `harness.py`, `model.py` and `task.json` are read-only.
- `model_new.py` keeps the reference's constructor and forward signature (KernelBench's contract).
{binding}
## Target to beat
{target}; on your GPU, beat the eager and `torch.compile` times that `profile.py` prints.
"""


def _times(a_name, a, b_name, b) -> str:
    parts = [f"{n} {v:.4f} ms" for n, v in ((a_name, a), (b_name, b)) if v]
    return ", ".join(parts) if parts else "no recorded time"
