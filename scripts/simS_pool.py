"""simS (issue 30): pool every stored device row of the short memory-bound modules, re-simulate it with this
checkout's model, and show per module where the simulator orders same-shape candidates against the hardware.

    python3 scripts/simS_pool.py [--held FILE.json ...] [--module NAME] [--pairs] [--min-gap 0.03]

Rows: measurements/*.json (gpu-check reports and room files; the card from meta.sim_gpu / sim_gpu / the file
name's h100_/h200_ prefix), plus --held files (fresh seeds kept out of any fit: reported apart). Rows whose
variant or params the model no longer has (simulate fails) are dropped and counted. Groups: the same file, card,
module, dtype and shape. Per module: pair order over pairs whose measured times differ by more than --min-gap
(log), the pooled within-group Spearman mean, and with --pairs the wrongly ordered pairs (measured and simulated
ratio, the params that differ), largest measured gap first.
"""
from __future__ import annotations

import argparse
import glob
import itertools
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.calibration.metrics import spearman  # noqa: E402
from kernelstrain.gpucheck import _sim_ms  # noqa: E402

MODULES = ("embedding_fwd_cuda dropout_cuda swiglu_fwd_cuda swiglu_fwd_triton swiglu_bwd_triton rope_cuda rope_triton "
           "embedding_gather_cuda kv_append_cuda cross_entropy_fwd_triton cross_entropy_bwd_triton bias_gelu_cuda "
           "add_rmsnorm_cuda add_rmsnorm_triton rmsnorm_cuda rmsnorm_triton fp8_quant_cuda fp8_quant_triton "
           "int8_kv_quant_triton paged_kv_copy_cuda paged_kv_copy_triton layernorm_bwd_triton grad_clip_cuda "
           "adafactor_cuda adamw_cuda").split()


def card(path: str, data: dict) -> str:
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    gpu = data.get("sim_gpu") or meta.get("sim_gpu")
    return gpu or ("H200" if Path(path).name.startswith("h200") else "H100")


def load(paths: list, modules: set) -> tuple:
    rows, dropped = [], 0
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            continue
        gpu = card(path, data)
        for r in data["rows"]:
            if r.get("module") not in modules or not r.get("time_ms") or not r.get("ok"):
                continue
            if r.get("label", "ok") != "ok" or r.get("bug"):
                continue
            try:
                sim = _sim_ms(r, gpu)
            except Exception:  # a variant or param the model no longer has
                sim = None
            if sim is None:
                dropped += 1
                continue
            rows.append(dict(r, sim_now=sim, sim_then=r.get("sim_ms"), gpu=gpu, file=Path(path).name))
    return rows, dropped


def groups(rows: list) -> dict:
    out = {}
    for r in rows:
        key = (r["file"], r["gpu"], r["module"], r.get("dtype"), json.dumps(r.get("shape"), sort_keys=True))
        out.setdefault(key, {})
        # one row per distinct candidate (repeated candidates: the first timing)
        out[key].setdefault(json.dumps([r["variant"], r.get("params")], sort_keys=True), r)
    return {k: list(v.values()) for k, v in out.items() if len(v) >= 2}


def diff(a: dict, b: dict) -> str:
    parts = [] if a["variant"] == b["variant"] else [f"variant {a['variant']}->{b['variant']}"]
    pa, pb = a.get("params") or {}, b.get("params") or {}
    parts += [f"{k} {pa.get(k)}->{pb.get(k)}" for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)]
    return ", ".join(parts)


def score(gs: dict, key: str, min_gap: float) -> dict:
    per = {}
    for (f, gpu, module, dtype, shape), rs in gs.items():
        m = per.setdefault(module, {"good": 0.0, "pairs": 0, "rho": [], "wrong": []})
        if len(rs) >= 3:
            m["rho"].append(spearman([r["time_ms"] for r in rs], [r[key] for r in rs]))
        for a, b in itertools.combinations(rs, 2):
            meas = math.log(b["time_ms"] / a["time_ms"])
            if abs(meas) < min_gap:
                continue
            sim = math.log(b[key] / a[key])
            m["pairs"] += 1
            m["good"] += 1.0 if meas * sim > 0 else 0.5 if sim == 0 else 0.0
            if meas * sim <= 0:
                lo, hi = (a, b) if meas > 0 else (b, a)
                m["wrong"].append((abs(meas), f, gpu, dtype, shape, lo, hi, sim if meas > 0 else -sim))
    return per


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", nargs="*", default=[])
    ap.add_argument("--module", action="append")
    ap.add_argument("--pairs", action="store_true")
    ap.add_argument("--min-gap", type=float, default=0.03)
    ap.add_argument("--only-held", action="store_true")
    a = ap.parse_args(argv)
    modules = set(a.module or MODULES)
    stored = [] if a.only_held else sorted(glob.glob(str(ROOT / "measurements" / "*.json")))
    for label, paths in (("stored", stored), ("held", a.held)):
        if not paths:
            continue
        rows, dropped = load(paths, modules)
        gs = groups(rows)
        now, then = score(gs, "sim_now", a.min_gap), None
        print(f"== {label}: {len(rows)} rows ({dropped} dropped), {len(gs)} groups")
        for module in sorted(now):
            m = now[module]
            rho = sum(m["rho"]) / len(m["rho"]) if m["rho"] else float("nan")
            po = m["good"] / m["pairs"] if m["pairs"] else float("nan")
            print(f"  {module:26} pairs {m['pairs']:4d} order {po:.3f}  rho mean {rho:+.3f} ({len(m['rho'])} groups)")
            if a.pairs:
                for gap, f, gpu, dtype, shape, lo, hi, sim in sorted(m["wrong"], key=lambda w: -w[0])[:25]:
                    print(f"      meas {math.exp(gap):.3f}x sim {math.exp(-sim):.3f}x  {gpu} {dtype} {shape} [{f}]\n"
                          f"        faster {lo['variant']} {lo.get('params')}  {lo['time_ms']*1e3:.1f}us sim {lo['sim_now']*1e3:.1f}\n"
                          f"        slower: {diff(lo, hi)}  {hi['time_ms']*1e3:.1f}us sim {hi['sim_now']*1e3:.1f}")
    return 0



def dump(module: str, paths: list | None = None) -> None:
    """Every group of one module: rows by measured time, with the simulated time and the launch's features."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.gpucheck import make_task
    rows, _ = load(paths or sorted(glob.glob(str(ROOT / "measurements" / "*.json"))), {module})
    mod = REGISTRY[module]
    for key, rs in sorted(groups(rows).items()):
        best = min(r["time_ms"] for r in rs)
        sbest = min(r["sim_now"] for r in rs)
        print(f"-- {key[0]} {key[1]} {key[3]} {key[4]}")
        for r in sorted(rs, key=lambda r: r["time_ms"]):
            task = make_task(mod, r["gpu"], r["dtype"], r["shape"])
            ln = mod.variant(r["variant"]).launch(r["params"], task)
            print(f"   {r['time_ms']/best:6.3f} sim {r['sim_now']/sbest:6.3f}  {r['time_ms']*1e3:8.1f}us  "
                  f"{r['variant']:24} {json.dumps(r['params'])}  grid {ln.grid} thr {ln.threads} regs {ln.regs} "
                  f"bpa {ln.bytes_per_access} tr {ln.traffic:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dump"]:
        dump(sys.argv[2], sys.argv[3:] or None)
        sys.exit(0)
    sys.exit(main())
