"""A shape grid for gpu-check (issue 17): a synthetic dataset for gpu-check: per module, the same distinct ok
candidates (variant x params, taken from the fit rows) at 3 shapes of the module's menu (smallest,
middle, largest by bytes that gpu-check runs at the task shape), one episode per shape.

    python3 scripts/shape_grid.py OUTDIR MODULE...     then on the GPU:
    python3 -m kernelstrain gpu-check OUTDIR --sample N --report F   (N: the cases it prints)

h200_gpucheck_grid5.json (kernelstrain/calibration/) is its run on 16 modules.

    python3 scripts/shape_grid.py --params OUTDIR MODULE...

a parameter grid instead: per module, at the 2 task shapes most of its fit episodes have (that gpu-check runs
at the task shape), one episode per shape holding every variant at its defaults and each of its parameters
moved one at a time over all its values (the others at their defaults), where the simulator says it compiles:
the within-variant parameter effects that same-episode pair order turns on.

    python3 scripts/shape_grid.py --params --unfitted OUTDIR [MODULE...]

the parameter grid of the modules no fit file holds yet (default: every one of them): a module without fit
rows takes its first dtype and 2 menu shapes that gpu-check runs at the task shape, the least and the most
bytes (the size effect beside the parameter effects). scripts/h200_unfitted.sh runs it on the H200."""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.sim import simulate
from kernelstrain.gpucheck.sample import fits, MAX_SIM_MS
from kernelstrain.calibration.fit import FIT_FILES, timed_rows
PER = 7
PARAMS = sys.argv[1] == "--params"
UNFITTED = "--unfitted" in sys.argv
args = [a for a in sys.argv[1 + PARAMS:] if a != "--unfitted"]
out = Path(args[0]); mods = args[1:]
rows = [k for f in FIT_FILES for k in timed_rows(f)]
if UNFITTED:
    fitted = {k["module"] for k in rows}
    mods = [m for m in (mods or sorted(REGISTRY)) if m not in fitted]
eps = []


def menu_task(mod) -> tuple:
    """(dtype, [shape, ...]) of a module with no fit rows: its first dtype, the fitting menu shapes of
    the least and the most bytes."""
    dt = mod.dtypes[0]
    shapes = sorted((s for s in mod.shapes if fits(mod, dt, s)),
                    key=lambda s: mod.cost(make_task(mod, "H200", dt, s)).bytes)
    return dt, [shapes[0], shapes[-1]] if len(shapes) > 1 else shapes


def one_at_a_time(var) -> list:
    """The variant's defaults, then each parameter over its other values with the rest at defaults."""
    base = var.defaults()
    out = [base]
    for p in var.params:
        out += [{**base, p.name: x} for x in p.values if x != base[p.name]]
    return out


def step_of(mod, var, p, t100, t200, n):
    a, b = simulate(mod, var, p, t100), simulate(mod, var, p, t200)
    if not (a.ok and b.ok and b.time_ms <= MAX_SIM_MS):
        return None
    return {"step": n, "kind": "structural", "tag": var.tag, "params": [{"name": k, "value": x} for k, x in p.items()],
            "code": knobs.render(mod, var, p, t100, None), "status": "ok", "failure": None,
            "bug": None, "typo": None, "time_ms": a.time_ms}


for m in (mods if PARAMS else []):
    mod = REGISTRY[m]
    mine = [k for k in rows if k["module"] == m]
    if mine:
        dt = max(set(k["dtype"] for k in mine), key=[k["dtype"] for k in mine].count)
        count = {}
        for k in mine:
            if k["dtype"] == dt and fits(mod, dt, k["shape"]):
                key = json.dumps(k["shape"], sort_keys=True)
                count.setdefault(key, set()).add(k["episode"])
        picked = [json.loads(key) for key in sorted(count, key=lambda s: (-len(count[s]), s))[:2]]
    else:
        dt, picked = menu_task(mod)
    for si, s in enumerate(picked):
        t100, t200 = make_task(mod, "H100", dt, s), make_task(mod, "H200", dt, s)
        steps = []
        for var in mod.variants:
            if not var.offered(dt):
                continue
            for p in one_at_a_time(var):
                st = step_of(mod, var, p, t100, t200, len(steps) + 1)
                if st:
                    steps.append(st)
        eps.append({"schema": "kernelstrain/episode@2", "id": f"kernelstrain-pgrid-{m}-{si}", "module": m,
                    "impl": mod.impl, "gpu": "H100", "arch": "sm_90a", "dtype": dt,
                    "shape": [{"dim": d, "value": x} for d, x in s.items()], "steps": steps})
        print(m, dt, s, len(steps))

for m in ([] if PARAMS else mods):
    mod = REGISTRY[m]
    mine = [k for k in rows if k["module"] == m]
    dt = max(set(k["dtype"] for k in mine), key=[k["dtype"] for k in mine].count)
    # distinct candidates, round-robin over variants
    by_v = {}
    for k in mine:
        key = (k["variant"], json.dumps(k["params"], sort_keys=True))
        by_v.setdefault(k["variant"], {})[key] = k["params"]
    pool = []
    depth = 0
    while len(pool) < 3 * PER and any(len(v) > depth for v in by_v.values()):
        for v in sorted(by_v):
            c = list(by_v[v].items())
            if depth < len(c): pool.append((v, c[depth][1]))
        depth += 1
    shapes = [s for s in mod.shapes if fits(mod, dt, s)]
    shapes.sort(key=lambda s: mod.cost(make_task(mod, "H200", dt, s)).bytes)
    pick = [shapes[0], shapes[len(shapes) // 2], shapes[-1]] if len(shapes) >= 3 else shapes
    for si, s in enumerate(pick):
        t100, t200 = make_task(mod, "H100", dt, s), make_task(mod, "H200", dt, s)
        steps = []
        for v, p in pool:
            var = mod.variant(v)
            a, b = simulate(mod, var, p, t100), simulate(mod, var, p, t200)
            if not (a.ok and b.ok and b.time_ms <= MAX_SIM_MS):
                continue
            steps.append({"step": len(steps) + 1, "kind": "structural", "tag": v,
                          "params": [{"name": n, "value": x} for n, x in p.items()],
                          "code": knobs.render(mod, var, p, t100, None), "status": "ok", "failure": None,
                          "bug": None, "typo": None, "time_ms": a.time_ms})
            if len(steps) == PER: break
        eps.append({"schema": "kernelstrain/episode@2", "id": f"kernelstrain-grid5-{m}-{si}", "module": m,
                    "impl": mod.impl, "gpu": "H100", "arch": "sm_90a", "dtype": dt,
                    "shape": [{"dim": d, "value": x} for d, x in s.items()], "steps": steps})
        print(m, dt, s, len(steps))
out.mkdir(parents=True, exist_ok=True)
(out / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
from kernelstrain.gpucheck.sample import sample_cases
cases = sample_cases(eps, sum(len(e["steps"]) for e in eps) if PARAMS else len(mods) * 3 * PER, 0)
print(len(eps), "episodes", sum(len(e["steps"]) for e in eps), "steps;", len(cases), "cases",
      sum(c["at"] == "task" for c in cases), "at task")
