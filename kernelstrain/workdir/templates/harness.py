"""Shared by verify.py and profile.py: load the reference and the candidate, build models and
seeded inputs the same way for both, compare outputs within a tolerance, and time a call with
CUDA events after flushing the L2. Read-only (see SKILL.md)."""
import contextlib
import fcntl
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

L2_FLUSH_BYTES = 256 << 20          # larger than any current GPU's L2 (H200: 60 MB)
# elements compare() turns into float64 at once: whole, the copies of a 3.2e9-element fp32
# gradient (out, ref, |out - ref|, the bound: 24 GiB each) ran the H200 out of memory
COMPARE_CHUNK = 1 << 25


def load_module(path, name):
    """Import a file as module `name` (registered, so `from model import Model` finds it)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_model(cls, init_inputs, seed, device="cuda"):
    """cls(*init_inputs) built under `seed` on `device`: Model and ModelNew get the same weights."""
    torch.manual_seed(seed)
    with torch.device(device):
        return cls(*init_inputs).to(device).eval()


def make_inputs(problem, seed, device="cuda"):
    torch.manual_seed(seed)
    with torch.device(device):
        xs = list(problem.get_inputs())
    return [x.to(device) if torch.is_tensor(x) else x for x in xs]


def clone(xs):
    return [x.clone() if torch.is_tensor(x) else x for x in xs]


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def grad_mode(needs_grad):
    """A reference that calls .backward() inside its forward needs autograd on."""
    return torch.enable_grad() if needs_grad else torch.no_grad()


def viewed(out, ref, tol):
    """(out, ref) as the dtype tol['view'] names ('torch.float8_e4m3fn': raw uint8 codes compared
    as fp8 values), when it names one and both are tensors of one element size."""
    name = tol.get("view")
    if not name or not (torch.is_tensor(out) and torch.is_tensor(ref)) or out.dtype != ref.dtype:
        return out, ref
    dtype = getattr(torch, name.split(".")[-1])
    return out.view(dtype), ref.view(dtype)


def _pieces(t):
    """(start, view) pieces of t along dim 0, about COMPARE_CHUNK elements each, whole rows."""
    if t.dim() == 0 or t.numel() <= COMPARE_CHUNK:
        return [(0, t)]
    per = max(1, COMPARE_CHUNK // max(1, t[0].numel()))
    return [(i * per, p) for i, p in enumerate(t.split(per))]


def compare(out, ref, tol):
    """Elementwise |out - ref| <= atol + atol_rel * rms(ref) + rtol * |ref| (rms per row when
    tol['row']), every element finite where the reference is, and ||out - ref|| / ||ref|| <= l2
    when tol has 'l2'. A dict: ok, nbad, max_abs_err, rel_l2_err, and the first bad element.
    Works in float64 a piece at a time (see COMPARE_CHUNK)."""
    if not torch.is_tensor(out):
        return {"ok": False, "error": f"output is {type(out).__name__}, not a tensor"}
    if tuple(out.shape) != tuple(ref.shape):
        return {"ok": False, "error": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"ok": False, "error": f"dtype {out.dtype} != reference {ref.dtype}"}
    out, ref = out.detach(), ref.detach()
    sq, count = 0.0, 0
    for _, r in _pieces(ref):
        r = r.to(torch.float64)
        finite = torch.isfinite(r)
        sq, count = sq + torch.where(finite, r, 0).pow(2).sum().item(), count + int(finite.sum().item())
    rms = (sq / count) ** 0.5 if count else 0.0
    # a 1-D row is the whole tensor, whose row scale is the rms: pieces of it keep that scale
    rows = tol.get("row") and ref.dim() > 1
    nbad, err_sq, max_err, res = 0, 0.0, 0.0, {}
    for (start, o), (_, r) in zip(_pieces(out), _pieces(ref)):
        o, r = o.to(torch.float64), r.to(torch.float64)
        diff, finite = (o - r).abs(), torch.isfinite(r)
        scale = torch.where(finite, r, 0).pow(2).mean(-1, keepdim=True).sqrt().clamp(min=rms) if rows else rms
        bound = tol.get("atol", 0.0) + tol.get("atol_rel", 0.0) * scale + tol.get("rtol", 0.0) * r.abs()
        bad = ~((diff <= bound) | (o == r))          # NaN in the output is always bad
        n = int(bad.sum().item())
        if n and not nbad:
            idx = tuple(bad.nonzero()[0].tolist())
            res.update(first_bad=[idx[0] + start, *idx[1:]] if idx else [], got=o[idx].item(), want=r[idx].item())
        nbad += n
        ok_diff = torch.where(finite & torch.isfinite(o), diff, 0)
        err_sq += ok_diff.pow(2).sum().item()
        max_err = max(max_err, ok_diff.max().item() if o.numel() else 0.0)
    ref_norm = sq ** 0.5
    rel = err_sq ** 0.5 / ref_norm if ref_norm > 0 else err_sq ** 0.5
    res = {"ok": nbad == 0 and rel <= tol.get("l2", float("inf")), "nbad": nbad, "numel": out.numel(),
           "max_abs_err": max_err, "rel_l2_err": rel, **res}
    if not nbad and not res["ok"]:
        res["error"] = f"relative L2 error {rel:.3g} > {tol['l2']:.3g}"
    return res


@contextlib.contextmanager
def gpu_lock(shared=False):
    """With KS_GPU_LOCK naming a lock file (several processes on one GPU): shared use for
    checking (any number at once), exclusive use for timing (nothing else runs on the GPU
    meanwhile). A turnstile file keeps a waiting timer from being starved by new shared users.
    Without it: nothing."""
    path = os.environ.get("KS_GPU_LOCK")
    if not path:
        yield
        return
    with open(path + ".turnstile", "a") as gate, open(path, "a") as fh:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def gpu_slot():
    """One of KS_GPU_SLOTS places on the GPU (lock files next to KS_GPU_LOCK), held for all of
    a process's GPU work, so at most that many processes hold GPU memory at once; each may use
    at most its share of the memory, or KS_GPU_MEM_FRACTION of it (more slots than memory shares:
    most cases need a few GB), so an over-large case fails alone, not its neighbours."""
    n, path = int(os.environ.get("KS_GPU_SLOTS", "0")), os.environ.get("KS_GPU_LOCK")
    if not n or not path:
        yield
        return
    while True:
        for i in range(n):
            fh = open(f"{path}.slot{i}", "a")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            try:
                torch.cuda.set_per_process_memory_fraction(float(os.environ.get("KS_GPU_MEM_FRACTION", 0) or min(1.0, 0.95 / n)))
                yield
            finally:
                try:
                    torch.cuda.empty_cache()
                except Exception:  # noqa: BLE001 - a sticky CUDA error (a faulting kernel) is the case's result
                    pass
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
            return
        time.sleep(0.2)


def dry_build(solution, out_dir):
    """Compile a CUDA solution's two units without linking or a GPU (a CPU machine's check that
    the build gets through nvcc and the host compiler): the candidate with its trampoline by
    nvcc -c with the solution's flags, the binding by the host compiler with PyTorch's headers
    (-fsyntax-only). Raises RuntimeError with the compiler's message."""
    import subprocess
    import sysconfig
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    binding, kernel = solution._sources()
    (out / "binding.cpp").write_text(binding)
    (out / "kernel.cu").write_text(kernel)
    from torch.utils import cpp_extension
    cuda_home = Path(os.environ.get("CUDA_HOME") or cpp_extension.CUDA_HOME or "/usr/local/cuda")
    incs = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}",
                                                               f"-I{cuda_home / 'include'}", f"-I{out / 'stub'}"]
    # a CPU-only PyTorch ships c10/cuda's headers without this generated one (empty is enough here)
    (out / "stub" / "c10" / "cuda" / "impl").mkdir(parents=True, exist_ok=True)
    (out / "stub" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("#pragma once\n")
    for cmd in (["nvcc", "-c", *solution.CUDA_FLAGS, str(out / "kernel.cu"), "-o", str(out / "kernel.o")],
                ["c++", "-fsyntax-only", "-std=c++17", "-DTORCH_EXTENSION_NAME=ks_dry", *incs, str(out / "binding.cpp")]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"{cmd[0]}: {(p.stdout + p.stderr)[-1500:]}")


class Timer:
    """Milliseconds of one call: CUDA events around it, the L2 flushed before each trial."""

    def __init__(self):
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def time(self, fn, trials=30, warmup=3):
        with gpu_lock():
            return self._time(fn, trials, warmup)

    def _time(self, fn, trials, warmup):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        q1, q3 = times[len(times) // 4], times[(3 * len(times)) // 4]
        return {"median_ms": statistics.median(times), "iqr_ms": q3 - q1, "min_ms": times[0],
                "max_ms": times[-1], "std_ms": statistics.pstdev(times), "trials": trials}
