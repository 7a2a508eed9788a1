"""PyTorch reference times: the KernelBench-form reference program of a module, eager and under
torch.compile, as measured on the H200 (calibration/h200_references.json) and carried to other
GPUs, dtypes and shapes by the roofline. Episodes report them as torch_eager_ms and
torch_compile_ms (episodes.torch_times).
"""
from __future__ import annotations

import math

from .calibration import read_data
from .sim import roofline_floor_ms
from .tasks import make_task

_REFERENCES: dict = {}


def _references() -> dict:
    if not _REFERENCES:
        for row in read_data("h200_references.json")["references"]:
            _REFERENCES.setdefault(row["module"], []).append(row)
    return _REFERENCES


_TIMES: dict = {}             # (module, GPU record, task, mode) -> (module, GPU record: kept alive, time)
TIMES_MAX = 1 << 12           # tasks x modes: each asked by an episode's baseline rung and its row, again by validate


def reference_ms(module, task, mode: str = "eager") -> float | None:
    """_reference_ms, once a process for each (module, task, mode): a pure function of the three."""
    key = (id(module), id(task.gpu), task.module, task.dtype, task.shape, mode)
    found = _TIMES.get(key)
    if found is None:
        if len(_TIMES) >= TIMES_MAX:
            _TIMES.clear()
        found = _TIMES[key] = (module, task.gpu, _reference_ms(module, task, mode))
    return found[2]


def _reference_ms(module, task, mode: str = "eager") -> float | None:
    """Predicted time of the module's PyTorch reference program on task's GPU, dtype and shape.

    Measured on the H200 at each menu shape (dtype = the module's first); elsewhere the nearest
    measured shape by work is scaled: its fixed part (at most the program's fastest menu time:
    launch and host overhead, which no GPU or shape changes) is kept, the rest scales with the
    roofline floor (catalog bandwidth and peaks) from the H200 at that shape to the task.
    mode: 'eager' or 'compiled' (torch.compile); None where that mode has no measurement.

    >>> from kernelstrain.ops import REGISTRY
    >>> m = REGISTRY["rmsnorm_cuda"]
    >>> t = make_task(m, "H200", m.dtypes[0], {"T": 4096, "D": 4096})
    >>> _reference_ms(m, t) > 0 and _reference_ms(m, make_task(m, "A100", t.dtype, t.dims)) > _reference_ms(m, t)
    True
    """
    key = "compiled_ms" if mode == "compiled" else "eager_ms"
    rows = [r for r in _references().get(module.name, ()) if r.get(key)]
    if not rows:
        return None
    def floor_ms(t):      # on the module's fastest datapath; fp16's where the GPU lacks it (fp8 on A100)
        path = module.variants[-1].path
        return roofline_floor_ms(module, t, path if t.gpu.peak_tflops.get(path) else "fp16")
    floor = floor_ms(task)
    measured = [(r[key], floor_ms(make_task(module, "H200", r["dtype"], r["shape"]))) for r in rows]
    fixed_cap = min(t for t, _ in measured)
    t_ref, floor_ref = min(measured, key=lambda m: abs(math.log(max(floor, 1e-9) / max(m[1], 1e-9))))
    fixed = min(t_ref, fixed_cap)
    return fixed + (t_ref - fixed) * floor / max(floor_ref, 1e-12)
