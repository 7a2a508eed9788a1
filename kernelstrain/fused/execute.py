"""Running one task's program with PyTorch (extra [exec]): eager, again with the same seed,
under torch.compile, and timed. Imported only inside filter worker processes.

The checks, in order; the first that fails is the rejection reason:
  eager_error      building the model / inputs or the eager forward raised
  bad_output       the forward did not return one floating-point tensor
  random_op        the same model on the same inputs gave a different output the second time
  nondeterministic rebuilding model and inputs from the same seed gave a different output
  nan_inf          the output holds NaN or Inf
  all_zero         every output element is zero
  vanishing        mean |output| < VANISHING (the output underflows to nothing)
  constant         std(output) <= CONSTANT_REL * mean |output| (the same value everywhere)
  zero_passes      a kernel writing zeros passes KernelBench's check (|y| <= atol + rtol |y|)
  constant_passes  a kernel writing one constant (the output's median) passes it
  compile_error    torch.compile(model)(*inputs) raised
  mismatch         compiled and eager outputs differ beyond the dtype's tolerance
  runtime_low/high eager time outside [min_ms, max_ms] (GPU only; on a CPU the static
                   FLOPs / bytes bounds of generation stand in, as CPU times say little
                   about GPU times)
"""
from __future__ import annotations

import time
import types

from ..tolerances import FUSED_COMPILED

SEED = 1234
VANISHING = 1e-6
CONSTANT_REL = 1e-3
KB_TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2}     # KernelBench's torch.allclose atol = rtol, by precision


def _setup(device: str) -> None:
    import torch
    import torch._inductor.config as inductor
    torch.set_num_threads(1)          # one core a worker process; --jobs sets the parallelism
    inductor.compile_threads = 1
    if device == "cuda":
        torch.backends.cudnn.benchmark = False


def _load(source: str, name: str):
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def kb_inputs(values: list, device: str, dtype=None) -> list:
    """A problem's inputs as a harness feeds them: every tensor on the device, a floating one cast to the
    precision `dtype` (None: kept), an integer one (embedding indices) keeping its dtype -- as KernelBench
    did before its precision refactor and its fix (ScalingIntelligence/KernelBench#152) does again; its
    eval.py at 423217d casts indices too, which F.embedding refuses."""
    import torch
    return [(x.to(device, dtype) if dtype is not None and x.is_floating_point() else x.to(device))
            if isinstance(x, torch.Tensor) else x for x in values]


def _build(module, device):
    import torch
    torch.manual_seed(SEED)
    model = module.Model(*module.get_init_inputs()).to(device)
    return model, kb_inputs(module.get_inputs(), device)


def _time_ms(fn, device: str, reps: int) -> float:
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def _degenerate(y) -> str | None:
    import torch
    y = y.float()
    if not torch.isfinite(y).all():
        return "nan_inf"
    mean_abs = y.abs().mean().item()
    if mean_abs == 0.0:
        return "all_zero"
    if mean_abs < VANISHING:
        return "vanishing"
    if y.numel() < 2 or y.std().item() <= CONSTANT_REL * mean_abs:
        return "constant"
    return None


def kb_trivial(y, dtype: str) -> str | None:
    """'zero_passes' / 'constant_passes' when a kernel writing zeros / the output's median would
    pass KernelBench's torch.allclose(out, ref, atol, rtol) against this output."""
    import torch
    tol = KB_TOLERANCE[dtype]
    y = y.float()
    if torch.allclose(torch.zeros_like(y), y, atol=tol, rtol=tol):
        return "zero_passes"
    if torch.allclose(torch.full_like(y, y.median().item()), y, atol=tol, rtol=tol):
        return "constant_passes"
    return None


def _same(a, b, device: str) -> bool:
    import torch
    if a.shape != b.shape:
        return False
    if device == "cpu":   # bitwise, NaN equal to NaN (NaN is the degeneracy check's to report)
        return torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)
    return torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6, equal_nan=True)  # GPU kernels may reorder sums


def check(task: dict, device: str, min_ms: float, max_ms: float, reps: int) -> dict:
    """Verdict of one task: {"pass", "reason", "detail", measurements ...}."""
    import torch
    _setup(device)
    out = {"pass": False, "reason": None, "detail": None, "device": device, "eager_ms": None,
           "compiled_ms": None, "max_err": None, "out_mean_abs": None, "out_std": None}

    def reject(reason, detail=None):
        out.update(reason=reason, detail=(str(detail).splitlines() or [""])[0][:300] if detail else None)
        return out

    try:
        module = _load(task["source"], task["id"])
        model, inputs = _build(module, device)
        with torch.no_grad():
            y = model(*inputs)
            y_again = model(*inputs)
    except Exception as e:  # the program itself is at fault: record why
        return reject("eager_error", f"{type(e).__name__}: {e}")
    if not isinstance(y, torch.Tensor) or not y.is_floating_point():
        return reject("bad_output", type(y).__name__)
    if not _same(y, y_again, device):
        return reject("random_op")
    model2, inputs2 = _build(module, device)
    with torch.no_grad():
        y2 = model2(*inputs2)
    if not _same(y, y2, device):
        return reject("nondeterministic")
    yf = y.float()
    out["out_mean_abs"], out["out_std"] = yf.abs().mean().item(), (yf.std().item() if y.numel() > 1 else 0.0)
    bad = _degenerate(y) or kb_trivial(y, task["dtype"])
    if bad:
        return reject(bad)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model2)
        with torch.no_grad():
            yc = compiled(*inputs2)
    except Exception as e:
        return reject("compile_error", f"{type(e).__name__}: {e}")
    atol, rtol = FUSED_COMPILED[task["dtype"]]
    diff = (yc.float() - yf).abs()
    scale = yf.pow(2).mean().sqrt().item()
    out["max_err"] = diff.max().item() / max(scale, 1e-30)
    if yc.shape != y.shape or not bool((diff <= atol * scale + rtol * yf.abs()).all()):
        return reject("mismatch", f"max |compiled - eager| = {diff.max().item():.3g} (rms {scale:.3g})")
    with torch.no_grad():
        out["eager_ms"] = round(_time_ms(lambda: model2(*inputs2), device, reps), 4)
        out["compiled_ms"] = round(_time_ms(lambda: compiled(*inputs2), device, reps), 4)
    torch._dynamo.reset()
    if device == "cuda" and out["eager_ms"] < min_ms:
        return reject("runtime_low", f"eager {out['eager_ms']} ms < {min_ms} ms")
    if device == "cuda" and out["eager_ms"] > max_ms:
        return reject("runtime_high", f"eager {out['eager_ms']} ms > {max_ms} ms")
    out["pass"] = True
    return out
