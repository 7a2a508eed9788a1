"""Issue 35's device proof for fused episodes: KernelBench's own eval_kernel_against_ref on sampled
ok and wrong_result fused candidates, and the within-episode ranking of measured against
simulated times (gpu-check's figure: Spearman of each episode's candidates, mean >= 0.85).

    python3 scripts/fused_device_check.py prepare [--seed 11] [--episodes 160] [--dir data/fused_proof]
        here, no GPU: a fresh seed's fused run, exported (ok, wrong_result); KernelBench's static checker
        over every exported solution (DIR/static.txt); the eval sample (up to --ok / --wrong solutions,
        spread over impls, rungs and bugs) with its problems under DIR/kb/; the timing cases under
        DIR/timing/ (episodes with >= 3 distinct ok candidates, the eager baseline among them, each
        with its simulated time on the device's GPU, --gpu); KernelBench's src/ under DIR/KernelBench (git archive of
        a fetched checkout, --kb-git). DIR is ignored by git (data/).
    python3 scripts/fused_device_check.py extend [--dir data/fused_proof] [--cuda-variants 64x64x16x8x8 ...]
        here: the CUDA GEMM epilogue of the CUDA timing episodes whose GEMM is longest re-rendered at other tiles
        (BMxBNxBKxTMxTN), added as timing cases; --cuda-episodes / --eval-cuda cap the CUDA builds the device runs.
    python3 scripts/fused_device_check.py run [--dir data/fused_proof] --out OUT [--jobs 14] [--budget 270]
        on the GPU: the eval (scripts/kb_official_eval.py, KernelBench's code, every solution of the
        sample) while every timing candidate is built and run once in other processes; then every timing case alone on the GPU: ModelNew built
        as KernelBench builds it (seeded, cast to the problem's precision), warmed up (and 20 ms of calls), then the median
        of 7 batches of 20 back-to-back forward calls (CUDA events), the host's calls included as
        the simulator's times include them, each episode's cases timed twice over (the lesser median kept), and each
        kernel's own GPU time under torch.profiler (kernel_times: the model's kernels apart from the host's side);
        FUSED_REHEARSE=1 TRITON_INTERPRET=1 rehearses it on a CPU (eager calls, the KernelBench eval --dry); with --trivial-s S the budget's last S seconds run
        scripts/fused_trivial.py over the profile's tasks on the GPU; scripts/fused_host_probe.py times each
        kind of host call alone. OUT: kb_table.txt, kb_rows.jsonl, kb_stderr.txt, timing.jsonl, summary.txt,
        host.json, picks.txt (trivial.txt).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # this checkout's kernelstrain
KB_GIT = "/work/.mirror/ScalingIntelligence+KernelBench/repo"
PRECISION = {"fp32": "float32", "bf16": "bfloat16"}
DEVICE_CARDS = ("H100", "H200")    # the cards the device may be: the timing cases carry sims for each
BATCHES, CALLS, WARMUP = 7, 20, 3
WARMUP_MS = 20.0             # ... and calls for this long before the batches (an idle GPU's clocks ramp up)
PASSES = 2                   # each chunk timed twice over (time_chunk)
PROFILED_CALLS = 10          # calls under torch.profiler for each kernel's own GPU time (kernel_times)
DISTINCT = 0.05             # simulated times this far apart count as an order the model claims
RENDERED = ("half_accumulator", "missing_tail", "no_max_subtraction", "broadcast_index", "tf32_dot")
MAX_CANDIDATES = 4           # timed per episode: the eager baseline and up to 3 ok candidates of distinct simulated times
TRIVIAL_PARTS = 4
TRIVIAL_PROGRAMS = 1200
PROBE_S = 30                 # fused_host_probe.py's measurement after the timing pass (its build runs alongside the eval): --probe-s
CHUNK = 5                    # timing episodes a process (one process each cost ~5 s of imports; one crash loses a chunk)


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def _sim(module_name: str, tag: str, params: dict, dtype: str, shape: dict, gpu: str) -> dict:
    """The candidate's noise-free simulated call on the device's GPU: its time, the host's time to issue
    it and its kernels' time on the GPU (fused/timing.call_ms takes the longer)."""
    from kernelstrain.fused.module import fused_module
    from kernelstrain.tasks import make_task
    m = fused_module(module_name)
    task = make_task(m, gpu, dtype, shape)
    return {"sim_ms": m.simulate(m.variant(tag), params, task).time_ms, "sim_host_ms": m.host_us(tag) * 1e-3,
            "sim_kernels_ms": sum(m.kernels_ms(tag, params, task))}


def _family(name: str) -> str:
    from kernelstrain.fused.module import fused_module
    m = fused_module(name)
    return m.family if m is not None else ""


def _pick_eval(index: dict, n_ok: int, n_wrong: int, rng: random.Random, ok_dtype: str = "any") -> list:
    """Solutions to evaluate: one per (module, status), spread over impl x rung (ok) and impl x bug (wrong),
    round robin over those groups so that every group has one before any has two; ok ones of programs in
    `ok_dtype` only (unless "any": bf16 programs hold the roundings the reference makes). Embedding programs are
    left out: KernelBench's eval.py (423217d) casts every input tensor to the precision, the indices too,
    and F.embedding refuses them (its issue #151; the timing pass runs them, indices kept)."""
    from kernelstrain.fused.module import fused_module
    by = defaultdict(list)
    for s in index["solutions"]:
        m = fused_module(s["module"])
        if m is not None and m.family == "embedding":
            continue
        if s["status"] == "ok" and ok_dtype != "any" and m.view.dtype != ok_dtype:
            continue
        key = (s["impl"], s["tag"]) if s["status"] == "ok" else (s["impl"], s.get("bug") or s["tag"])
        by[(s["status"], key)].append(s)
    out, used = [], set()
    for status, n in (("ok", n_ok), ("wrong_result", n_wrong)):
        groups = [sorted(v, key=lambda s: s["file"]) for (st, _), v in sorted(by.items()) if st == status]
        for g in groups:
            rng.shuffle(g)
        taken = 0
        while taken < n and any(groups):
            for g in groups:
                while g and (g[-1]["module"], status) in used:
                    g.pop()
                if g and taken < n:
                    s = g.pop()
                    used.add((s["module"], status))
                    out.append(s)
                    taken += 1
    return out


def _timing_cases(episodes: list, n_episodes: int, n_cuda: int, rng: random.Random, gpu: str, rung: str = "") -> list:
    """Episodes with >= 3 ok candidates whose simulated times on `gpu` differ by DISTINCT from each other
    (the eager baseline first; a ranking can only be checked where the model claims an order: candidates
    it times alike, a host-bound call's sweeps, order by the timer's noise), `n_cuda` CUDA (each candidate a
    build of a minute's CPU on the device), the rest Triton; of each impl's, the half whose eager kernels
    take the largest share of the call first (the GPU side of the model checked where it shows), the rest
    drawn at random; with `rung`, only episodes where that rung is among the candidates timed.
    [(episode, [(tag, params, code, sim)])]."""
    from kernelstrain.fields import as_dict
    pool = []
    for e in episodes:
        shape = {x["dim"]: x["value"] for x in e["shape"]}
        seen, cands = set(), [("eager", {}, e["baseline"]["code"])]
        for s in e["steps"]:
            params = as_dict(s["params"])
            key = (s["tag"], tuple(sorted(params.items())))
            if s["status"] == "ok" and s["kind"] != "rebench" and key not in seen and s["code"]:
                seen.add(key)
                cands.append((s["tag"], params, s["code"]))
        levels = []
        for tag, params, code in cands:
            sim = _sim(e["module"], tag, params, e["dtype"], shape, gpu)
            if all(abs(sim["sim_ms"] / other[3]["sim_ms"] - 1.0) >= DISTINCT for other in levels):
                levels.append((tag, params, code, sim))
        if rung and rung not in [tag for tag, _, _, _ in levels[:MAX_CANDIDATES]]:
            continue
        if len(levels) >= 3:
            pool.append((e, levels[:MAX_CANDIDATES]))
    by_impl = defaultdict(list)
    for e, c in pool:
        by_impl[e["impl"]].append((e, c))
    chosen = []
    for impl in sorted(by_impl):
        n = n_cuda if impl == "cuda" else n_episodes - n_cuda
        cases = sorted(by_impl[impl], key=lambda ec: -_gpu_share(ec[1][0][3]))
        heavy, rest = cases[:n // 2], cases[n // 2:]
        rng.shuffle(rest)
        chosen += heavy + rest[:n - len(heavy)]
    return chosen


def _gpu_share(sim: dict) -> float:
    """The share of the eager call its kernels take on the GPU (1: GPU-bound)."""
    return min(1.0, sim["sim_kernels_ms"] / sim["sim_host_ms"])


def _rendered_bugs(index: dict, per_bug: int, stream: int, have: set) -> list:
    """Bugs the episodes' sample lacks (`have`: its (impl, bug) pairs), rendered: for each impl and bug of
    RENDERED it lacks (half_accumulator always) up to `per_bug` rungs where it is offered (the export's
    programs first, then the first `stream` programs of seed 0), the candidate
    with the bug (wrong_result) and without it (ok) at the same parameters -- for half_accumulator at
    the parameters giving one accumulator the most terms; and where precision.py predicts the half
    accumulator passes (the defaults, else the most lanes), that code labelled ok: the model's
    prediction put to the hardware. [(solution entry, code, problem entry or None)]."""
    from kernelstrain.fused.module import fused_module, module_name
    from kernelstrain.tasks import make_task
    out, count = [], defaultdict(int)
    wanted = {(impl, b) for impl in ("cuda", "triton") for b in RENDERED if b == "half_accumulator" or (impl, b) not in have}
    wanted.discard(("cuda", "tf32_dot"))        # a CUDA GEMM multiplies fp32 on FMA (fused/cuda_gemm.py): no TF32 to leave on
    known = {s["module"]: (s["problem_id"], s["task_id"], s["gpu"]) for s in index["solutions"]}
    template = {p["dtype"]: p for p in index["problems"]}
    next_id = max(p["problem_id"] for p in index["problems"]) + 1
    names = sorted(known) + [module_name(0, i, impl) for i in range(stream) for impl in ("cuda", "triton")]
    for name in names:
        if all(count[key] >= per_bug for key in wanted):
            break
        m = fused_module(name)
        problem = None
        if name in known:
            pid, task_id, gpu = known[name]
        elif m.view.dtype in template and m.op not in {fused_module(n).op for n in known}:
            pid, task_id, gpu = next_id, m.view.row["id"], "H200"
            problem = {**template[m.view.dtype], "problem_id": pid, "task_id": task_id, "title": m.title,
                       "file": f"level2/{pid}_fused_{m.view.row['id']}.py", "source": m.view.row["source"]}
        else:
            continue
        task = make_task(m, gpu, m.dtypes[0], m.shapes[0])
        for v in m.variants:
            bug = next((b for b in v.bugs if (m.impl, b) in wanted and count[(m.impl, b)] < per_bug), None)
            if bug is None:
                continue
            params = v.defaults()
            if bug == "half_accumulator":
                params = {p.name: min(p.values) for p in v.params}
            least = {b: (n, x) for b, n, x in v.bug_params}
            if bug in least:
                params[least[bug][0]] = least[bug][1]
            if bug not in v.bugs_for(m.view.dtype, params) or not m.simulate(v, params, task).ok:
                continue
            count[(m.impl, bug)] += 1
            if problem is not None:
                next_id += 1
            entry = {"problem_id": pid, "task_id": task_id, "module": name, "impl": m.impl, "gpu": gpu,
                     "arch": task.gpu.arch, "params": params, "rendered": True, "unsupported": None}
            stem = f"solutions/level2/{pid}_rendered_{v.tag}_{bug}"
            out.append(({**entry, "file": f"{stem}.py", "tag": v.tag, "bug": bug, "status": "wrong_result"},
                        m.render(v, params, task, bug), problem))
            out.append(({**entry, "file": f"{stem}_without.py", "tag": v.tag, "bug": None, "status": "ok"},
                        m.render(v, params, task), None))
            if bug == "half_accumulator":
                for passes in (v.defaults(), {p.name: max(p.values) for p in v.params}):
                    if "half_accumulator" not in v.bugs_for(m.view.dtype, passes) and m.simulate(v, passes, task).ok:
                        out.append(({**entry, "params": passes, "file": f"{stem}_predicted_to_pass.py",
                                     "tag": f"{v.tag}+half_accumulator(predicted to pass)", "bug": bug, "status": "ok"},
                                    m.render(v, passes, task, bug), None))
                        break
            break
    return out


def _rendered_rungs(index: dict, specs: list, first_id: int) -> list:
    """The default ok candidate of each MODULE:RUNG named (a rung the device found wrong before, rendered by
    this code), under a problem of its own (ids from `first_id`) where the export lacks the program. As
    _rendered_bugs' entries."""
    from kernelstrain.fused.module import fused_module
    from kernelstrain.tasks import make_task
    known = {s["module"]: (s["problem_id"], s["task_id"], s["gpu"]) for s in index["solutions"]}
    template = {p["dtype"]: p for p in index["problems"]}
    next_id, out = first_id, []
    for spec in specs:
        name, tag = spec.split(":")
        m = fused_module(name)
        problem = None
        if name in known:
            pid, task_id, gpu = known[name]
        else:
            pid, task_id, gpu = next_id, m.view.row["id"], "H200"
            problem = {**template[m.view.dtype], "problem_id": pid, "task_id": task_id, "title": m.title,
                       "file": f"level2/{pid}_fused_{m.view.row['id']}.py", "source": m.view.row["source"]}
            next_id += 1
        v = m.variant(tag)
        task = make_task(m, gpu, m.dtypes[0], m.shapes[0])
        entry = {"problem_id": pid, "task_id": task_id, "module": name, "impl": m.impl, "gpu": gpu, "arch": task.gpu.arch,
                 "params": v.defaults(), "rendered": True, "unsupported": None, "file": f"solutions/level2/{pid}_rendered_{tag}.py",
                 "tag": tag, "bug": None, "status": "ok"}
        out.append((entry, m.render(v, v.defaults(), task), problem))
    return out


def prepare(args) -> int:
    d = args.dir
    work = Path(args.work)
    reuse = args.reuse and (work / "ds" / "manifest.json").exists()
    subprocess.run(["rm", "-rf", str(d)] + ([str(work / "ex")] if reuse else [str(work)]), check=True)
    d.mkdir(parents=True)
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    if not reuse:
        _run([py, "-m", "kernelstrain", "generate", "--config", "fused", "--seed", str(args.seed), "--episodes",
              str(args.episodes), "--workers", "1", "--quiet", "--out", str(work / "ds")], cwd=ROOT)
    _run([py, "-m", "kernelstrain", "export", "kernelbench", str(work / "ds"), "--out", str(work / "ex"),
          "--status", "ok,wrong_result"], cwd=ROOT)
    kb = d / "KernelBench"
    kb.mkdir()
    subprocess.run(f"git -C {args.kb_git} archive HEAD src LICENSE | tar -x -C {kb}", shell=True, check=True)
    (kb / "COMMIT").write_text(subprocess.run(["git", "-C", args.kb_git, "rev-parse", "HEAD"], capture_output=True,
                                              text=True, check=True).stdout)
    _run([py, "scripts/kb_official_eval.py", str(kb), str(work / "ex"), "--static-only", "--table", str(d / "static.txt")],
         cwd=ROOT, stdout=subprocess.DEVNULL)
    index = json.loads((work / "ex" / "index.json").read_text())
    episodes = [json.loads(line) for f in ("episodes.jsonl", "episodes.validation.jsonl")
                if (work / "ds" / f).exists() for line in (work / "ds" / f).open()]
    bugs = {(e["id"], int(s["step"])): s["bug"] for e in episodes for s in e["steps"]}
    for s in index["solutions"]:
        s["bug"] = bugs.get((s["episode"], s["step"]))
    kinds = {(e["id"], int(s["step"])): s["kind"] for e in episodes for s in e["steps"]}
    rng = random.Random(args.seed)
    picks = _pick_eval(index, args.ok, args.wrong, rng, args.ok_dtype)
    # launch-tuning candidates (the engine's param_sweep steps: a rung at other BLOCK / warps / threads / vec / tiles)
    # of programs the sample lacks, one an impl x rung first
    sweeps = sorted((s for s in index["solutions"] if kinds.get((s["episode"], s["step"])) == "param_sweep"
                     and s["status"] == "ok" and _family(s["module"]) != "embedding"), key=lambda s: s["file"])
    rng.shuffle(sweeps)
    taken, groups = {p["module"] for p in picks}, set()
    for rnd in (0, 1):
        for s in sweeps:
            if sum(p.get("sweep", False) for p in picks) >= args.sweeps:
                break
            if s["module"] in taken or (rnd == 0 and (s["impl"], s["tag"]) in groups):
                continue
            picks.append({**s, "sweep": True})
            taken.add(s["module"])
            groups.add((s["impl"], s["tag"]))
    (work / "picks.txt").write_text("".join(f"ex {s['file']}\n" for s in picks))
    (d / "sweeps.txt").write_text("".join(f"{s['file']} {s['module']} {s['tag']} step {s['step']}\n" for s in picks if s.get("sweep")))
    _run([py, "scripts/kb_official_eval.py", str(kb), str(work / "ex"), "--pick", str(work / "picks.txt"),
          "--write-sample", str(d / "kb")], cwd=ROOT)
    sample = json.loads((d / "kb" / "ex" / "index.json").read_text())
    have = {(s["impl"], s["bug"]) for s in picks if s["status"] == "wrong_result"}
    rendered = _rendered_bugs(index, args.rendered, args.stream, have) if args.rendered else []
    first_id = max([p["problem_id"] for p in index["problems"]] + [e["problem_id"] for e, _, _ in rendered]) + 1
    rendered += _rendered_rungs(index, args.also, first_id)
    # one solution a module and status is evaluated (kb_official_eval.sample): a rendered one replaces the
    # pick; the third of a rung (predicted to pass, also "ok") goes under a module name of its own
    replaced = {(e["module"], e["status"]) for e, _, _ in rendered}
    sample["solutions"] = [s for s in sample["solutions"] if (s["module"], s["status"]) not in replaced]
    known = {p["problem_id"] for p in sample["problems"]}
    for entry, code, problem in rendered:
        if "predicted to pass" in entry["tag"]:
            entry = {**entry, "module": entry["module"] + "+half_accumulator"}
        (d / "kb" / "ex" / entry["file"]).write_text(code)
        sample["solutions"].append(entry)
        if entry["problem_id"] not in known:
            p = problem or next(p for p in index["problems"] if p["problem_id"] == entry["problem_id"])
            text = p.pop("source", None) if problem else (work / "ex" / p["file"]).read_text()
            (d / "kb" / "ex" / p["file"]).write_text(text)
            sample["problems"].append(p)
            known.add(p["problem_id"])
    (d / "kb" / "ex" / "index.json").write_text(json.dumps(sample, indent=1) + "\n")
    problems = {p["task_id"]: p for p in index["problems"]}
    cases = []
    for e, cands in _timing_cases(episodes, args.timing_episodes, args.cuda_episodes, rng, args.gpu, args.timing_rung):
        problem = problems.get(e["task_id"])
        if problem is None:
            continue
        src = work / "ex" / problem["file"]
        edir = d / "timing" / e["id"]
        edir.mkdir(parents=True)
        (edir / "problem.py").write_text(src.read_text())
        shape = {x["dim"]: x["value"] for x in e["shape"]}
        for n, (tag, params, code, sim) in enumerate(cands):
            (edir / f"c{n}.py").write_text(code)
            # the sims on each card the device may be (run() keeps the one it finds)
            cards = {g: _sim(e["module"], tag, params, e["dtype"], shape, g) for g in DEVICE_CARDS}
            cases.append({"episode": e["id"], "module": e["module"], "impl": e["impl"], "dtype": e["dtype"],
                          "gpu_recorded": e["gpu"], "tag": tag, "params": params, "file": f"timing/{e['id']}/c{n}.py",
                          "problem": f"timing/{e['id']}/problem.py", "gpu": args.gpu, **sim, "sims": cards})
    (d / "timing_cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"rendered: " + ", ".join(f"{e['file']} ({e['status']})" for e, _, _ in rendered))
    print(f"prepared {d}: {len(picks)} eval solutions "
          f"({sum(s['status'] == 'ok' for s in picks)} ok), {len(cases)} timing candidates in "
          f"{len({c['episode'] for c in cases})} episodes; {(d / 'static.txt').read_text().splitlines()[0]}")
    return 0


def _module(case: dict):
    from kernelstrain.fused.module import fused_module
    return fused_module(case["module"])


def _variant(case: dict, params: dict, n: int, d: Path) -> dict:
    """A timing case of the same episode and rung at other parameters (the sweep an engineer runs on it):
    its render at `params`, written beside the episode's candidates, with its sims on each card."""
    from kernelstrain.fused.module import fused_module
    from kernelstrain.tasks import make_task
    m = fused_module(case["module"])
    shape = dict(m.shapes[0])
    task = make_task(m, case["gpu"], case["dtype"], shape)
    f = f"{Path(case['file']).parent}/v{n}.py"
    (d / f).write_text(m.variant(case["tag"]).render(params, task))
    cards = {g: _sim(case["module"], case["tag"], params, case["dtype"], shape, g) for g in DEVICE_CARDS}
    return {**case, "params": params, "file": f, "variant": True, **cards[case["gpu"]], "sims": cards}


def extend(args) -> int:
    """Add to a prepared DIR: the CUDA GEMM epilogue of the first --variant-episodes CUDA timing episodes at each
    --cuda-variants tile (BMxBNxBKxTMxTN), so the device times the kernel's step model across tiles and patches; and
    keep at most --eval-cuda CUDA solutions in the eval sample (each a ~60 s build on the device's CPU)."""
    d = args.dir
    cases = json.loads((d / "timing_cases.json").read_text())
    gemms = [c for c in cases if c["impl"] == "cuda" and c["tag"] == "gemm_epilogue" and not c.get("variant")]
    gemms.sort(key=lambda c: -c["sim_kernels_ms"])
    if args.cuda_episodes is not None:      # the CUDA episodes whose GEMM the model makes longest (each case a build)
        keep = {c["episode"] for c in gemms[:args.cuda_episodes]}
        cases = [c for c in cases if c["impl"] != "cuda" or c["episode"] in keep]
    added = []
    for case in gemms[:args.variant_episodes]:
        for n, tile in enumerate(args.cuda_variants):
            bm, bn, bk, tm, tn = map(int, tile.split("x"))
            params = {**case["params"], "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "THREAD_M": tm, "THREAD_N": tn}
            added.append(_variant(case, params, n, d))
    if args.keep:           # only these timing episodes (suffixes of their ids)
        cases = [c for c in cases if any(c["episode"].endswith(k) for k in args.keep)]
    n_of = defaultdict(lambda: 10)      # v10.py ... beside extend's CUDA tiles (v0.py ...)
    for spec in args.variants:          # EPISODE:TAG:k=v,k=v -- the rung re-rendered at other launch parameters
        ep, tag, kv = spec.split(":")
        base = next(c for c in cases if c["episode"].endswith(ep) and c["tag"] == tag and not c.get("variant"))
        params = {**base["params"], **{k: int(v) for k, v in (x.split("=") for x in kv.split(","))}}
        v = _variant(base, params, n_of[base["episode"]], d)
        n_of[base["episode"]] += 1
        # --apart: a sweep the model times alike where the call is host-bound; its kernels' times are the check (the
        # profiler's), so it stays out of the within-episode figure, which counts the orders the model claims (DISTINCT)
        added.append({**v, "probe": "sweep", "episode": "probe-" + base["episode"]} if args.apart else v)
    for spec in args.probes:            # EPISODE:TAG:TEXT|TEXT -- a measurement probe, never a candidate
        ep, tag, drop = spec.split(":", 2)
        base = next(c for c in cases if c["episode"].endswith(ep) and c["tag"] == tag and not c.get("variant"))
        lines = (d / base["file"]).read_text().splitlines(keepends=True)
        f = f"{Path(base['file']).parent}/p{n_of[base['episode']]}.py"
        n_of[base["episode"]] += 1
        (d / f).write_text("".join(x for x in lines if not any(t in x for t in drop.split("|"))))
        added.append({**base, "file": f, "probe": drop, "episode": "probe-" + base["episode"]})
    if args.resim:          # the sims of this checkout's model (a refit since prepare)
        for c in cases:
            cards = {g: _sim(c["module"], c["tag"], c["params"], c["dtype"], dict(_module(c).shapes[0]), g) for g in DEVICE_CARDS}
            c.update(cards[c["gpu"]], sims=cards)
    at = {c["episode"]: i for i, c in enumerate(cases)}       # after each episode's last case
    for v in reversed(added):
        cases.insert(at[v["episode"].removeprefix("probe-")] + 1, v)
    (d / "timing_cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    sample = json.loads((d / "kb" / "ex" / "index.json").read_text())
    cuda = [s for s in sample["solutions"] if s["impl"] == "cuda"]
    keep = {id(s) for s in sorted(cuda, key=lambda s: s.get("tag") != "gemm_epilogue")[:args.eval_cuda]}
    sample["solutions"] = [s for s in sample["solutions"] if s["impl"] != "cuda" or id(s) in keep]
    (d / "kb" / "ex" / "index.json").write_text(json.dumps(sample, indent=1) + "\n")
    print(f"extended {d}: {len(added)} CUDA GEMM variants ({len(cases)} timing candidates in "
          f"{len({c['episode'] for c in cases})} episodes); eval sample {len(sample['solutions'])} solutions "
          f"({sum(s['impl'] == 'cuda' for s in sample['solutions'])} CUDA)")
    return 0


def _device_card() -> str:
    """The device's card among DEVICE_CARDS ("" where none or no GPU)."""
    try:
        import torch
        name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    except ImportError:
        name = ""
    return next((g for g in DEVICE_CARDS if g in name), "")


def _load(path: Path, name: str):
    import types
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


REHEARSE = os.environ.get("FUSED_REHEARSE") == "1"   # no GPU: eager and Triton cases on the CPU (TRITON_INTERPRET=1)
DEVICE = "cpu" if REHEARSE else "cuda"


def _built(d: Path, case: dict):
    """(model, inputs) of one timing case, built as KernelBench builds them (seeded, cast to the problem's
    precision, integer inputs kept: execute.kb_inputs)."""
    import torch

    from kernelstrain.fused.execute import kb_inputs
    dtype = getattr(torch, PRECISION[case["dtype"]])
    prob = _load(d / case["problem"], "problem")
    cand = _load(d / case["file"], "cand")
    torch.manual_seed(42)
    init = kb_inputs(prob.get_init_inputs(), DEVICE, dtype)
    torch.manual_seed(42)
    model = cand.ModelNew(*init).to(DEVICE).to(dtype=dtype)
    torch.manual_seed(7)
    return model, kb_inputs(prob.get_inputs(), DEVICE, dtype)


def _sync():
    import torch
    if not REHEARSE:
        torch.cuda.synchronize()


def build_one(d: str, case: dict) -> str:
    """Build one candidate and call it once in this process: its load_inline extension built, its Triton
    kernels compiled into Triton's on-disk cache, so that the timing pass loads both ready."""
    import torch
    try:
        model, inputs = _built(Path(d), case)
        with torch.no_grad():
            model(*inputs)
        _sync()
        return ""
    except Exception as e:  # noqa: BLE001 - the timing pass reports it again
        return f"{type(e).__name__}: {str(e)[:200]}"


def _batches(model, inputs) -> list:
    """Ms a call in each of BATCHES batches of CALLS back-to-back calls (CUDA events; the CPU's clock when
    rehearsing)."""
    import torch
    times = []
    for _ in range(BATCHES):
        if REHEARSE:
            t0 = time.perf_counter()
            for _ in range(CALLS):
                model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3 / CALLS)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            model(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / CALLS)
    return sorted(times)


def kernel_times(model, inputs, calls: int = PROFILED_CALLS) -> dict:
    """Each kernel's own GPU time a call, by name (torch.profiler / Kineto over `calls` calls): what the
    model's kernels_ms predicts, apart from the host's side of the call. {name: [us a call, launches a call]}."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([] if REHEARSE else [ProfilerActivity.CUDA])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            model(*inputs)
        _sync()
    out = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        us = getattr(e, "self_cuda_time_total", 0) if us is None else us
        if REHEARSE and not us and e.key.startswith("aten::"):
            us = e.self_cpu_time_total          # the rehearsal has no device: the CPU op's own time stands in
        if us > 0:
            out[e.key[:120]] = [round(us / calls, 3), round(e.count / calls, 2)]
    return out


def time_one(model, inputs, profiled: bool = True) -> dict:
    """One case's call time: the median of BATCHES batches (after WARMUP calls and WARMUP_MS of calls, so the
    GPU's clocks have risen), and with `profiled` its kernels' own times (kernel_times)."""
    import torch
    with torch.no_grad():
        for _ in range(WARMUP):
            model(*inputs)
        _sync()
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e3 < WARMUP_MS:
            model(*inputs)
            _sync()
        times = _batches(model, inputs)
        try:
            kernels, failed = (kernel_times(model, inputs) if profiled else {}), ""
        except Exception as e:  # noqa: BLE001 - the profiler's failure must not cost the call's time
            kernels, failed = {}, f"{type(e).__name__}: {str(e)[:200]}"
    row = {"measured_ms": times[len(times) // 2], "spread": times[-1] / times[0], "batches_ms": times}
    if profiled:
        row.update(kernels_us=kernels, gpu_us=round(sum(us for us, _ in kernels.values()), 3), profile_error=failed)
    return row


def time_chunk(d: Path, chunk: list) -> None:
    """Time every case of a chunk twice, the whole chunk in between (a disturbance of one moment -- a clock
    ramp, another process -- shows as two passes that disagree), its kernels profiled in the first; a case's
    row keeps both passes' medians and reports the lesser as measured_ms."""
    built, rows = {}, {}
    for case in chunk:
        try:
            built[case["file"]] = _built(d, case)
        except Exception as e:  # noqa: BLE001 - the case's own failure is its row
            rows[case["file"]] = {**case, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    for n in range(PASSES):
        for case in chunk:
            if case["file"] not in built:
                continue
            try:
                got = time_one(*built[case["file"]], profiled=n == 0)
            except Exception as e:  # noqa: BLE001
                rows.setdefault(case["file"], {**case, "error": f"{type(e).__name__}: {str(e)[:300]}"})
                continue
            row = rows.setdefault(case["file"], {**case, "passes_ms": []})
            row["passes_ms"].append(got.pop("measured_ms"))
            row.update({k: v for k, v in got.items() if n == 0 or k not in row})
            row["measured_ms"] = min(row["passes_ms"])
            print(json.dumps(row), flush=True)      # each pass's row as it comes (the parent keeps a file's last)
    for case in chunk:
        row = rows.get(case["file"], {**case, "error": "not built"})
        if "error" in row:
            print(json.dumps(row), flush=True)


def run(args) -> int:
    d, out = args.dir.resolve(), args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    cases = json.loads((d / "timing_cases.json").read_text())
    if REHEARSE:        # no nvcc build without CUDA, the Triton interpreter slow: the eager calls, and the 2 lightest Triton episodes
        light = sorted({c["episode"] for c in cases if c["impl"] == "triton"},
                       key=lambda e: max(c["sim_kernels_ms"] for c in cases if c["episode"] == e))[:2]
        cases = [c for c in cases if c["tag"] == "eager" or c["episode"] in light]
    # every solution of the sample (kb_official_eval alone would take FUSED_PICKS of each impl and status)
    sample = json.loads((d / "kb" / "ex" / "index.json").read_text())
    (out / "picks.txt").write_text("".join(f"ex {s['file']}\n" for s in sample["solutions"]))
    kb_eval = subprocess.Popen(
        [sys.executable, "scripts/kb_official_eval.py", str(d / "KernelBench"), str(d / "kb" / "ex"), "--pick",
         str(out / "picks.txt"), "--trials", "5", "--jobs", str(max(1, args.jobs // 2)), "--timeout", "150",
         "--deadline", str(int(args.budget - args.probe_s)),
         "--out", str(out / "kb_rows.jsonl"), "--table", str(out / "kb_table.txt")] + (["--dry"] if REHEARSE else []),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(out / "kb_stderr.txt").open("w"))
    os.environ.setdefault("MAX_JOBS", "2")
    probe = subprocess.Popen([sys.executable, "scripts/fused_host_probe.py", "build"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if args.probe_s > 0 else None
    # CUDA builds first (the longest), then Triton compiles
    order = sorted((c for c in cases if c["tag"] != "eager"), key=lambda c: c["impl"] != "cuda")
    with concurrent.futures.ProcessPoolExecutor(max(1, args.jobs - args.jobs // 2)) as pool:
        built = [] if REHEARSE else list(pool.map(build_one, [str(d)] * len(order), order))
    print(f"built and ran once {len(built)} candidates ({sum(bool(b) for b in built)} failed) in {time.time() - t0:.0f} s",
          flush=True)
    kb_eval.wait()
    print(f"eval done in {time.time() - t0:.0f} s", flush=True)
    rows = []
    episodes = defaultdict(list)
    for case in cases:
        episodes[case["episode"]].append(case)
    groups = sorted(episodes.values(), key=lambda g: g[0]["impl"] != "cuda")     # the CUDA GEMMs first
    with (out / "timing.jsonl").open("w") as f:
        # CHUNK episodes a process, their candidates one after the other, alone on the GPU
        for i in range(0, len(groups), CHUNK):
            if time.time() - t0 > args.budget - args.trivial_s - args.probe_s:
                break
            chunk = [c for g in groups[i:i + CHUNK] for c in g]
            try:
                r = subprocess.run([sys.executable, __file__, "episode", str(d), json.dumps(chunk)], capture_output=True,
                                   text=True, cwd=ROOT, timeout=max(10.0, args.budget - (time.time() - t0)))
                stdout, stderr = r.stdout, r.stderr
            except subprocess.TimeoutExpired as e:
                out_ = e.stdout or ""
                stdout, stderr = out_.decode() if isinstance(out_, bytes) else out_, "timed out at the budget"
            got = {}
            for line in stdout.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    got[row["file"]] = row
            for case in chunk:
                row = got.get(case["file"], {**case, "error": stderr[-500:] or "not timed"})
                rows.append(row)
                f.write(json.dumps(row) + "\n")
    # each kind of host call alone (fused_host_probe.py: timing.py's HOST_* constants), the CPU idle
    probe_error = "not asked (--probe-s 0)"
    if probe is not None:
        probe.wait()
        try:
            r = subprocess.run([sys.executable, "scripts/fused_host_probe.py", "--out", str(out / "host.json")], cwd=ROOT,
                               capture_output=True, text=True, timeout=args.probe_s + 30)
            probe_error = r.stderr[-400:] if r.returncode else ""
        except subprocess.TimeoutExpired:
            probe_error = "timed out"
    # the rest of the budget (--trivial-s): zeros / constant kernels against the profile's tasks' real outputs
    left = args.budget - (time.time() - t0) - 10.0
    # (the profile's first TRIVIAL_PROGRAMS tasks: planning all 6,000 takes the parts ~50 s before the first runs)
    trivial = [sys.executable, "scripts/fused_trivial.py", "--all-tasks", "--programs", str(TRIVIAL_PROGRAMS),
               "--device", "cuda", "--budget", f"{left:.0f}"]
    parts = [] if args.trivial_s <= 0 or left < 10 else [
        subprocess.Popen(trivial + ["--part", f"{i}/{TRIVIAL_PARTS}"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True) for i in range(1, TRIVIAL_PARTS + 1)]
    texts = []
    for p in parts:
        try:
            texts.append(p.communicate(timeout=max(1.0, args.budget - (time.time() - t0)) + 15)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            texts.append(f"part killed at the budget: {p.communicate()[0][-500:]}\n")
    if parts:
        (out / "trivial.txt").write_text("".join(texts))
    card = _device_card()
    for row in rows:
        if card in row.get("sims", {}):
            row.update(row.pop("sims")[card], gpu=card)
    host = out / "host.json"
    probe_line = f"host probe (us a call): {json.loads(host.read_text())['us']}" if host.exists() else \
        f"host probe failed: {probe_error}"
    (out / "summary.txt").write_text(summary(rows, out / "kb_table.txt") + "\n" + probe_line + "\n")
    print((out / "summary.txt").read_text())
    return 0


def summary(rows: list, kb_table: Path) -> str:
    sys.path.insert(0, str(ROOT))
    from kernelstrain.calibration.metrics import agreement
    timed = [r for r in rows if "measured_ms" in r and not r.get("probe")]      # probes: measurements, not candidates
    fig = agreement(timed, group="episode") if timed else {}
    lines = [f"timing: {len(timed)} of {len(rows)} candidates timed, {fig.get('groups', 0)} episodes with >= 3: "
             f"within-episode Spearman mean {fig.get('spearman_mean')}, median {fig.get('spearman_median')}, "
             f"<= 0 in {fig.get('groups_nonpositive')}; pair-order {fig.get('pair_agreement')}; "
             f"sim/measured geomean {fig.get('geomean')}"]
    for side, pick in (("GPU-bound", True), ("host-bound", False)):
        part = [r for r in timed if (r.get("sim_kernels_ms", 0) > r.get("sim_host_ms", 0)) == pick]
        if part:
            ratio = math.exp(sum(math.log(r["sim_ms"] / r["measured_ms"]) for r in part) / len(part))
            lines.append(f"  {side} in the model: {len(part)} candidates, sim/measured geomean {ratio:.3f}")
    by_ep = defaultdict(list)
    for r in timed:
        by_ep[r["episode"]].append(r)
    from kernelstrain.calibration.metrics import spearman
    for ep, rs in sorted(by_ep.items()):
        lines.append(f"  {ep} {rs[0]['impl']:6s} n={len(rs)} rho={spearman([r['sim_ms'] for r in rs], [r['measured_ms'] for r in rs]):.2f} "
                     + " ".join(f"{r['tag']}:{r['sim_ms']:.4f}/{r['measured_ms']:.4f}" for r in rs))
    # the GPU side alone: each candidate's kernels under the profiler against the model's kernels_ms
    side = [r for r in timed if r.get("gpu_us")]
    if side:
        ratio = math.exp(sum(math.log(r["sim_kernels_ms"] * 1e3 / r["gpu_us"]) for r in side) / len(side))
        kfig = agreement([{**r, "sim_ms": r["sim_kernels_ms"], "measured_ms": r["gpu_us"] * 1e-3} for r in side], group="episode")
        lines.append(f"  kernels alone (profiler): {len(side)} candidates, model/measured geomean {ratio:.3f}, "
                     f"within-episode Spearman {kfig.get('spearman_mean')}")
        for r in side:
            lines.append(f"    {r['episode']} {r['tag']}: kernels {r['sim_kernels_ms'] * 1e3:.1f} us model / {r['gpu_us']:.1f} "
                         f"measured; call {r['sim_ms'] * 1e3:.1f} / {r['measured_ms'] * 1e3:.1f} (passes "
                         f"{r.get('passes_ms')}) host model {r['sim_host_ms'] * 1e3:.1f}")
    for r in rows:
        if "error" in r:
            lines.append(f"  error {r['episode']} {r['tag']}: {r['error'][-300:]}")
    if kb_table.exists():
        lines += ["", "KernelBench eval_kernel_against_ref:", kb_table.read_text()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["episode"]:
        time_chunk(Path(argv[1]), json.loads(argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--episodes", type=int, default=160)
    p.add_argument("--dir", type=Path, default=ROOT / "data" / "fused_proof")
    p.add_argument("--work", default="/tmp/fused/proof_work")
    p.add_argument("--kb-git", default=KB_GIT)
    p.add_argument("--reuse", action="store_true", help="keep a finished run of WORK/ds (same seed and episodes)")
    p.add_argument("--ok", type=int, default=18, help="ok solutions evaluated, round robin over impl x rung")
    p.add_argument("--wrong", type=int, default=14, help="wrong_result ones, round robin over impl x bug")
    p.add_argument("--timing-episodes", type=int, default=42)
    p.add_argument("--cuda-episodes", type=int, default=16, help="of them CUDA (the rest Triton)")
    p.add_argument("--gpu", default="H100", help="the device's GPU: the timing cases' simulated times are on it")
    p.add_argument("--rendered", type=int, default=1, help="rungs a bug the sample lacks is rendered on, per impl")
    p.add_argument("--stream", type=int, default=1500, help="programs of seed 0 searched for them after the export's "
                   "(no_max_subtraction: the first offered is program 1,481)")
    p.add_argument("--ok-dtype", default="any", choices=("any", "bf16", "fp32"), help="ok solutions of these programs only")
    p.add_argument("--also", nargs="*", default=[], metavar="MODULE:RUNG", help="rungs rendered at their defaults (ok) "
                   "into the sample: those the device found wrong before")
    p.add_argument("--sweeps", type=int, default=0, help="ok launch-tuning (param_sweep) candidates added to the eval")
    p.add_argument("--timing-rung", default="", help="timing episodes where this rung is among the candidates only")
    x = sub.add_parser("extend")
    x.add_argument("--dir", type=Path, default=ROOT / "data" / "fused_proof")
    x.add_argument("--cuda-variants", nargs="*", default=["64x64x16x8x8", "64x64x16x2x2", "128x32x32x8x2"])
    x.add_argument("--variant-episodes", type=int, default=2)
    x.add_argument("--eval-cuda", type=int, default=1)
    x.add_argument("--cuda-episodes", type=int, help="keep this many CUDA timing episodes (default: all)")
    x.add_argument("--resim", action="store_true", help="every case's sims again, on this checkout's model")
    x.add_argument("--keep", nargs="*", default=[], metavar="EPISODE", help="keep only these timing episodes (id suffixes)")
    x.add_argument("--variants", nargs="*", default=[], metavar="EPISODE:TAG:K=V,K=V",
                   help="the episode's candidate of that rung re-rendered with these parameters (a launch-tuning sweep)")
    x.add_argument("--apart", action="store_true", help="--variants timed as probes (left out of the figures)")
    x.add_argument("--probes", nargs="*", default=[], metavar="EPISODE:TAG:TEXT|TEXT", help="a copy of the episode's "
                   "candidate without the lines holding TEXT, timed as a probe (episode probe-EPISODE; no label, no figure)")
    r = sub.add_parser("run")
    r.add_argument("--dir", type=Path, default=ROOT / "data" / "fused_proof")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--jobs", type=int, default=14)
    r.add_argument("--budget", type=float, default=330.0, help="seconds: no timing chunk starts past budget - "
                   "trivial-s - probe-s, the zeros / constant check ends by it")
    r.add_argument("--trivial-s", type=float, default=0.0, help="seconds kept for scripts/fused_trivial.py on the GPU")
    r.add_argument("--probe-s", type=float, default=PROBE_S, help="seconds kept for fused_host_probe.py's measurement "
                   "(0: no probe, its build left out too)")
    args = ap.parse_args(argv)
    return {"prepare": prepare, "extend": extend, "run": run}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
