"""Dataset code runs, or is copied into files that run, only when it is the code kernelstrain
renders from the row's own recipe.

Every candidate in a dataset is a pure function of its recipe: the module's render of the
variant and parameters for the task (plus the planted bug), then the typo slip, if any —
what `validate` re-renders. A row whose code differs (edited, or crafted by whoever shared
the dataset) is refused here before `verify` compiles and imports it, `gpu-check` builds and
runs it, `tasks filter` executes it, or `workdir` / `export` write it into a file that runs
on import. The commands that run code take `--trust-dataset` to run such rows anyway.
"""
from __future__ import annotations

from .errors import UsageError
from .fields import as_dict
from .gpus import GPUS
from .ops import REGISTRY
from .rerender import cached_task, render_code, with_typo
from .safety import terminal_text

TRUST_HINT = ("kernelstrain runs or copies only code it re-renders from the row's recipe "
              "(`kernelstrain validate` finds such rows)")
RUN_HINT = "; pass --trust-dataset to execute the dataset's code as it is"


def hint(runs: bool) -> str:
    return TRUST_HINT + (RUN_HINT if runs else "")


def rendered(ep: dict, step: dict | None) -> str | None:
    """The code kernelstrain renders for the baseline (step None) or a step of episode row `ep`;
    None when the recipe itself is not one kernelstrain knows (unknown module, variant, params)."""
    try:
        module, gpu = REGISTRY[ep["module"]], GPUS[ep["gpu"]]
        shape = tuple(as_dict(ep["shape"]).items())
        recipe = ep["baseline"] if step is None else step
        bug = None if step is None else step.get("bug")
        # a held-out row's baseline names no params: its rung at its defaults
        params = as_dict(recipe["params"]) if "params" in recipe else module.variant(recipe["tag"]).defaults()
        code = render_code(ep["module"], ep["gpu"], ep["dtype"], shape, recipe["tag"], tuple(params.items()), bug)
        if step is not None and step.get("typo") is not None:
            broken = with_typo(code, module.impl, step["typo"], gpu.arch if gpu.vendor == "amd" else "",
                               ep["dtype"], shape)
            code = broken[0] if broken else None
        return code
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None


def check_code(ep: dict, step: dict | None, code: str, where: str, runs: bool = False) -> None:
    """Raise unless `code` is the render of its recipe (the baseline's, or `step`'s)."""
    if not isinstance(code, str) or rendered(ep, step) != code:
        what = "baseline" if step is None else f"step {terminal_text(str(step.get('step')))}"
        raise UsageError(f"{where}: the {what}'s code is not what its recipe renders; {hint(runs)}")


def check_reference(ep: dict, reference, where: str) -> None:
    """Raise unless `reference` (a held-out row's PyTorch program) is the module's own."""
    try:
        want = REGISTRY[ep["module"]].reference(cached_task(ep["module"], ep["gpu"], ep["dtype"],
                                                            tuple(as_dict(ep["shape"]).items())))
    except (KeyError, TypeError, ValueError, AttributeError):
        want = None
    if reference != want:
        raise UsageError(f"{where}: the reference program of task {terminal_text(repr(ep.get('task_id')))} is not "
                         f"its module's; {TRUST_HINT}")


def check_fused(row: dict, where: str, runs: bool = False) -> None:
    """Raise unless a fused candidate's source is what `tasks fused` composes for its seed and index."""
    from .fused.dataset import candidate
    try:
        want = candidate(row["seed"], row["index"])
    except (KeyError, TypeError, ValueError, IndexError):
        want = None
    if not want or any(row.get(k) != want[k] for k in ("id", "source")):
        raise UsageError(f"{where}: fused candidate {terminal_text(repr(row.get('id')))} is not what `tasks fused` "
                         f"composes for its seed and index; {hint(runs)}")
