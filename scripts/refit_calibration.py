"""Refit the simulator's calibration constants from the shipped H200 measurements.

    python3 scripts/refit_calibration.py [--check] [--jobs N] [--folds N] [--cv-json F] [--two-sided] [--hold-launch] [--all-rows]

Reads measurements/h200_kernels.json (our own candidates timed on an H200), computes
each matched candidate's uncalibrated roofline time with the current op launch models, fits
(kernelstrain.calibration.fit) and writes kernelstrain/calibration/h200_fit.json. Before the
final fit on every record it fits 3 times holding out a third of the episodes each time, so every
record also gets a prediction from a fit that never saw its episode: those out-of-sample figures
are printed and stored in the fit file beside the in-sample ones (--folds 0: none). --check only prints the figures
of the shipped fit and exits 1 if the file is not what a refit would write. --cv-json writes the out-of-sample
figures overall and per module as scripts/calibration_cv.py --json does (the same folds: one run gives both).

    python3 scripts/refit_calibration.py --modules M1,M2 [--no-size] [--params] [--folds 3] [--check]
    python3 scripts/refit_calibration.py --modules M1,M2 --cross [--folds 5] [--check]
    python3 scripts/refit_calibration.py --rungs M1:rung,M1:rung2,M2:rung [--folds 3] [--check]

refits only those modules' terms (calibration.fit.refit_modules) on their rows of MODULE_FIT_FILES, the shipped
fit's shared terms (launch floor, extra-launch cost, impl exponents) and every other module's kept byte for byte,
so no other module's simulated time moves; --rungs moves only those rungs' ceilings (calibration.fit.refit_variants:
the rungs whose launch model changed, placed against the unchanged rungs they were timed beside), nothing else
moving; --cross gives those modules' rungs tile-geometry cross terms (calibration.cross_steps: a term in the product
of two tile dimensions' steps, calibration.fit.add_cross) fitted on the shipped fit's residuals, each rung's ceiling
moved by their mean, every other term kept. The run is recorded in the fit file's `module_refits` (modules, rows,
the figures of the fit it replaced on the same rows, out of sample by --folds, in sample, per module).

    python3 scripts/refit_calibration.py --size-ranges [--check]

sets each variant's size range (variant_size_range_ms: the least and most roofline floor of that variant's own rows,
as fit.fit_terms gives it) in the shipped fit from the rows its size exponents were fitted on (FIT_FILES; a module
of a `module_refits` entry without rungs: its MODULE_FIT_FILES rows), every fitted term kept: each fit row lies
inside its own variant's range, so no fit row's prediction moves; only shapes past a variant's rows do.

    python3 scripts/refit_calibration.py --param-ranges [--check]

sets the step ranges each parameter term is held within (param_range: the least and most param_steps of the module's
rows, variant_param_range: of each variant's own rows) from every stored device row outside the held-out seeds
(MODULE_FIT_FILES + RANGE_ONLY_FILES): a term reaches the values a device has timed, which the fit rows and the tests
of measured orderings check it against, and no further; every fitted term kept, each fit row inside its ranges, so no
fit row's prediction moves; only parameter values no device row has timed do. (Fitting from FIT_FILES' rows alone,
the narrower ranges broke device-measured orderings the tests hold: flash_decode_triton's 256-key tiles, 2.2x ahead
of 128 at D=64 on the H100, level in the model; held-out Spearman summed over six seeds 0.005 lower.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.calibration import FIT, FIT_FORMAT, Fit  # noqa: E402
from kernelstrain.calibration.fit import (CROSS_RIDGE, FIT_FILES, MODULE_FIT_FILES, add_cross, fit_with_folds,  # noqa: E402
                                          measured_records, out_of_fold, param_ranges,
                                          predict_ms, refit_modules, refit_variants, variant_param_ranges,
                                          variant_size_ranges)
from kernelstrain.calibration.metrics import agreement  # noqa: E402
from calibration_cv import KEYS, module_table  # noqa: E402  (this script's folder)

FIT_PATH = ROOT / "kernelstrain" / "calibration" / "h200_fit.json"
FOLDS = 5


def figures(rows: list, predict) -> dict:
    a = agreement([dict(r, sim_ms=predict(r)) for r in rows])
    worst = sorted(a.pop("module_spearman").items(), key=lambda kv: kv[1])[:5]
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in a.items()} | \
        {"lowest_module_spearman": {m: round(s, 3) for m, s in worst}}


ONE_LINE = ("param_range", "variant_param_range", "ceilings")     # one module a line


def dump(data: dict) -> str:
    """Stable JSON: one module's ceilings (and parameter ranges) a line."""
    parts = []
    for k, v in data.items():
        if k in ONE_LINE:
            rows = ",\n".join(f"  {json.dumps(m)}: {json.dumps(x, sort_keys=True)}" for m, x in sorted(v.items()))
            parts.append(f" {json.dumps(k)}: {{\n{rows}\n }}")
        else:
            parts.append(json.dumps({k: v}, indent=1)[2:-2])
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write(text: str, check: bool) -> int:
    if check:
        same = FIT_PATH.exists() and FIT_PATH.read_text() == text
        print("shipped fit is current" if same else "shipped fit differs from a refit")
        return 0 if same else 1
    FIT_PATH.write_text(text)
    print(f"wrote {FIT_PATH.relative_to(ROOT)}")
    return 0


def rungs_of(spec: str) -> dict:
    """'m:rung,m:rung2,n:rung' -> {m: [rung, rung2], n: [rung]}"""
    out = {}
    for item in spec.split(","):
        module, rung = item.split(":")
        out.setdefault(module, []).append(rung)
    return out


def module_refit(modules: list, folds: int, jobs: int, check: bool, rungs: dict | None = None,
                 size: bool = True, params: bool = False, cross: bool = False) -> int:
    """refit_modules of `modules` (with rungs: refit_variants of those rungs) on the shipped fit, recorded in its
    `module_refits` (an earlier entry naming any of these modules dropped); size: False, the modules fitted without
    a size term (their size exponents dropped); params: their parameter exponents (and step ranges) refitted too;
    cross: add_cross of `modules` instead (their rungs' tile-geometry cross terms on top of the shipped fit, nothing
    else refitted; the module's earlier entries stay: their terms do)."""
    rows = measured_records(MODULE_FIT_FILES, set(modules))
    kw = {"variants": rungs} if rungs else {"crossed": modules} if cross else \
        {"modules": modules, **({} if size else {"size": False}), **({"keep": ()} if params else {})}
    final = refit_variants(rows, FIT, rungs) if rungs else add_cross(rows, FIT, modules) if cross else \
        refit_modules(rows, FIT, **kw)
    held_out = out_of_fold(rows, folds, jobs, base=FIT, **kw) if folds else []
    report = {"replaced": figures(rows, lambda r: predict_ms(FIT, r)),
              **({"out_of_sample": figures(held_out, lambda r: r["sim_ms"])} if folds else {}),
              "in_sample": figures(rows, lambda r: predict_ms(final, r))}
    for name, fig in report.items():
        print(f"{name:14} " + " ".join(f"{k}={v}" for k, v in fig.items() if k != "lowest_module_spearman"))
    shipped = json.loads(FIT_PATH.read_text())
    entry = {"modules": sorted(modules), **({"rungs": rungs} if rungs else {}), **({"params": True} if params else {}),
             **({"cross": True} if cross else {}),
             "source": f"{' + '.join(MODULE_FIT_FILES)}: {len(rows)} matched timed candidates of these modules, "
                       f"{len({r['episode'] for r in rows})} episodes",
             "method": ("scripts/refit_calibration.py --rungs: calibration.fit.refit_variants (those rungs' ceilings "
                        "moved, every other term kept)" if rungs else
                        "scripts/refit_calibration.py --modules --cross: calibration.fit.add_cross (each rung's "
                        f"tile-geometry cross terms fitted on the shipped fit's residuals, ridge {CROSS_RIDGE}, the rung's "
                        "ceiling moved by their mean; every other term kept)" if cross else
                        "scripts/refit_calibration.py --modules: calibration.fit.refit_modules (their parameter "
                        "exponents, the shared terms and every other module's kept)"
                        + ("" if size else "; --no-size: no size term (fit_terms size=False)")
                        + ("; --params: their parameter exponents refitted too (refit_modules keep=())" if params else ""))
                       + (f"; out_of_sample: {folds} folds by episode" if folds else "; no out-of-sample figures"),
             "figures": report,
             **({"modules_out_of_sample": {m: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in t.items()}
                                           for m, t in module_table(held_out).items()}} if folds else {})}
    earlier = [e for e in shipped.get("module_refits", []) if not set(e["modules"]) & set(modules)
               or (cross and not e.get("cross"))]
    data = {**{k: v for k, v in shipped.items() if k not in final.to_json()}, **final.to_json(),
            "module_refits": earlier + [entry]}
    data = {k: data[k] for k in [k for k in shipped if k in data] + [k for k in data if k not in shipped]}
    data = {k: v for k, v in data.items() if k != "ceilings"} | {"ceilings": data["ceilings"]}
    return write(dump(data), check)


def global_files(shipped: dict) -> tuple:
    """The files the fit's global terms were fitted on: MODULE_FIT_FILES where the global refit ran --all-rows (its
    `source` names them), else FIT_FILES. The size ranges must come from the rows the size exponents were fitted on
    (docs/sim_issue30_s13.md section 7: ranges read from FIT_FILES under an all-rows fit left 9 modules with variant
    size exponents and no variant range)."""
    return MODULE_FIT_FILES if shipped["source"].startswith(" + ".join(MODULE_FIT_FILES) + ":") else FIT_FILES


def kept_modules(shipped: dict) -> set:
    """The modules scripts/refit_gate.py put back on an earlier fit's terms: their ranges are that fit's, kept."""
    return {e["module"] for e in shipped.get("kept_modules", [])}


def size_range_refit(check: bool) -> int:
    """The shipped fit with variant_size_range_ms set from the rows its size exponents were fitted on (see above)."""
    shipped = json.loads(FIT_PATH.read_text())
    own_rows = {m for e in shipped.get("module_refits", []) if "rungs" not in e and not e.get("cross") for m in e["modules"]}
    kept = kept_modules(shipped)
    ranges = {m: v for m, v in FIT.variant_size_range_ms.items() if m in kept}
    for files, modules in ((global_files(shipped), set(FIT.size_exponents) - own_rows - kept),
                           (MODULE_FIT_FILES, set(FIT.size_exponents) & own_rows - kept)):
        ranges.update(variant_size_ranges(measured_records(files, modules), FIT.size_exponents))
    data = {**shipped, "format": FIT_FORMAT, "variant_size_range_ms": dict(sorted(ranges.items()))}
    data = {k: data[k] for k in [k for k in shipped if k in data] + [k for k in data if k not in shipped]}
    data = {k: v for k, v in data.items() if k != "ceilings"} | {"ceilings": data["ceilings"]}
    wide = sum(1 for m, by_v in ranges.items() for lo, hi in by_v.values()
               if (lo, hi) != tuple(FIT.size_range_ms.get(m, (lo, hi))))
    print(f"{sum(len(v) for v in ranges.values())} variants of {len(ranges)} modules; {wide} span less than their module")
    return write(dump(data), check)


# stored device checks in no fit list whose parameter values a term may reach (--param-ranges): rows that time
# configurations the fit files lack, which the tests of measured orderings hold (roomK k3 / k4 / k12: gemm_splitk_cuda
# BK 128; sim2 decode1b / 3 / 6: flash_decode_triton 256-key tiles). The held-out gpu-check seeds and sim j3 stay out.
RANGE_ONLY_FILES = ("h100_roomK_k3.json", "h100_roomK_k4.json", "h100_roomK_k12.json", "h100_sim2_decode1b.json",
                    "h100_sim2_decode3.json", "h100_sim2_decode6.json",
                    # device rows of the room helpers' checks (the orderings their tests hold): roomM's min_p chunks
                    # (docs/roomM_device_h100_m1), roomT's Triton room on the H100 / H200, gemm_fp4_triton's split rung
                    "h100_roomM_m1.json", "h100_room26_roomT.json", "h200_room26b_roomT.json", "h100_roomT_fp4split.json")


def _ok_rows(name: str) -> list:
    """The timed, correct, bug-free rows of a stored device check (any of the measurement files' layouts)."""
    from kernelstrain.calibration.fit import MEASUREMENTS, timed_rows
    if name not in RANGE_ONLY_FILES:
        return timed_rows(name)
    rows = json.loads((MEASUREMENTS / name).read_text())["rows"]
    return [r for r in rows if r.get("label") == "ok" and r.get("ok") and r.get("time_ms") and not r.get("bug")]


def param_records(files) -> list:
    """{module, variant, steps} of every timed row of `files` whose module and rung the registry has (param_steps
    against the rung's current defaults; no launch model asked)."""
    from kernelstrain.calibration import param_steps
    from kernelstrain.ops import REGISTRY
    out = []
    for name in files:
        for k in _ok_rows(name):
            m = REGISTRY.get(k["module"])
            v = next((v for v in m.variants if v.tag == k["variant"]), None) if m else None
            if v is not None:
                out.append({"module": m.name, "variant": v.tag,
                            "steps": param_steps({**v.defaults(), **k["params"]}, v.defaults())})
    return out


def param_range_refit(check: bool) -> int:
    """The shipped fit with param_range / variant_param_range set from the stored device rows (see above)."""
    shipped = json.loads(FIT_PATH.read_text())
    kept = kept_modules(shipped)
    rows = [r for r in param_records(MODULE_FIT_FILES + RANGE_ONLY_FILES) if r["module"] not in kept]
    found = {"param_range": param_ranges(rows, FIT.param_exponents),
             "variant_param_range": variant_param_ranges(rows, FIT.param_exponents)}
    for name, ranges in found.items():      # a kept module's ranges are its earlier fit's (scripts/refit_gate.py)
        ranges.update({m: v for m, v in getattr(FIT, name).items() if m in kept})
        found[name] = dict(sorted(ranges.items()))
    data = {**shipped, "format": FIT_FORMAT, **found}
    data = {k: data[k] for k in [k for k in shipped if k in data] + [k for k in data if k not in shipped]}
    data = {k: v for k, v in data.items() if k != "ceilings"} | {"ceilings": data["ceilings"]}
    print(f"{sum(len(v) for v in found['param_range'].values())} parameters of {len(found['param_range'])} modules, "
          f"{sum(len(v) for v in found['variant_param_range'].values())} variants")
    return write(dump(data), check)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped fit, write nothing")
    ap.add_argument("--jobs", type=int, default=1, help="processes: the global fit's grid scans and final fits of every "
                    "fold, or a module refit's folds, spread over them (same file)")
    ap.add_argument("--folds", type=int, default=FOLDS,
                    help=f"hold-out folds of the out-of-sample figures (default {FOLDS}; 0: none, the final fit alone, "
                         "~1/6 of the CPU time: a fresh gpu-check seed is then the only out-of-sample check)")
    ap.add_argument("--cv-json", type=Path, help="write the out-of-sample figures, overall and per module, here")
    ap.add_argument("--two-sided", action="store_true",
                    help="the global fit with every row fitted two-sided (fit_terms bounds=False), as the shipped "
                         "global fit was: the one-sided bounds lost held-out Spearman (docs/sim_issue30_s11.md 2)")
    ap.add_argument("--hold-launch", action="store_true",
                    help="the global fit at the shipped fit's launch floor and extra-launch cost, no scan of them")
    ap.add_argument("--all-rows", action="store_true",
                    help="the global fit on every stored row outside the held-out seeds (MODULE_FIT_FILES), not FIT_FILES")
    ap.add_argument("--modules", help="comma-separated: refit only these modules' terms (see above)")
    ap.add_argument("--rungs", help="comma-separated module:rung: move only these rungs' ceilings (see above)")
    ap.add_argument("--no-size", action="store_true", help="with --modules: fit them without a size term")
    ap.add_argument("--params", action="store_true", help="with --modules: refit their parameter exponents too")
    ap.add_argument("--cross", action="store_true",
                    help="with --modules: give their rungs tile-geometry cross terms on top of the shipped fit, nothing "
                         "else refitted (calibration.fit.add_cross)")
    ap.add_argument("--size-ranges", action="store_true",
                    help="set each variant's size range from its fit rows, every fitted term kept (see above)")
    ap.add_argument("--param-ranges", action="store_true",
                    help="set each parameter term's step range from its fit rows, every fitted term kept (see above)")
    a = ap.parse_args(argv)
    if a.size_ranges:
        return size_range_refit(a.check)
    if a.param_ranges:
        return param_range_refit(a.check)
    if a.cv_json and not a.folds:
        ap.error("--cv-json needs --folds > 0")
    if a.rungs:
        rungs = rungs_of(a.rungs)
        return module_refit(sorted(rungs), a.folds, a.jobs, a.check, rungs)
    if a.modules:
        if a.cross and (a.params or a.no_size):
            ap.error("--cross refits nothing but the cross terms: no --params / --no-size with it")
        return module_refit(a.modules.split(","), a.folds, a.jobs, a.check, size=not a.no_size, params=a.params,
                            cross=a.cross)
    files = MODULE_FIT_FILES if a.all_rows else FIT_FILES
    rows = measured_records(files)
    analytic = Fit(launch_us={"nvidia": 4.0, "amd": 5.0}, extra_launch_us={"nvidia": 2.5, "amd": 3.5})
    # one pool: --jobs spreads the final fit's scan too
    hold = {"launch": (FIT.launch_us["nvidia"], FIT.extra_launch_us["nvidia"])} if a.hold_launch else {}
    final, held_out = fit_with_folds(rows, a.folds, a.jobs, **({"bounds": False} if a.two_sided else {}), **hold)
    if a.cv_json:
        overall = agreement(held_out)
        a.cv_json.write_text(json.dumps({"overall": {k: overall[k] for k in KEYS}, "modules": module_table(held_out)},
                                        indent=1) + "\n")
    report = {
        "uncalibrated": figures(rows, lambda r: predict_ms(analytic, r)),
        **({"out_of_sample": figures(held_out, lambda r: r["sim_ms"])} if a.folds else {}),
        "in_sample": figures(rows, lambda r: predict_ms(final, r)),
    }
    data = {"format": FIT_FORMAT,
            "source": f"{' + '.join(files)}: {len(rows)} matched timed candidates, "
                      f"{len({r['module'] for r in rows})} modules, {len({r['episode'] for r in rows})} episodes",
            "method": (f"scripts/refit_calibration.py; out_of_sample: {a.folds} folds by episode "
                       "(calibration.fit.episode_folds), each record predicted by the fit that held its episode out"
                       if a.folds else "scripts/refit_calibration.py --folds 0: no out-of-sample figures"),
            "figures": report, **final.to_json()}
    for name, fig in report.items():
        print(f"{name:14} " + " ".join(f"{k}={v}" for k, v in fig.items() if k != "lowest_module_spearman"))
        print(f"{'':14} lowest module Spearman: {fig['lowest_module_spearman']}")
    text = dump(data)
    if a.check:
        same = FIT_PATH.exists() and FIT_PATH.read_text() == text
        print("shipped fit is current" if same else "shipped fit differs from a refit")
        return 0 if same else 1
    FIT_PATH.write_text(text)
    print(f"wrote {FIT_PATH.relative_to(ROOT)} ({len(final.ceilings)} modules, "
          f"{sum(len(v) for v in final.ceilings.values())} variant ceilings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
