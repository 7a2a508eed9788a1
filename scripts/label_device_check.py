"""Device check of the wrong_result labels: every CUDA rung's bug renders at each parameter's smallest and largest
value (the others at the rung's defaults), at the first menu shape the bug is offered at, run against the PyTorch
reference on the GPU three times each (fresh inputs a run); a render that passes any run is a false label there.

    python3 scripts/label_device_check.py                # on a CUDA machine; writes $OUT/summary.txt, label_device.json
    LABELS_REHEARSE=3 python3 scripts/label_device_check.py   # no GPU: the first 3 cases through every path but the GPU's
    LABELS_LIST=1 python3 scripts/label_device_check.py       # print the planned cases (priority order) and stop
    LABELS_BUILD_S=55 LABELS_RUN_S=40                          # the build pass's deadline, the run pass's budget
    LABELS_FROM=N                                              # start at case N of the plan (a follow-up job)
    LABELS_FLAKY=1                                             # first FLAKY's renders at every shape and configuration
    LABELS_SKIP=FILE                                           # leave out the case ids in FILE (a JSON list: run before)
    LABELS_ONLY=FILE                                           # keep only the case ids FILE lists, one a line (a job's
                                                               # slice of the cases the other variables select)
    LABELS_TIERS=1,0,2                                         # the order of the tiers (default 0,1,2)
    LABELS_FIRST=mod:rung:bug[:config],... or @FILE            # first these at every shape (and configuration) (unsettled)
    LABELS_TRITON=1                                            # first the bugs of the Triton rungs the interpreter cannot
                                                               # run (NOT_INTERPRETED)
    LABELS_OK=FILE                                             # then clean (ok) renders, lines module|rung|config|shape:
                                                               # one run each, the check pass only (no timing)
    LABELS_PLAN=0                                              # leave out the CUDA plan (only the cases above)
    LABELS_ALL_SHAPES=1                                        # LABELS_FIRST / LABELS_FLAKY at every offered menu shape,
                                                               # also those past gpu-check's size rule (sample.fits)
    LABELS_REPEATS=N                                           # runs of a bug render (default 3)
    LABELS_FRESH=1                                             # each case in a fresh worker process (an over-read's
                                                               # fault depends on what the process allocated before)

The CPU cannot settle the cases planned first: bugs whose reach depends on the schedule (a missing barrier, a plain
store racing another) or on the values (a wrong identity in a reduction, a 16-bit accumulator, a combine reading
the wrong partial, a bound off by one in a tail loop). Cases are built in that priority order, round-robin over the
modules, until LABELS_BUILD_S; the rest are listed as not built. Uses kernelstrain.gpucheck's build and run passes.
Exit 1 if a bug passes a run.
"""
import concurrent.futures
import hashlib
import json
import os
import sys
import time
from itertools import zip_longest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.gpucheck import _checked, catalog_gpu, require_gpu  # noqa: E402
from kernelstrain.gpucheck.sample import fits  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate, writable  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# bugs by what settles them: the schedule first, then values, then what a reading of the render mostly settles
# (tier 0 round-robin over the modules as one: each module's schedule- and value-dependent cases come early)
TIERS = (("missing_barrier", "racy_update", "wrong_init", "half_accumulator", "bad_combine_index"),
         ("off_by_one", "broadcast_index"), ("missing_scale", "no_bounds_check"))
# parameters that change no bug's reach (the loop's unrolling, the grid's residency): their extremes come last
REACH_FREE = ("pragma_unroll", "unroll", "blocks_per_sm")
REPEATS = int(os.environ.get("LABELS_REPEATS", "3"))      # runs of a bug render, fresh inputs each


def configs(v) -> list:
    """(label, params, rank): each parameter's smallest and largest value, the others at the defaults; rank 0 for
    parameters that move a bug's reach, 1 for those that do not, 2 for the defaults themselves."""
    out = []
    for p in v.params:
        for value in dict.fromkeys((p.values[0], p.values[-1])):
            params = {**v.defaults(), p.name: value}
            if params != v.defaults() and all(params != o[1] for o in out):
                out.append((f"{p.name}={value}", params, int(p.name in REACH_FREE)))
    return out + [("default", v.defaults(), 2)]


def first_shape(m, v, bug: str, params: dict, dtype: str, gpu: str):
    """The first menu shape the engine offers `bug` at with these params (and gpu-check runs in seconds)."""
    for shape in m.shapes:
        if not fits(m, dtype, shape, gpu):
            continue
        task = make_task(m, gpu, dtype, shape)
        if v.breaks_at(bug, task, params) and simulate(m, v, params, task).ok and writable(m, v, params, task):
            return shape, task
    return None, None


# Triton rungs Triton's interpreter cannot run on the CPU (persistent grids and TMA descriptors: integer masks and
# `int.to`; layernorm_bwd's partial buffers; selective_scan past the interpreter's time): the device runs their bugs
NOT_INTERPRETED = ("persistent", "tma")
NOT_INTERPRETED_MODULES = ("layernorm_bwd_triton", "selective_scan_triton")


def not_interpreted(m, v) -> bool:
    return m.impl == "triton" and (any(k in v.tag.split("_") for k in NOT_INTERPRETED)
                                   or m.name in NOT_INTERPRETED_MODULES)


def planned(gpu: str, rungs=lambda m, v: m.impl == "cuda") -> list:
    """Every bug case of the `rungs` (default: every CUDA rung), in priority order (tier and parameter rank),
    round-robin over the modules."""
    buckets = {}                      # (tier, rank) -> module -> cases
    for name, m in sorted(REGISTRY.items()):
        dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        for v in m.variants:
            if not rungs(m, v):
                continue
            for label, params, rank in configs(v):
                for bug in v.bugs_for(dtype, params):
                    shape, task = first_shape(m, v, bug, params, dtype, gpu)
                    if shape is None:
                        continue
                    tier = next((i for i, t in enumerate(TIERS) if bug in t), len(TIERS) - 1)   # (a new bug: last)
                    cid = f"{name}|{v.tag}|{label}|{','.join(f'{k}={x}' for k, x in shape.items())}|{bug}"
                    buckets.setdefault((tier, rank), {}).setdefault(name, []).append(
                        {"id": cid, "episode": cid, "module": name, "impl": m.impl, "variant": v.tag, "params": params,
                         "dtype": dtype, "shape": dict(shape), "at": "task", "label": "wrong_result",
                         "kind": "wrong_result", "bug": bug, "bug_repeats": REPEATS, "bug_all_runs": True, "main": True,
                         "rendered": True, "code": knobs.render(m, v, params, task, bug)})
    out, seen = [], set()
    # the reach-moving extremes of tiers 0 and 1 first, then their other configurations, then the rest
    order = [int(t) for t in os.environ.get("LABELS_TIERS", "0,1,2").split(",")]
    for key in sorted(buckets, key=lambda tr: (tr[0] == order[-1], tr[1] > 0, order.index(tr[0]), tr)):
        for group in zip_longest(*buckets[key].values()):
            for c in group:
                digest = c and hashlib.sha1((c["code"] + json.dumps(c["shape"])).encode()).hexdigest()
                if c and digest not in seen:     # a parameter the render does not read: the same case
                    seen.add(digest)
                    out.append(c)
    for i, c in enumerate(out):
        c["idx"] = i
    return out


# (module, rung, bug): the renders j1 (an H100, 2026-12-07 07:49 UTC) saw pass some of their 3 runs at the first menu
# shape; LABELS_FLAKY=1 runs each at every menu shape and configuration (the row rates of the samplers' races)
FLAKY = [("top_p_cuda", "full_sort", "missing_barrier"), ("top_p_cuda", "warp_ballot_scan", "racy_update"),
         ("top_p_cuda", "vectorized_float4", "racy_update"), ("topk_cuda", "full_sort", "missing_barrier"),
         ("topk_cuda", "histogram_refine", "racy_update"), ("topk_cuda", "warp_ballot_scan", "racy_update"),
         ("topk_cuda", "vectorized_float4", "racy_update"), ("topk_cuda", "split_row_two_stage", "racy_update"),
         ("fp8_quant_cuda", "register_cached", "missing_barrier"), ("fp8_quant_cuda", "fused_smem_block", "missing_barrier"),
         ("transpose_cuda", "tma_swizzled", "missing_barrier"), ("flash_prefill_cuda", "mma_sync", "missing_barrier")]


def flaky(gpu: str, triples=FLAKY) -> list:
    """The renders of (module, rung, bug) `triples` at every offered menu shape (that gpu-check runs in seconds) and
    configuration."""
    out = []
    for name, tag, bug, *only in triples:
        m = REGISTRY[name]
        v = m.variant(tag)
        dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        for label, params, _ in configs(v):
            if only and label not in only:
                continue
            for shape in m.shapes:
                task = make_task(m, gpu, dtype, shape)
                if not ((os.environ.get("LABELS_ALL_SHAPES") or fits(m, dtype, shape, gpu)) and bug in v.bugs_for(dtype, params) and v.breaks_at(bug, task, params)
                        and simulate(m, v, params, task).ok and writable(m, v, params, task)):
                    continue
                cid = f"{name}|{tag}|{label}|{','.join(f'{k}={x}' for k, x in shape.items())}|{bug}"
                out.append({"id": cid, "episode": cid, "module": name, "impl": m.impl, "variant": tag, "params": params,
                            "dtype": dtype, "shape": dict(shape), "at": "task", "label": "wrong_result",
                            "kind": "wrong_result", "bug": bug, "bug_repeats": REPEATS, "bug_all_runs": True, "main": True,
                            "rendered": True, "code": knobs.render(m, v, params, task, bug)})
    return out


def ok_cases(path: Path, gpu: str) -> list:
    """Clean renders of FILE's lines `module|rung|config|shape` (config as configs() labels it, shape a dict literal):
    ok candidates whose correctness leans on a tail the menu's shape leaves (a dimension no tile divides)."""
    import ast
    out = []
    for line in path.read_text().splitlines():
        name, tag, label, shape = line.split("|")
        m = REGISTRY[name]
        v = m.variant(tag)
        params = next(p for lab, p, _ in configs(v) if lab == label)
        shape = ast.literal_eval(shape)
        dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        task = make_task(m, gpu, dtype, shape)
        cid = f"{name}|{tag}|{label}|{','.join(f'{k}={x}' for k, x in shape.items())}|ok"
        out.append({"id": cid, "episode": cid, "module": name, "impl": m.impl, "variant": tag, "params": params,
                    "dtype": dtype, "shape": dict(shape), "at": "task", "label": "ok", "kind": "ok", "bug": None,
                    "main": True, "rendered": True, "code": knobs.render(m, v, params, task)})
    return out


def build_until(cases: list, build_dir: Path, jobs: int, deadline: float) -> list:
    """Build cases in order on `jobs` threads; none is started past `deadline`. The built ones (build_ok set)."""
    from kernelstrain.gpucheck.runtime import build_case
    build_dir.mkdir(parents=True, exist_ok=True)

    def one(c):
        if time.time() > deadline:
            return c, None
        return c, build_case(c, build_dir)

    built = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for c, b in pool.map(one, cases):
            if b is None:
                continue
            c.update(build_ok=b["ok"], so=b.get("so"), src=b.get("src"), log=b["log"], compile_s=b["compile_s"])
            built.append(c)
    return built


def one_process_each(cases: list, work: Path, results_path: Path, case_timeout: float, deadline: float,
                     workers: int = 1, label: str = "check") -> dict:
    """runtime.run_cases with every case in its own worker process: whether a read past an input's end faults
    depends on the allocations around that input, which a long-lived worker's earlier cases would decide."""
    import threading
    from kernelstrain.gpucheck.runtime import run_stream
    lock, results = threading.Lock(), {}
    with results_path.open("w") as rf:
        def record(r):
            with lock:
                results[r["idx"]] = r
                rf.write(json.dumps(r) + "\n")
                rf.flush()
                err = (" | " + r["error"].splitlines()[0][:160]) if r.get("error") else ""
                print(f"[{label} {len(results)}/{len(cases)}] {'ok  ' if r['ok'] else 'FAIL'} {r['id']} "
                      f"rel_l2={r.get('rel_l2_err')} nbad={r.get('nbad')}{err}", file=sys.stderr, flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(lambda ic: run_stream([ic[1]], work / f"cases_{label}_{ic[0]}.json", record, case_timeout,
                                                deadline), enumerate(cases)))
    return results


def checked(built: list, work: Path, jobs: int, budget_s: float) -> list:
    """gpu-check's correctness pass alone (no timing of the ok renders): one merged row per case."""
    from kernelstrain.gpucheck.runtime import run_cases
    runner = one_process_each if os.environ.get("LABELS_FRESH") else run_cases
    done = _checked(built, work, jobs, time.time() + budget_s, runner)
    by_idx = {c["idx"]: c for c in built}
    return [dict(by_idx[i], **{k: v for k, v in r.items() if k not in by_idx[i] or k in ("ok", "error")})
            for i, r in sorted(done.items())]


def main() -> int:
    out = Path(os.environ.get("OUT", "/tmp/labels_device_out"))
    out.mkdir(parents=True, exist_ok=True)
    rehearse = int(os.environ.get("LABELS_REHEARSE", "0"))
    gpu = "H100"
    start = int(os.environ.get("LABELS_FROM", "0"))         # a follow-up job: the cases past an earlier job's
    first = os.environ.get("LABELS_FIRST", "")
    first = Path(first[1:]).read_text().split() if first.startswith("@") else first.split(",")   # @FILE: one a line
    first = [tuple(t.split(":")) for t in first if t]
    skip = set(json.loads(Path(os.environ["LABELS_SKIP"]).read_text())) if os.environ.get("LABELS_SKIP") else set()
    # in this order: the flaky and unsettled renders, the uninterpreted Triton rungs' bugs, the ok renders, the plan
    # (LABELS_OK_LAST=1: the ok renders after the plan)
    head = (flaky(gpu) if os.environ.get("LABELS_FLAKY") else []) + flaky(gpu, first) + \
        (planned(gpu, not_interpreted) if os.environ.get("LABELS_TRITON") else [])
    oks = ok_cases(Path(os.environ["LABELS_OK"]), gpu) if os.environ.get("LABELS_OK") else []
    plan = planned(gpu)[start:] if os.environ.get("LABELS_PLAN", "1") == "1" else []
    cases = head + (plan + oks if os.environ.get("LABELS_OK_LAST") else oks + plan)
    only = set(Path(os.environ["LABELS_ONLY"]).read_text().split("\n")) if os.environ.get("LABELS_ONLY") else None
    ids = set(skip)             # each id once, at its first place; none that ran before
    cases = [c for c in cases if not (c["id"] in ids or ids.add(c["id"])) and (only is None or c["id"] in only)]
    cases = cases[:rehearse] if rehearse else cases
    for i, c in enumerate(cases):
        c["idx"] = i
    if os.environ.get("LABELS_LIST"):
        for c in cases:
            print(c["idx"], c["id"])
        return 0
    device = "rehearsal (no GPU)" if rehearse else require_gpu()
    if not rehearse and catalog_gpu(device) != gpu:
        print(f"note: planned on the H100's menus, running on {device}", file=sys.stderr)
    t0 = time.time()
    built = build_until(cases, Path("/tmp/labels_build"), os.cpu_count() or 8,
                        t0 + float(os.environ.get("LABELS_BUILD_S", "55")))
    unbuilt = [c["id"] for c in cases[len(built):]]
    print(f"label_device: {len(built)} of {len(cases)} cases built in {time.time() - t0:.0f} s, "
          f"{sum(not c['build_ok'] for c in built)} failed", file=sys.stderr)
    for c in built:
        c.pop("code", None)
    work = out / "run"          # its check.jsonl gets a row as each case ends: a killed job still leaves them
    work.mkdir(parents=True, exist_ok=True)
    (out / "plan.txt").write_text("".join(f"{c['idx']} {c['id']}\n" for c in cases))
    rows = checked(built, work, os.cpu_count() or 8, float(os.environ.get("LABELS_RUN_S", "40")))
    keep = ("id", "module", "variant", "params", "dtype", "shape", "bug", "build_ok", "ok", "error", "runs",
            "failed_runs", "rel_l2_err", "nbad", "max_abs_err")
    (out / "label_device.json").write_text(json.dumps({"device": device, "planned": len(cases),
                                                       "rows": [{k: r.get(k) for k in keep} for r in rows],
                                                       "not_built": unbuilt}, indent=1))
    lines, problems = [], 0
    for r in rows:
        unrun = (r.get("error") or "").startswith(("not run", "worker could not"))
        if r["label"] == "ok":                  # a clean render: a problem where it fails
            passed = r.get("build_ok") and not unrun and not r.get("ok")
        else:
            passed = r.get("build_ok") and not unrun and (r.get("failed_runs") or 0) < (r.get("runs") or 0)
        problems += bool(passed) or not r.get("build_ok")
        tag = ("WRONG " if r["label"] == "ok" else "PASSED ") if passed else \
            "NOBUILD " if not r.get("build_ok") else "NOT RUN " if unrun else ""
        detail = f"runs {r.get('failed_runs')}/{r.get('runs')} failed rel_l2 {r.get('rel_l2_err')} nbad {r.get('nbad')}"
        err = "".join((r.get("error") or "").splitlines()[:1])[:100]
        lines.append(f"{tag}{r['id']:100} {detail} {err}")
    text = "\n".join(lines) + (f"\n{len(rows)} run of {len(cases)} planned ({len(unbuilt)} not built), "
                               f"{problems} problems (a bug that passed a run, or did not build)\n")
    (out / "summary.txt").write_text(text)
    print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
