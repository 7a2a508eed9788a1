"""Per-module data for scripts/gpu_check.py: check shapes, tolerance classes and adapters.

A module whose op spec carries an `entry` (kernelstrain/ops/contract.py) needs nothing here: its
check shape and tolerance class come from the spec (`check_shape`, `tolerance`), and its
arguments from the entry (`entry_adapter`, `entry_triton_adapter`): an input tensor named in the
spec's `inputs` is the candidate's copy of that reference input, any other input tensor or
scalar the reference Model's attribute of that name (or a task dim), an output a poisoned buffer
compared with the reference's result of that name; an inout tensor is compared in place. A spec
may define `check_adapter` / `check_prepare` (same forms as below) where that is not enough.
The tables below hold the modules not converted yet (empty since every op module has an entry).

A CUDA adapter maps the reference's inputs (and the reference Model's weights) to the host entry
point's arguments, in `module.signature(task)` order without the stream:

    adapter(dims, model, inputs, ref, out_like) -> (args, outs)

`inputs` are the candidate's own copies of the reference inputs, `ref` the reference output(s),
`out_like(t)` a poisoned tensor shaped like t. `args` holds tensors (device pointers), Python
scalars, or HostPtrs / HostI64 (arrays in host memory). `outs` lists what to compare:
(name, candidate, reference[, tol]) where candidate is a tensor or a callable evaluated after the
launch, and tol a TOLS class name or a callable check(torch, out, ref) -> result dict.

A Triton adapter maps the same inputs to the wrapper's arguments and its return value to outs:

    adapter(dims, model, inputs) -> (args, outs_of(ret, ref))

Modules without one are called as wrapper(*inputs) and the return value(s) compared with the
reference output(s) in order. PREPARE[name](dims, inputs) edits the reference inputs before the
copies are taken (non-zero caches, padding tokens, ragged lengths).
"""
from __future__ import annotations

from ..tolerances import GPU_CHECK

# One check shape per module: one of its own shapes or a smaller realistic one, so a case runs
# well under a second; with masked tails / non-power-of-two dims where its shapes have them.
SHAPES = {}

TOLS = GPU_CHECK    # output tolerance classes (kernelstrain/tolerances.py says what each measures)
TOL_OF_MODULE = {}


# -- CUDA adapters ----------------------------------------------------------------------------

ADAPTERS = {}


# -- Triton adapters ---------------------------------------------------------------------------

def default_outs(ret, ref):
    if isinstance(ref, (tuple, list)):
        if not isinstance(ret, (tuple, list)) or len(ret) != len(ref):
            raise TypeError(f"wrapper returned {type(ret).__name__}, reference has {len(ref)} outputs")
        return [(f"out{i}", o, r) for i, (o, r) in enumerate(zip(ret, ref))]
    return [("y", ret, ref)]


TRITON_ADAPTERS = {}

PREPARE = {}


# -- adapters from the op's entry ------------------------------------------------------------

def _tensor_arg(module, a, model, x):
    if a.name in module.inputs:
        return x[module.inputs.index(a.name)]
    v = getattr(model, a.name)
    return getattr(v, "data", v)


def _scalar_arg(s, d, model):
    if s.name in d:
        return d[s.name]
    if s.value is not None:
        return eval(s.value, {"__builtins__": {}}, dict(d))   # noqa: S307 - the spec's own expression
    return getattr(model, s.name)


def entry_adapter(module):
    """The CUDA adapter of a module with an entry: args in entry order, outs in result order."""
    e = module.entry

    def adapter(d, model, x, ref, out_like):
        refs = ref if len(e.results) > 1 else (ref,)
        of = dict(zip(e.results, refs))
        args, made = [], {}
        for a in e.args:
            if not hasattr(a, "role"):
                args.append(_scalar_arg(a, d, model))
            elif a.role == "out":
                made[a.name] = out_like(of[a.name])
                args.append(made[a.name])
            else:
                args.append(_tensor_arg(module, a, model, x))
        outs = [(n, made[n] if n in made else args[[a.name for a in e.args].index(n)], of[n]) for n in e.results]
        return args, outs
    return adapter


def entry_triton_adapter(module):
    """The Triton adapter of a module with an entry: the wrapper takes the in/inout tensors and
    the scalars the Model has; a result that is an inout tensor is checked in place."""
    e = module.entry

    def adapter(d, model, x):
        args = [_tensor_arg(module, a, model, x) for a in e.tensors if a.role != "out"]
        args += [getattr(model, s.name) for s in e.scalars if s.name not in d and s.value is None
                 and hasattr(model, s.name)]
        inplace = {a.name: args[i] for i, a in enumerate(t for t in e.tensors if t.role != "out")}

        def outs_of(ret, ref):
            rets = ret if len(e.results) > 1 else (ret,)
            refs = ref if len(e.results) > 1 else (ref,)
            return [(n, inplace[n] if e.arg(n).role == "inout" else r, f)
                    for n, r, f in zip(e.results, rets, refs)]
        return args, outs_of
    return adapter


def check_shape(module) -> dict | None:
    return module.check_shape or SHAPES.get(module.name)


def tolerance(module, dtype: str) -> str:
    return module.tolerance or TOL_OF_MODULE.get(module.name, dtype if dtype in TOLS else "quant")


def cuda_adapter(module):
    return getattr(module, "check_adapter", None) or (entry_adapter(module) if module.entry else
                                                       ADAPTERS.get(module.name))


def triton_adapter(module):
    return getattr(module, "check_adapter", None) or (entry_triton_adapter(module) if module.entry else
                                                       TRITON_ADAPTERS.get(module.name))


# Modules whose prepare shrinks the work below the task's: paged decode's ragged seq_lens (lengths in [S/2, S], ~0.75
# of the task's KV bytes on average) are what the correctness pass must see (masked page tails), but the task, and
# the simulator, time full-length S; the seeds 98181/98282 paged_decode_cuda rows timed the ragged work, and a
# G=1 fit to them put 14 default ok steps under the DRAM roofline (296e258). Timed runs skip such a prepare.
WORK_SHRINKING_PREPARE = ("paged_decode_cuda", "paged_decode_triton")


def prepare(module, timing: bool = False):
    """The module's input preparation (None: none); for a timed run, none where it would shrink the task's work."""
    if timing and module.name in WORK_SHRINKING_PREPARE:
        return None
    return getattr(module, "check_prepare", None) or PREPARE.get(module.name)


def covered(module) -> bool:
    return check_shape(module) is not None and (module.impl == "triton" or cuda_adapter(module) is not None)

