"""Time the op modules' PyTorch reference programs on the local CUDA GPU, and merge the rows.

    python3 scripts/time_references.py --modules all|missing|NAME,... [--compiled]
                                       [--budget SECONDS] [--dry-run] --out rows.json
    python3 scripts/time_references.py --merge rows.json

Measures every selected module x every shape of its `shapes` menu at dtype module.dtypes[0], the
way kernelstrain/calibration/h200_references.json's meta.method says: the reference built as
gpu-check builds it (module.reference(make_task(module, 'H100', dtype, shape)) exec'd,
Model(*get_init_inputs()).cuda().eval(), get_inputs(), the module's PREPARE step, autograd only
where the source calls .backward(), tf32 off); eager_ms = triton.testing.do_bench(fn, warmup=25,
rep=100, return_mode='median'), whose every call follows a 256 MB L2-flushing memset. --compiled
adds compiled_ms: torch.compile(model, dynamic=False), default mode, TORCHINDUCTOR_COMPILE_THREADS=1,
first call (compile_s), one warm call, then the same do_bench. Modules whose reference program
text is identical at a shape share one measurement (`same_program_as`). `missing` = registered
modules without rows in the shipped file. Eager times come first for every program, compiled
times after; no new program starts once --budget seconds have passed. A failure skips that
(module, shape) with its reason; --out is rewritten after every program, so a killed run keeps
what it measured.

--merge appends the rows of a rows file to h200_references.json (existing rows and meta kept; a
row whose module, dtype and shape is there only adds the fields it lacks, e.g. compiled_ms from a
--compiled run to an eager-only row merged before; no value there changes), adds a meta note saying when and
how the new rows were measured, and updates the reference counts in h200_kernels.json's meta.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck.adapters import prepare  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

CALIB = ROOT / "kernelstrain" / "calibration"
REFS_PATH, KERNELS_PATH = CALIB / "h200_references.json", ROOT / "measurements" / "h200_kernels.json"
ROWS_FORMAT = "kernelstrain/h200-reference-rows@1"
BUILD_GPU = "H100"          # the profile gpu-check builds references on (sm_90a, the H200's arch)
COMPILE_TIMEOUT_S = 150


class Usage(Exception):
    """Bad input: printed as one line, exit 2."""


# -- what to time ----------------------------------------------------------------------------

def select(spec: str, refs_path: Path = REFS_PATH) -> list:
    """Module names for --modules: all, missing (no rows in the shipped file) or NAME,..."""
    if spec == "all":
        return sorted(REGISTRY)
    if spec == "missing":
        have = {r["module"] for r in json.loads(refs_path.read_text())["references"]}
        return sorted(set(REGISTRY) - have)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown or not names:
        raise Usage(f"unknown module(s): {', '.join(unknown) or spec!r}")
    return names


def programs(names: list) -> list:
    """One dict per distinct reference program: dtype, shape, src, and the modules sharing it."""
    by_text = {}
    for name in names:
        m = REGISTRY[name]
        for shape in m.shapes:
            dtype = m.dtypes[0]
            src = m.reference(make_task(m, BUILD_GPU, dtype, shape))
            prep = prepare(m)       # one measurement only where the inputs are prepared alike too
            key = (dtype, src, prep and (prep.__module__, prep.__qualname__))
            p = by_text.setdefault(key, {"dtype": dtype, "shape": dict(shape), "src": src, "modules": []})
            p["modules"].append(name)
    return list(by_text.values())


def _label(p: dict) -> str:
    return f"{'+'.join(p['modules'])} {p['dtype']} " + " ".join(f"{k}={v}" for k, v in p["shape"].items())


# -- timing (on the GPU) -------------------------------------------------------------------------

def _build(torch, p: dict):
    """(model, inputs, grad context) as gpu-check builds the reference."""
    m = REGISTRY[p["modules"][0]]
    ns = {}
    exec(compile(p["src"], f"<reference {m.name}>", "exec"), ns)   # noqa: S102 - our own reference program
    torch.manual_seed(int(hashlib.sha1(_label(p).encode()).hexdigest()[:8], 16))
    with torch.device("cuda"):
        model = ns["Model"](*ns["get_init_inputs"]()).cuda().eval()
        inputs = list(ns["get_inputs"]())
    if prepare(m):
        prepare(m)(make_task(m, BUILD_GPU, p["dtype"], p["shape"]).dims, inputs)
    grad = torch.enable_grad if ".backward(" in p["src"] else torch.no_grad
    return model, inputs, grad


def _time_one(torch, do_bench, p: dict, compiled: bool) -> dict:
    model, inputs, grad = _build(torch, p)
    out = {}
    with grad():
        if compiled:
            import signal
            model = torch.compile(model, dynamic=False)

            def alarm(*_):
                raise TimeoutError(f"torch.compile took over {COMPILE_TIMEOUT_S} s")
            old = signal.signal(signal.SIGALRM, alarm)
            signal.alarm(COMPILE_TIMEOUT_S)
            try:
                t0 = time.perf_counter()
                model(*inputs)
                torch.cuda.synchronize()
                out["compile_s"] = round(time.perf_counter() - t0, 2)
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)
            model(*inputs)
            torch.cuda.synchronize()
        out["ms"] = float(do_bench(lambda: model(*inputs), warmup=25, rep=100, return_mode="median"))
    return out


def _free(torch, compiled: bool) -> None:
    if compiled:
        torch._dynamo.reset()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _device_meta(torch, triton) -> dict:
    props = torch.cuda.get_device_properties(0)
    driver = "?"
    try:
        import subprocess
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"device": f"{props.name} ({props.multi_processor_count} SMs, cc {props.major}.{props.minor}, "
                      f"{props.total_memory // 2**20} MiB)",
            "driver": f"NVIDIA {driver}", "torch": f"{torch.__version__} (CUDA {torch.version.cuda})",
            "triton": triton.__version__}


def _rows_of(p: dict, res: dict, compiled: bool) -> list:
    rows = []
    for name in p["modules"]:
        m = REGISTRY[name]
        r = {"module": name, "op": m.op, "dtype": p["dtype"], "shape": p["shape"], "eager_ms": round(res["eager"], 6)}
        if compiled and "compile_budget" not in res:      # not reached: no compiled_ms, not a failure
            r["compiled_ms"] = round(res["compiled"], 6) if res.get("compiled") is not None else None
            if res.get("compile_error"):
                r["note"] = "compile: " + res["compile_error"]
        others = [o for o in p["modules"] if o != name]
        if others:
            r["same_program_as"] = others
        rows.append(r)
    return rows


def time_all(names: list, compiled: bool, budget_s: float, out_path: Path) -> dict:
    """Time every program of names; write and return the rows file."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    try:
        import torch
        import triton
        from triton.testing import do_bench
    except ImportError as e:
        raise Usage(f"timing needs torch and triton (pip install torch triton): {e}") from None
    if not torch.cuda.is_available():
        raise Usage("timing needs a CUDA GPU: torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False       # references in true fp32, as gpu-check
    torch.backends.cudnn.allow_tf32 = False
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    meta = _device_meta(torch, triton) | {"date": f"{started} UTC", "argv": " ".join(sys.argv[1:]),
                                          "method": __doc__.split("\n\n")[2].replace("\n", " ")}

    def measure(p, is_compiled):
        try:
            return _time_one(torch, do_bench, p, is_compiled)
        finally:
            _free(torch, is_compiled)
    return run_programs(programs(names), measure, compiled, budget_s, out_path, meta)


def run_programs(progs: list, measure, compiled: bool, budget_s: float, out_path: Path, meta: dict) -> dict:
    """Eager times of every program, then compiled ones; measure(p, compiled) -> {"ms"[, "compile_s"]}."""
    start = time.monotonic()
    print(f"{len(progs)} programs of {len({n for p in progs for n in p['modules']})} modules"
          f"{', eager then compiled' if compiled else ', eager'}; budget {budget_s:g} s", flush=True)
    data = {"format": ROWS_FORMAT, "meta": meta | {"compiled": compiled, "programs": len(progs)},
            "rows": [], "skipped": []}
    results = [{} for _ in progs]
    for is_compiled in [False] + ([True] if compiled else []):
        kind = "compiled" if is_compiled else "eager"
        for i, p in enumerate(progs):
            res = results[i]
            if "error" in res:
                continue
            if time.monotonic() - start > budget_s:
                res["compile_budget" if is_compiled else "error"] = f"{kind}: budget of {budget_s:g} s spent"
                continue
            try:
                got = measure(p, is_compiled)
                res[kind] = got["ms"]
                extra = f" (compile {got['compile_s']} s)" if "compile_s" in got else ""
                print(f"[{kind} {i + 1}/{len(progs)}] {_label(p)}: {got['ms']:.4f} ms{extra}", flush=True)
            except Exception as e:   # noqa: BLE001 - any failure skips this program, the run goes on
                why = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                res["compile_error" if is_compiled else "error"] = why
                print(f"[{kind} {i + 1}/{len(progs)}] {_label(p)}: SKIPPED {why}", flush=True)
            _write_rows(data, progs, results, compiled, out_path)
    data["meta"]["elapsed_s"] = round(time.monotonic() - start, 1)
    _write_rows(data, progs, results, compiled, out_path)
    return data


def _write_rows(data: dict, progs: list, results: list, compiled: bool, out_path: Path) -> None:
    data["rows"], data["skipped"] = [], []
    for p, res in zip(progs, results):
        if "eager" in res:
            data["rows"] += _rows_of(p, res, compiled)
        elif "error" in res:
            data["skipped"] += [{"module": n, "dtype": p["dtype"], "shape": p["shape"], "reason": res["error"]}
                                for n in p["modules"]]
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(out_path)


# -- merging into the shipped file --------------------------------------------------------------

def dump_references(data: dict) -> str:
    """h200_references.json's layout: meta indented, one row a line."""
    return ('{\n"format":' + json.dumps(data["format"]) + ',\n"meta":' + json.dumps(data["meta"], indent=1)
            + ',\n"references":[\n' + ",\n".join(json.dumps(r, separators=(",", ":")) for r in data["references"])
            + "\n]\n}\n")


def reference_counts(rows: list) -> dict:
    """The reference counts h200_kernels.json's meta.counts carries (tests check reference_rows)."""
    progs = {(tuple(sorted([r["module"]] + r.get("same_program_as", []))), r["dtype"],
              json.dumps(r["shape"], sort_keys=True)) for r in rows}
    has = [r for r in rows if "compiled_ms" in r]
    return {"reference_rows": len(rows), "reference_programs": len(progs),
            "eager_rows": sum(1 for r in rows if r.get("eager_ms") is not None),
            "compiled_rows_alone": sum(1 for r in has if r["compiled_ms"] is not None),
            "compiled_rows_contended_only": sum(1 for r in has if r["compiled_ms"] is None
                                                and r.get("compiled_ms_contended") is not None),
            "compiled_rows_failed": sum(1 for r in has if r["compiled_ms"] is None
                                        and r.get("compiled_ms_contended") is None)}


def _check_row(r) -> None:
    m = REGISTRY.get(r.get("module")) if isinstance(r, dict) else None
    if m is None:
        raise Usage(f"row {r!r}: not a registered module")
    ok = (r.get("dtype") in m.dtypes and isinstance(r.get("shape"), dict)
          and all(isinstance(v, int) for v in r["shape"].values())
          and isinstance(r.get("eager_ms"), (int, float)) and r["eager_ms"] > 0)
    if not ok:
        raise Usage(f"row of {m.name} {r.get('shape')}: needs a dtype of the module, an int shape and eager_ms > 0")


def merge(rows_path: Path, refs_path: Path = REFS_PATH, kernels_path: Path = KERNELS_PATH) -> dict:
    """Append rows_path's new rows to refs_path, note them in its meta, update kernels_path's counts."""
    try:
        new = json.loads(Path(rows_path).read_text())
    except (OSError, ValueError) as e:
        raise Usage(f"cannot read rows file {rows_path}: {e}") from None
    if not isinstance(new, dict) or new.get("format") != ROWS_FORMAT:
        raise Usage(f"{rows_path}: not a rows file (format {ROWS_FORMAT!r})")
    for r in new["rows"]:
        _check_row(r)
    data = json.loads(refs_path.read_text())
    key = lambda r: (r["module"], r["dtype"], json.dumps(r["shape"], sort_keys=True))   # noqa: E731
    have = {key(r): r for r in data["references"]}
    added, filled = [], 0
    for r in new["rows"]:
        old = have.get(key(r))
        if old is None:
            added.append(r)
        elif [k for k in r if k not in old]:     # e.g. compiled_ms of an eager-only row merged before
            old.update({k: v for k, v in r.items() if k not in old})        # no shipped value changes
            filled += 1
    if added or filled:
        data["references"] += sorted(added, key=lambda r: r["module"])    # stable: menu order within a module
        meta = new.get("meta", {})
        mods = sorted({r["module"] for r in added} | {r["module"] for r in new["rows"] if key(r) in have})
        data["meta"]["notes"].append(
            f"Added {len(added)} rows and completed {filled} ({len(mods)} modules: {', '.join(mods)}), measured "
            f"{meta.get('date', '?')} by scripts/time_references.py ({meta.get('argv', '')}) on "
            f"{meta.get('device', '?')}, {meta.get('driver', '?')}, torch {meta.get('torch', '?')}, triton "
            f"{meta.get('triton', '?')}; the method above (eager, alone on the GPU)"
            + (", compiled_ms alone in the same process after every eager time" if meta.get("compiled")
               else "; eager only (no compiled_ms)")
            + (f"; {len(new['skipped'])} (module, shape) pairs skipped" if new.get("skipped") else "") + ".")
        text, counts = kernels_path.read_text(), reference_counts(data["references"])
        for k, value in counts.items():
            text, n = re.subn(rf'("{k}":\s*)\d+', rf"\g<1>{value}", text, count=1)
            if not n:
                raise Usage(f"{kernels_path}: no counts.{k} to update")
        if {k: json.loads(text)["meta"]["counts"].get(k) for k in counts} != counts:
            raise Usage(f"{kernels_path}: its counts did not take the update")
        refs_path.write_text(dump_references(data))
        kernels_path.write_text(text)
    return {"added": len(added), "completed": filled, "kept_existing": len(new["rows"]) - len(added) - filled,
            "skipped": new.get("skipped", [])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", help="all, missing, or NAME,NAME,...")
    ap.add_argument("--compiled", action="store_true", help="also time torch.compile(model, dynamic=False)")
    ap.add_argument("--budget", type=float, default=float("inf"), help="start no new program after SECONDS")
    ap.add_argument("--out", type=Path, help="rows file to write")
    ap.add_argument("--dry-run", action="store_true", help="list the programs to time and exit")
    ap.add_argument("--merge", type=Path, metavar="ROWS", help="merge a rows file into the shipped references")
    args = ap.parse_args(argv)
    try:
        if args.merge:
            res = merge(args.merge)
            print(f"merged {res['added']} new rows into {REFS_PATH.name}, completed {res['completed']} "
                  f"(fields they lacked), {res['kept_existing']} already there kept as they were; "
                  f"{len(res['skipped'])} skipped in the rows file")
            for s in res["skipped"]:
                print(f"  skipped {s['module']} {s['shape']}: {s['reason']}")
            return 0
        if not args.modules or not (args.out or args.dry_run):
            raise Usage("give --modules and --out (or --merge ROWS)")
        names = select(args.modules)
        if args.dry_run:
            for p in programs(names):
                print(_label(p))
            return 0
        if not names:
            print("no modules to time")
            return 0
        data = time_all(names, args.compiled, args.budget, args.out)
        print(f"{len(data['rows'])} rows, {len(data['skipped'])} skipped, {data['meta']['elapsed_s']} s -> {args.out}")
        return 0
    except Usage as e:
        print(f"time_references: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
