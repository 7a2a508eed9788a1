"""Run op-module candidates on a real NVIDIA GPU and check them against their PyTorch references.

    python3 scripts/gpu_check.py [--modules gemv_cuda,kv_append_cuda] [--variants a,b] [--out DIR]
                                 [--no-alt] [--no-bugs] [--no-fp16] [--bug-repeats N] [--bug-all-runs]
                                 [--shape MODULE:D=V,...] [--compile-only] [--list]

For every named module (default: the modules listed in MODULES) it builds one task on the H100
profile (sm_90a, the H200's architecture) with the module's check shape, and for each variant
that runs on sm_90a renders: the default params, one other param combination (the far end of
each param's range, or the most different combination the simulator accepts), every declared
bug of the variant (default params; up to --bug-repeats runs with fresh inputs, since a race may
not show on the first), and the default params in fp16 where the module has fp16 and bf16.

CUDA renders are whole .cu files with a C++ host function `void <entry>(..., cudaStream_t)`;
an `extern "C"` trampoline (ks_entry) is appended, the file is built with nvcc into a shared
library (in parallel, cached by source hash) and called through ctypes with the data pointers
of torch tensors. Triton renders define a Python wrapper `def <op>(...)`: the render is imported
from its file and the wrapper called. Each case runs in a worker process (a sticky CUDA error or a hang only costs that case):
fresh random inputs, outputs poisoned (NaN / 0xFF) before the launch, launch and asynchronous
errors checked, every output element compared with the reference (tolerances by dtype, exact
for pure data movement), then a short event timing of the passing non-bug cases, after which
the outputs are checked again (a result that changes between runs is a race).

Results: one JSON object per case in DIR/results.jsonl, the table in DIR/summary.txt and on stdout.
Needs PyTorch with CUDA (and Triton for Triton modules) except with --compile-only / --list.
Adding a module means adding its shape to SHAPES and an adapter to ADAPTERS.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.util
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402

GPU = "H100"          # sm_90a profile: the H200 is the same chip with more memory
NVCC_FLAGS = ("-std=c++17", "-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler", "-fPIC")

# One check shape per module: mid-sized, with partial tiles / tails where the module has them.
SHAPES = {
    "moe_scatter_cuda": {"T": 2048, "E": 64, "topk": 6, "K": 2048},
    "grouped_gemm_cuda": {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6},      # ~6 rows an expert
    "moe_combine_cuda": {"T": 2048, "topk": 6, "K": 2048},
    "gemv_cuda": {"M": 4, "N": 6144, "K": 4096},
    "gemm_int4_cuda": {"M": 16, "N": 4096, "K": 14336},                             # M < BM: masked rows
    "kv_append_cuda": {"T": 4096, "H": 16, "D": 256, "P": 32},
    "causal_conv1d_cuda": {"B": 16, "D": 2048, "L": 1024},                          # L < one vector tile
    "selective_scan_triton": {"B": 1, "L": 2048, "D": 1536, "N": 16},
    "gemm_fp8_blockwise_cuda": {"M": 2048, "N": 2048, "K": 2048},                   # 256 tiles: persistent loop
}
MODULES = tuple(SHAPES)

# Output tolerance classes. rtol: per element, relative to the reference value; atol_rel: per
# element, relative to the reference's RMS (scale-free); l2: bound on ||out - ref|| / ||ref||.
# 16-bit outputs of fp32 math differ from the reference by at most ~1 ulp of the output type
# (bf16: 2^-8..2^-7, fp16: 2^-11..2^-10). Quantized paths (int4 weights dequantized with a 16-bit
# multiply, fp8 tensor cores accumulating with reduced precision inside a 128-wide K block) add
# ~1e-3 of the output RMS, hence the larger atol_rel. Pure data movement must be bit exact.
TOLS = {
    "exact": {"rtol": 0.0, "atol_rel": 0.0, "l2": 0.0},
    "fp16": {"rtol": 1e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "bf16": {"rtol": 1.6e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "quant": {"rtol": 1.6e-2, "atol_rel": 1e-2, "l2": 1e-2},
}
TOL_OF_MODULE = {"moe_scatter_cuda": "exact", "kv_append_cuda": "exact", "gemm_int4_cuda": "quant",
                 "gemm_fp8_blockwise_cuda": "quant"}

STICKY_EXIT = 3       # worker exit code after an error that poisons the CUDA context

# -- adapters: reference inputs (+ the reference model's weights) -> entry-point arguments ----
# Each takes (dims, model, inputs, ref, out_like) where inputs are the candidate's own copies of
# the reference inputs, ref the reference output(s), out_like(t) a poisoned tensor shaped like t.
# It returns (args in signature order without the stream, [(name, candidate tensor, reference)]).


def _moe_scatter(d, model, x, ref, out_like):
    xs, ids, offs = (out_like(r) for r in ref)
    return ([x[0], x[1], xs, ids, offs, d["T"], d["E"], d["K"], d["topk"]],
            [("x_sorted", xs, ref[0]), ("sorted_ids", ids, ref[1]), ("expert_offsets", offs, ref[2])])


def _grouped_gemm(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], model.w.data, x[1], x[2], y, d["T"], d["E"], d["K"], d["N"], d["topk"]], [("y", y, ref)]


def _moe_combine(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], x[1], x[2], y, d["T"], d["K"], d["topk"]], [("y", y, ref)]


def _gemv(d, model, x, ref, out_like):
    y = out_like(ref)
    return [model.weight.data, x[0], y, d["M"], d["N"], d["K"]], [("y", y, ref)]


def _gemm_int4(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], model.qweight, model.scales, y, d["M"], d["N"], d["K"]], [("y", y, ref)]


def _gemm_fp8_blockwise(d, model, x, ref, out_like):
    c = out_like(ref)
    return [x[0], x[1], x[2], x[3], c, d["M"], d["N"], d["K"]], [("C", c, ref)]


def _kv_append(d, model, x, ref, out_like):
    # caches are updated in place: the candidate's copies hold the same random contents the
    # reference started from, so every slot it fails to write (or writes wrongly) shows
    return ([x[0], x[1], x[2], x[3], x[4], d["T"], d["H"], d["D"], d["P"]],
            [("key_cache", x[2], ref[0]), ("value_cache", x[3], ref[1])])


def _kv_append_prepare(d, inputs):
    import torch
    inputs[2].copy_(torch.randn_like(inputs[2]))     # never zeros: unwritten slots keep random data
    inputs[3].copy_(torch.randn_like(inputs[3]))
    inputs[4][3::37] = -1                              # padding tokens (skipped); the last token is real


def _causal_conv1d(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], x[1], x[2], y, d["B"], d["D"], d["L"]], [("y", y, ref)]


ADAPTERS = {
    "moe_scatter_cuda": _moe_scatter, "grouped_gemm_cuda": _grouped_gemm, "moe_combine_cuda": _moe_combine,
    "gemv_cuda": _gemv, "gemm_int4_cuda": _gemm_int4, "gemm_fp8_blockwise_cuda": _gemm_fp8_blockwise,
    "kv_append_cuda": _kv_append, "causal_conv1d_cuda": _causal_conv1d,
    "selective_scan_triton": None,     # Triton: the wrapper takes the reference inputs and returns y
}
PREPARE = {"kv_append_cuda": _kv_append_prepare}


# -- planning ----------------------------------------------------------------------------

def runnable_variants(module):
    feats = GPUS[GPU].features
    return [v for v in module.variants if not (v.needs - feats)]


def far_params(variant) -> dict:
    """Each param at the end of its range farthest from its default."""
    out = {}
    for p in variant.params:
        i, n = p.values.index(p.default), len(p.values)
        out[p.name] = p.values[0] if i >= (n - 1) / 2 else p.values[-1]
    return out


def alt_params(module, variant, task) -> dict | None:
    """One non-default combination the simulator accepts: the far one, else the most different."""
    if not variant.params:
        return None
    default = variant.defaults()
    combos = [far_params(variant)] + sorted(
        param_grid(variant), key=lambda c: -sum(c[k] != default[k] for k in c))
    for c in combos:
        if c != default and simulate(module, variant, c, task).ok:
            return c
    return None


def plan(names, variants=None, alt=True, bugs=True, fp16=True, bug_repeats=3, bug_all_runs=False,
         shapes=None) -> list:
    cases = []
    for name in names:
        module = REGISTRY[name]
        shape = (shapes or {}).get(name) or SHAPES.get(name) or module.shapes[len(module.shapes) // 2]
        dtype = "bf16" if "bf16" in module.dtypes else module.dtypes[0]
        task = make_task(module, GPU, dtype, shape)
        for v in runnable_variants(module):
            if variants and v.tag not in variants:
                continue
            runs = [("default", v.defaults(), None, dtype)]
            a = alt_params(module, v, task) if alt else None
            if a is not None:
                runs.append(("alt", a, None, dtype))
            if bugs:
                runs += [(f"bug:{b}", v.defaults(), b, dtype) for b in v.bugs]
            if fp16 and dtype != "fp16" and "fp16" in module.dtypes:
                runs.append(("default", v.defaults(), None, "fp16"))
            for kind, params, bug, dt in runs:
                cases.append({"idx": len(cases), "module": name, "variant": v.tag, "kind": kind, "params": params,
                              "bug": bug, "dtype": dt, "shape": dict(shape), "bug_repeats": bug_repeats,
                              "bug_all_runs": bug_all_runs,
                              "id": f"{name}|{dt}|{v.tag}|{kind}"})
    return cases


# -- CUDA build ------------------------------------------------------------------------

_CTYPES = {"int": "c_int", "unsigned": "c_uint", "int64_t": "c_int64", "long": "c_long", "size_t": "c_size_t",
           "float": "c_float", "double": "c_double", "uint32_t": "c_uint32"}


def parse_signature(sig: str) -> tuple[str, list]:
    """'void name(T a, ..., cudaStream_t stream)' -> (name, [(kind, ctype_decl, name)]),
    kind: 'ptr' | 'stream' | a ctypes name for scalars."""
    m = re.match(r"\s*void\s+(\w+)\s*\((.*)\)\s*;?\s*$", sig, re.S)
    if not m:
        raise ValueError(f"cannot parse host signature: {sig!r}")
    params = []
    for raw in m.group(2).split(","):
        raw = " ".join(raw.split())
        decl, name = raw.rsplit(" ", 1) if not raw.endswith("*") else (raw, "")
        while name.startswith("*"):
            decl, name = decl + "*", name[1:]
        if "cudaStream_t" in decl:
            params.append(("stream", decl, name))
        elif "*" in decl:
            params.append(("ptr", decl, name))
        else:
            base = decl.replace("const ", "").strip()
            if base not in _CTYPES:
                raise ValueError(f"unsupported scalar type {base!r} in {sig!r}")
            params.append((_CTYPES[base], base, name))
    return m.group(1), params


def trampoline(sig: str) -> str:
    """extern "C" entry points around the render's C++ host function."""
    name, params = parse_signature(sig)
    formals, actuals = [], []
    for i, (kind, decl, _) in enumerate(params):
        if kind in ("ptr", "stream"):
            formals.append(f"void* a{i}")
            actuals.append(f"({decl})a{i}")
        else:
            formals.append(f"{decl} a{i}")
            actuals.append(f"a{i}")
    return f"""

// ---- gpu_check trampoline: C linkage for ctypes --------------------------------------
extern "C" int ks_entry({", ".join(formals)}) {{
    cudaGetLastError();                                   // start from a clean error state
    {name}({", ".join(actuals)});
    return (int)cudaGetLastError();                       // launch-time errors of the host function
}}
extern "C" int ks_sync(void* stream) {{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    return (int)e;
}}
extern "C" const char* ks_error_name(int e) {{ return cudaGetErrorName((cudaError_t)e); }}
"""


def build(src: str, build_dir: Path) -> dict:
    """nvcc the source into a shared library (cached by hash)."""
    key = hashlib.sha1((src + " ".join(NVCC_FLAGS)).encode()).hexdigest()[:16]
    so, cu, log = build_dir / f"{key}.so", build_dir / f"{key}.cu", build_dir / f"{key}.log"
    if so.exists():
        return {"so": str(so), "ok": True, "log": "", "compile_s": 0.0}
    if log.exists():                       # cached failure
        return {"so": None, "ok": False, "log": log.read_text()[-3000:], "compile_s": 0.0}
    cu.write_text(src)
    t0 = time.time()
    tmp = build_dir / f"{key}.{os.getpid()}.tmp.so"
    try:
        r = subprocess.run(["nvcc", *NVCC_FLAGS, "-o", str(tmp), str(cu)], capture_output=True, text=True,
                           timeout=600)
        ok, text = r.returncode == 0, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        ok, text = False, "nvcc timed out after 600 s"
    secs = round(time.time() - t0, 2)
    if ok:
        tmp.replace(so)
        return {"so": str(so), "ok": True, "log": "", "compile_s": secs}
    tmp.unlink(missing_ok=True)
    log.write_text(text)
    return {"so": None, "ok": False, "log": text[-3000:], "compile_s": secs}


def render_case(case: dict, build_dir: Path) -> dict:
    module = REGISTRY[case["module"]]
    task = make_task(module, GPU, case["dtype"], case["shape"])
    variant = module.variant(case["variant"])
    src = module.render(variant, case["params"], task, case["bug"])
    if module.impl == "triton":
        key = hashlib.sha1(src.encode()).hexdigest()[:16]
        path = build_dir / f"{key}.py"
        path.write_text(src)
        return {"src": str(path), "ok": True, "log": "", "compile_s": 0.0}
    return build(src + trampoline(module.signature(task)), build_dir)


# -- worker: runs cases in a process of its own ----------------------------------------------

def _worker(case_file: str, start: int) -> None:
    import ctypes
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False       # references in true fp32
    torch.backends.cudnn.allow_tf32 = False
    cases = json.loads(Path(case_file).read_text())
    for case in cases[start:]:
        print(f"@@START {case['idx']}", flush=True)
        res = _run_case(case, torch, ctypes)
        print("@@RESULT " + json.dumps(res), flush=True)
        if res.get("sticky"):
            sys.exit(STICKY_EXIT)


class _CaseError(Exception):
    def __init__(self, msg, sticky=False):
        super().__init__(msg)
        self.sticky = sticky


def _poison_like(torch, t):
    out = torch.empty_like(t)
    if out.is_floating_point() and out.element_size() >= 2:
        out.fill_(float("nan"))
    else:
        out.view(torch.uint8).fill_(0xFF)    # -1 for ints, NaN for e4m3
    return out


class _PoisonTorch:
    """Stands in for `torch` inside a Triton wrapper: allocations come back poisoned."""

    def __init__(self, torch):
        self._t = torch

    def __getattr__(self, name):
        return getattr(self._t, name)

    def empty_like(self, t, *a, **k):
        return _poison_like(self._t, self._t.empty_like(t, *a, **k))

    def empty(self, *a, **k):
        return _poison_like(self._t, self._t.empty(*a, **k))


def _compare(torch, out, ref, tol_name) -> dict:
    tol = TOLS[tol_name]
    if out.shape != ref.shape:
        return {"ok": False, "error": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}", "nbad": -1}
    o, r = out.double(), ref.double()
    diff = (o - r).abs()
    finite = torch.isfinite(o)
    if tol_name == "exact":
        bad = ~(o == r)
    else:
        rms = r.pow(2).mean().sqrt().item()
        bad = ~(diff <= tol["atol_rel"] * rms + tol["rtol"] * r.abs())     # NaN counts as bad
    nbad = int(bad.sum().item())
    ref_norm = r.norm().item()
    all_finite = bool(finite.all().item())
    rel = (diff.norm().item() / ref_norm if ref_norm > 0 else diff.norm().item()) if all_finite else float("inf")
    max_abs = diff[finite].max().item() if finite.any().item() else float("inf")
    ok = nbad == 0 and all_finite and rel <= tol["l2"]
    return {"ok": ok, "max_abs_err": max_abs, "rel_l2_err": rel, "nbad": nbad, "numel": o.numel(),
            "nonfinite": int((~finite).sum().item())}


def _run_case(case: dict, torch, ctypes) -> dict:
    res = {k: case[k] for k in ("id", "idx", "module", "variant", "kind", "params", "bug", "dtype", "shape")}
    res.update(ok=False, max_abs_err=None, rel_l2_err=None, nbad=None, time_ms=None, error=None)
    if not case.get("build_ok", True):
        res["error"] = "compile error:\n" + case.get("log", "")[-2000:]
        return res
    try:
        # a bug render gets several tries (fresh inputs each): a race may need more than one run to show
        tries = case.get("bug_repeats", 1) if case["bug"] else 1
        failed, worst = 0, None
        for rep in range(tries):
            r = _run_case_inner(case, torch, ctypes, rep)
            failed += not r["ok"]
            worst = r if worst is None or not r["ok"] else worst
            res.update(worst, runs=rep + 1, failed_runs=failed)
            if failed and not case.get("bug_all_runs"):
                break
    except _CaseError as e:
        res["error"], res["sticky"] = str(e), e.sticky
    except Exception as e:  # noqa: BLE001 - a candidate may fail in any way; record it
        msg = f"{type(e).__name__}: {e}"
        sticky = any(s in msg for s in ("illegal memory access", "unspecified launch failure", "misaligned address",
                                        "illegal instruction", "CUDA error"))
        res["error"], res["sticky"] = msg[-2000:], sticky
    return res


def _run_case_inner(case: dict, torch, ctypes, rep: int = 0) -> dict:
    module = REGISTRY[case["module"]]
    task = make_task(module, GPU, case["dtype"], case["shape"])
    dims = task.dims
    ns = {}
    exec(compile(module.reference(task), f"<reference {module.name}>", "exec"), ns)
    seed = int(hashlib.sha1(case["id"].encode()).hexdigest()[:8], 16) + rep
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = ns["Model"](*ns["get_init_inputs"]()).cuda().eval()
        inputs = list(ns["get_inputs"]())
    if module.name in PREPARE:
        PREPARE[module.name](dims, inputs)
    cand = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    with torch.no_grad():
        ref = model(*inputs)
    torch.cuda.synchronize()
    tol = TOL_OF_MODULE.get(module.name, case["dtype"] if case["dtype"] in TOLS else "quant")
    stream = torch.cuda.current_stream()

    if module.impl == "triton":
        # imported from its file: @triton.jit reads the kernel source back through inspect
        spec = importlib.util.spec_from_file_location(f"ks_candidate_{case['idx']}_{rep}", case["src"])
        cmod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cmod)
        cmod.torch = _PoisonTorch(torch)          # the wrapper's allocations come back poisoned
        fn = getattr(cmod, module.op)
        last = {}

        def launch():
            last["y"] = fn(*cand)

        def sync():
            torch.cuda.synchronize()

        def current_outs():
            return [("y", last["y"], ref)]
        launch()
        sync()
    else:
        _, params = parse_signature(module.signature(task))
        args, outs = ADAPTERS[module.name](dims, model, cand, ref, lambda t: _poison_like(torch, t))
        scalars = [p for p in params if p[0] != "stream"]
        if len(args) != len(scalars):
            raise _CaseError(f"adapter gives {len(args)} args, signature has {len(scalars)}")
        lib = ctypes.CDLL(case["so"])
        cargs, argtypes = [], []
        it = iter(args)
        for kind, decl, name in params:
            if kind == "stream":
                cargs.append(ctypes.c_void_p(stream.cuda_stream))
                argtypes.append(ctypes.c_void_p)
                continue
            a = next(it)
            if kind == "ptr":
                if not isinstance(a, torch.Tensor) or not a.is_cuda or not a.is_contiguous():
                    raise _CaseError(f"arg {name}: needs a contiguous CUDA tensor")
                cargs.append(ctypes.c_void_p(a.data_ptr()))
                argtypes.append(ctypes.c_void_p)
            else:
                if isinstance(a, torch.Tensor):
                    raise _CaseError(f"arg {name}: scalar expected")
                ct = getattr(ctypes, kind)
                cargs.append(ct(a))
                argtypes.append(ct)
        lib.ks_entry.argtypes, lib.ks_entry.restype = argtypes, ctypes.c_int
        lib.ks_sync.argtypes, lib.ks_sync.restype = [ctypes.c_void_p], ctypes.c_int
        lib.ks_error_name.argtypes, lib.ks_error_name.restype = [ctypes.c_int], ctypes.c_char_p

        def err(code):
            return f"{lib.ks_error_name(code).decode()} ({code})"

        def launch():
            code = lib.ks_entry(*cargs)
            if code:
                raise _CaseError(f"launch error: {err(code)}")

        def sync():
            code = lib.ks_sync(ctypes.c_void_p(stream.cuda_stream))
            if code:   # an error surfacing at synchronisation comes from a running kernel: sticky
                raise _CaseError(f"kernel error: {err(code)}", sticky=True)

        def current_outs():
            return outs
        torch.cuda.synchronize()
        launch()
        sync()

    per = {name: _compare(torch, out, r, tol) for name, out, r in current_outs()}
    ok = all(p["ok"] for p in per.values())
    res = {"ok": ok, "tol": tol, "outputs": per,
           "max_abs_err": max((p.get("max_abs_err") or 0.0) for p in per.values()),
           "rel_l2_err": max((p.get("rel_l2_err") or 0.0) for p in per.values()),
           "nbad": sum(max(0, p.get("nbad", 0)) for p in per.values())}
    if ok and case["bug"] is None:       # time the passing candidates: events, median
        times = []
        budget = time.time() + 0.25
        for i in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            launch()
            e.record(stream)
            sync()
            if i:                        # the first run is a warm-up
                times.append(s.elapsed_time(e))
            if i >= 3 and time.time() > budget:
                break
        times.sort()
        res["time_ms"] = times[len(times) // 2] if times else None
        # the timed runs rewrote the outputs: a result that changed is a race
        again = {name: _compare(torch, out, r, tol) for name, out, r in current_outs()}
        if not all(p["ok"] for p in again.values()):
            res.update(ok=False, outputs=again, error="wrong after the timed re-runs (race?)",
                       nbad=sum(max(0, p.get("nbad", 0)) for p in again.values()))
    return res


# -- parent: runs workers, survives hangs and sticky errors --------------------------------

def run_cases(cases: list, work: Path, results_path: Path, case_timeout: float, deadline: float) -> list:
    case_file = work / "cases.json"
    case_file.write_text(json.dumps(cases))
    results = {}
    nxt = 0
    with results_path.open("w") as rf:
        def record(r):
            results[r["idx"]] = r
            rf.write(json.dumps(r) + "\n")
            rf.flush()
            mark = "ok  " if r["ok"] else "FAIL"
            extra = f" {r['time_ms']:.4f} ms" if r.get("time_ms") else ""
            err = (" | " + r["error"].splitlines()[0][:160]) if r.get("error") else ""
            rel = f" rel_l2={r['rel_l2_err']:.2e} nbad={r['nbad']}" if r.get("rel_l2_err") is not None else ""
            print(f"[{r['idx'] + 1}/{len(cases)}] {mark} {r['id']} {r['params']}{rel}{extra}{err}", flush=True)

        while nxt < len(cases):
            if time.time() > deadline:
                for c in cases[nxt:]:
                    record(_skipped(c, "not run: time budget spent"))
                break
            proc = subprocess.Popen([sys.executable, "-u", __file__, "--worker", str(case_file), "--start", str(nxt)],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=str(ROOT))
            fd = proc.stdout.fileno()
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            current, started, ran_any, buf = None, time.time(), False, b""
            while True:
                if b"\n" in buf:                               # handle every complete line first
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode(errors="replace")
                    if line.startswith("@@START "):
                        current, started, ran_any = int(line.split()[1]), time.time(), True
                    elif line.startswith("@@RESULT "):
                        r = json.loads(line[len("@@RESULT "):])
                        r["compile_s"] = cases[r["idx"]].get("compile_s")
                        record(r)
                        nxt, current, started = r["idx"] + 1, None, time.time()
                    else:
                        print("    " + line, flush=True)
                    continue
                limit = case_timeout + (60 if not ran_any else 0)      # the first case includes torch import
                if not sel.select(timeout=max(0.1, started + limit - time.time())):
                    if time.time() - started < limit:
                        continue
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    idx = current if current is not None else nxt
                    record(_skipped(cases[idx], f"timeout: no result after {case_timeout:.0f} s (hang?)"))
                    nxt = idx + 1
                    break
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    buf += chunk
                    continue
                proc.wait()                                    # EOF: the worker exited
                if buf:
                    print("    " + buf.decode(errors="replace"), flush=True)
                if current is not None and current not in results:     # mid-case: a crash
                    record(_skipped(cases[current], f"worker died (exit code {proc.returncode})"))
                    nxt = current + 1
                elif not ran_any and nxt < len(cases):                # no case at all: give up
                    print(f"worker exited with {proc.returncode} before any case", flush=True)
                    for c in cases[nxt:]:
                        record(_skipped(c, "worker could not start"))
                    nxt = len(cases)
                break                                          # else: after a sticky error, or done
            proc.stdout.close()
            sel.close()
    return [results[i] for i in sorted(results)]


def _skipped(case, why):
    r = {k: case[k] for k in ("id", "idx", "module", "variant", "kind", "params", "bug", "dtype", "shape")}
    r.update(ok=False, max_abs_err=None, rel_l2_err=None, nbad=None, time_ms=None, error=why)
    return r


def summarize(results: list) -> str:
    lines = []
    by_mod = {}
    for r in results:
        by_mod.setdefault(r["module"], {}).setdefault(r["variant"], []).append(r)
    wrong, harmless = [], []
    for mod, variants in by_mod.items():
        lines.append(f"\n{mod}  shape={next(iter(variants.values()))[0]['shape']}")
        lines.append(f"  {'variant':26} {'default':22} {'alt':22} {'fp16':10} bugs")
        for tag, rs in variants.items():
            cell = {}
            bugs = []
            for r in rs:
                if r["kind"].startswith("bug:"):
                    name = r["kind"][4:]
                    runs, failed = r.get("runs", 1), r.get("failed_runs")
                    status = (f"harmless({runs}x)" if r["ok"] else
                              "fails" + (f"({failed}/{runs})" if failed is not None and runs > 1 else ""))
                    if r["ok"]:
                        harmless.append(f"{mod}/{tag}/{name}")
                    bugs.append(f"{name}:{status}")
                    continue
                col = "fp16" if r["dtype"] == "fp16" and any(x["dtype"] != "fp16" for x in rs) else r["kind"]
                if r["ok"]:
                    txt = "ok" + (f" {r['time_ms']:.3f}ms" if r.get("time_ms") else "")
                else:
                    wrong.append(f"{r['id']} {r['params']}: " + (r.get("error") or "").split("\n")[0][:100]
                                 + (f" rel_l2={r['rel_l2_err']:.2e} nbad={r['nbad']}" if r.get("nbad") else ""))
                    txt = "ERR" if r.get("error") else f"WRONG {r['rel_l2_err']:.1e}"
                cell[col] = txt
            lines.append(f"  {tag:26} {cell.get('default', '-'):22} {cell.get('alt', '-'):22} "
                         f"{cell.get('fp16', '-'):10} {' '.join(bugs)}")
    lines.append(f"\ncases: {len(results)}  passing: {sum(r['ok'] for r in results)}")
    lines.append(f"wrong/erroring non-bug candidates: {len(wrong)}")
    lines += [f"  {w}" for w in wrong]
    lines.append(f"harmless bugs (passed): {len(harmless)}")
    lines += [f"  {h}" for h in harmless]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(MODULES), help="comma-separated module names")
    ap.add_argument("--variants", default="", help="only these variant tags (comma-separated)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/ks_gpu_check_out", help="results folder ($OUT)")
    ap.add_argument("--build-dir", default="/tmp/ks_gpu_check", help="nvcc outputs (cached by source hash)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel nvcc processes")
    ap.add_argument("--no-alt", action="store_true", help="skip the alternative param combination")
    ap.add_argument("--no-bugs", action="store_true", help="skip the bug renders")
    ap.add_argument("--no-fp16", action="store_true", help="skip the fp16 default runs")
    ap.add_argument("--bug-repeats", type=int, default=3, help="runs (fresh inputs) before a bug counts as harmless")
    ap.add_argument("--bug-all-runs", action="store_true", help="run every repeat of a bug (its failure rate)")
    ap.add_argument("--shape", action="append", default=[], metavar="MODULE:D=V,...",
                    help="check shape of a module instead of SHAPES (repeatable)")
    ap.add_argument("--case-timeout", type=float, default=40.0, help="seconds before a case counts as hung")
    ap.add_argument("--budget", type=float, default=480.0, help="stop starting cases after this many seconds")
    ap.add_argument("--compile-only", action="store_true", help="render and build, run nothing (no GPU needed)")
    ap.add_argument("--list", action="store_true", help="print the planned cases and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        _worker(a.worker, a.start)
        return 0
    t_start = time.time()
    names = [n for n in a.modules.split(",") if n]
    unknown = [n for n in names if n not in REGISTRY or n not in ADAPTERS]
    if unknown:
        print(f"no module or no adapter for: {', '.join(unknown)} (adapters: {', '.join(ADAPTERS)})")
        return 2
    shapes = {}
    for spec in a.shape:
        mod, _, dims = spec.partition(":")
        shapes[mod] = {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))}
    cases = plan(names, set(filter(None, a.variants.split(","))), not a.no_alt, not a.no_bugs, not a.no_fp16,
                 a.bug_repeats, a.bug_all_runs, shapes)
    if a.list:
        for c in cases:
            print(c["id"], c["params"])
        return 0
    if not a.compile_only and importlib.util.find_spec("torch") is None:
        print("gpu_check: PyTorch is not installed here. It needs PyTorch with CUDA and an NVIDIA GPU "
              "(Triton too for Triton modules); use --compile-only or --list on a machine without them.")
        return 2
    build_dir = Path(a.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(cases)} cases, building with {a.jobs} jobs ...", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for c, b in zip(cases, pool.map(lambda c: render_case(c, build_dir), cases)):
            c.update(build_ok=b["ok"], so=b.get("so"), src=b.get("src"), log=b["log"], compile_s=b["compile_s"])
    nfail = [c for c in cases if not c["build_ok"]]
    print(f"built in {time.time() - t_start:.0f} s; {len(nfail)} compile failures", flush=True)
    for c in nfail:
        print(f"  COMPILE FAIL {c['id']}\n" + "\n".join("    " + x for x in c["log"].splitlines()[-12:]))
    if a.compile_only:
        return 1 if nfail else 0
    results = run_cases(cases, build_dir, out / "results.jsonl", a.case_timeout, t_start + a.budget)
    text = summarize(results)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    print(f"\ntotal {time.time() - t_start:.0f} s; results in {out / 'results.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
