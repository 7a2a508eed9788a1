"""The device check of the fused `cuda_graph` rung (fused/graphs.py): is a graphed ModelNew correct, as
KernelBench checks it (one model, several seeded trials of new inputs), and what do its calls cost
against the plan it replays and the eager program, beside the simulator's times.

    python3 scripts/fused_graph_check.py prepare --dir DIR [--seed 0] [--start 0] [--cuda 4] [--triton 6]
        here, no GPU: the first programs of the grammar's stream (seed --seed) that are fused tasks on the
        H100 (tasks.usable, not degenerate) and whose graph rung issues less than their leanest plan, in
        CUDA and Triton; for each the problem and three solutions at the rungs' defaults: eager, the graph's
        base rung, cuda_graph; cases.json with each one's simulated call on the H100 and the H200.
    python3 scripts/fused_graph_check.py run --dir DIR --out OUT [--jobs 14] [--budget 80]
        on the GPU: every solution built once in parallel (load_inline, Triton's compile; build_one of
        fused_device_check.py), then each program alone: the reference and its candidates built as
        KernelBench builds them (seeded, cast to the problem's precision), TRIALS trials of fresh seeded
        inputs through the same instances (torch.allclose at KernelBench's tolerance; the graph's output
        also compared to its base's, which runs the same kernels), then each candidate's call timed as
        fused_device_check.time_one times it (median of 7 batches of 20 back-to-back calls, its kernels
        profiled: the graph's); and the host's cost of a replay and of a copy_ alone (fused_host_probe.per_call_us).
        OUT: rows.jsonl, host_graph.json, summary.txt. FUSED_REHEARSE=1 TRITON_INTERPRET=1 rehearses it
        on a CPU (the graph's `run`, not its capture: a CPU has no CUDA graphs).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
CARDS = ("H100", "H200")
TRIALS = 5
CHUNK = 4             # programs a timing process
TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2}      # KernelBench's atol = rtol by precision (execute.KB_TOLERANCE)


def _sim(m, tag: str, task) -> dict:
    v = m.variant(tag)
    return {"sim_ms": m.simulate(v, v.defaults(), task).time_ms, "sim_host_ms": m.host_us(tag) * 1e-3,
            "sim_kernels_ms": sum(m.kernels_ms(tag, v.defaults(), task))}


def prepare(args) -> int:
    from kernelstrain.fused.degenerate import reason
    from kernelstrain.fused.module import GRAPHED, fused_module, module_name
    from kernelstrain.fused.tasks import usable
    from kernelstrain.tasks import make_task
    d = args.dir
    d.mkdir(parents=True, exist_ok=True)
    want, cases, seen = {"cuda": args.cuda, "triton": args.triton}, [], set()
    index = args.start
    while any(want.values()) and index < args.start + 2000:
        impl = "cuda" if want["cuda"] and (index % 2 == 0 or not want["triton"]) else "triton"
        m = fused_module(module_name(args.seed, index, impl))
        index += 1
        ops = tuple(m.view.ops)
        if ops in seen or reason(m.view.steps, m.view.dtype) is not None:
            continue
        tasks = {g: make_task(m, g, m.dtypes[0], m.shapes[0]) for g in CARDS}
        tags = [v.tag for v in m.variants]
        if not usable(m, tasks["H100"]) or "cuda_graph" not in tags:
            continue
        # the GEMM-epilogue plan's graph where the program has one (its own GEMM kernel captured), else the leanest plan's
        graph = "cuda_graph_gemm" if "cuda_graph_gemm" in tags and want[impl] % 2 else "cuda_graph"
        base = m._kernel_tag(graph)
        if m.host_us(graph) >= min(m.host_us(t) for t in tags if t not in GRAPHED):
            continue          # no engineer captures a call that already issues less than a replay
        seen.add(ops)
        want[impl] -= 1
        prog = f"{m.op}_{impl}"
        (d / f"{prog}_problem.py").write_text(m.view.row["source"])
        for tag in ("eager", base, graph):
            v = m.variant(tag)
            f = f"{prog}_{tag}.py"
            (d / f).write_text(v.source(v.defaults(), tasks["H100"]))
            cases.append({"program": prog, "impl": impl, "tag": tag,
                          "role": "graph" if tag in GRAPHED else ("base" if tag == base else "eager"),
                          "dtype": m.view.dtype, "ops": list(ops), "problem": f"{prog}_problem.py", "file": f,
                          "sims": {g: _sim(m, tag, t) for g, t in tasks.items()}})
    (d / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{len(cases)} cases of {len(cases) // 3} programs in {d} (stream indices up to {index - 1})")
    return 0


def _trials(d: Path, group: list) -> dict:
    """Each candidate of one program checked against the reference over TRIALS seeded inputs, through the
    same instances (a graph replays on its static inputs: each call must copy its new inputs in)."""
    import torch
    from fused_device_check import DEVICE, PRECISION, REHEARSE, _load
    from kernelstrain.fused.execute import kb_inputs
    case0 = group[0]
    dtype = getattr(torch, PRECISION[case0["dtype"]])
    prob = _load(d / case0["problem"], "problem")
    torch.manual_seed(42)
    ref = prob.Model(*kb_inputs(prob.get_init_inputs(), DEVICE, dtype)).to(DEVICE).to(dtype=dtype)
    models = {}
    for c in group:
        cand = _load(d / c["file"], c["tag"])
        torch.manual_seed(42)
        models[c["file"]] = cand.ModelNew(*kb_inputs(prob.get_init_inputs(), DEVICE, dtype)).to(DEVICE).to(dtype=dtype)
    tol = TOLERANCE[case0["dtype"]]
    out = {c["file"]: {"trials_ok": 0, "max_diff": 0.0, "same_as_base": None} for c in group}
    with torch.no_grad():
        for trial in range(TRIALS):
            torch.manual_seed(1000 + trial)
            inputs = kb_inputs(prob.get_inputs(), DEVICE, dtype)
            want = ref(*inputs)
            got = {}
            for c in group:
                model = models[c["file"]]
                y = model.run(*inputs) if REHEARSE and c["role"] == "graph" else model(*inputs)
                got[c["role"]] = y.clone()
                row = out[c["file"]]
                row["max_diff"] = max(row["max_diff"], float((y.float() - want.float()).abs().max()))
                row["trials_ok"] += bool(torch.allclose(y, want, atol=tol, rtol=tol))
            if "graph" in got and "base" in got:
                same = bool(torch.equal(got["graph"], got["base"]))
                for c in group:
                    if c["role"] == "graph":
                        prev = out[c["file"]]["same_as_base"]
                        out[c["file"]]["same_as_base"] = same if prev is None else prev and same
    return out, models


def episode(d: Path, group: list) -> None:
    """One program's cases in this process: the trials, then each call timed; a JSON row a case."""
    import torch
    from fused_device_check import time_one
    from kernelstrain.fused.execute import kb_inputs
    try:
        checks, models = _trials(d, group)
    except Exception as e:  # noqa: BLE001 - the program's failure is its rows
        for c in group:
            print(json.dumps({**c, "error": f"trials: {type(e).__name__}: {str(e)[:300]}"}), flush=True)
        return
    from fused_device_check import DEVICE, PRECISION, _load
    prob = _load(d / group[0]["problem"], "problem")
    dtype = getattr(torch, PRECISION[group[0]["dtype"]])
    torch.manual_seed(7)
    inputs = kb_inputs(prob.get_inputs(), DEVICE, dtype)
    for c in group:
        row = {**c, **checks[c["file"]]}
        try:
            row.update(time_one(models[c["file"]], inputs, profiled=c["role"] == "graph"))
        except Exception as e:  # noqa: BLE001
            row["error"] = f"timing: {type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(row), flush=True)


def host_graph() -> dict:
    """The host's cost of a replay (a one-kernel graph) and of a copy_ into a static input, each alone."""
    import torch
    from fused_host_probe import per_call_us
    x, y = torch.randn(8, device="cuda"), torch.randn(8, device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.relu(x)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        z = torch.relu(y)
    loop = per_call_us(lambda: None)
    raw = {"replay": per_call_us(g.replay), "copy_": per_call_us(lambda: y.copy_(x)),
           "op": per_call_us(lambda: torch.relu(x))}
    del z
    return {"us": {k: round(v - loop, 2) for k, v in raw.items()}, "loop_us": round(loop, 2),
            "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def run(args) -> int:
    from fused_device_check import REHEARSE, _device_card, build_one
    d, out = args.dir.resolve(), args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    cases = json.loads((d / "cases.json").read_text())
    if REHEARSE:          # no nvcc build nor CUDA graph without a GPU: the Triton programs through the interpreter
        cases = [c for c in cases if c["impl"] == "triton"][:6]
    order = sorted((c for c in cases if c["tag"] != "eager"), key=lambda c: c["impl"] != "cuda")
    os.environ.setdefault("MAX_JOBS", "2")
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        built = [] if REHEARSE else list(pool.map(build_one, [str(d)] * len(order), order))
    failed = {c["file"]: b for c, b in zip(order, built) if b}
    print(f"built {len(built)} candidates ({len(failed)} failed) in {time.time() - t0:.0f} s", flush=True)
    groups = {}
    for c in cases:
        groups.setdefault(c["program"], []).append(c)
    card = _device_card()
    rows = []
    with (out / "rows.jsonl").open("w") as f:
        programs = list(groups.values())
        for i in range(0, len(programs), CHUNK):        # CHUNK programs a process (imports cost ~5 s a process)
            if time.time() - t0 > args.budget:
                break
            chunk = programs[i:i + CHUNK]
            group = [c for g in chunk for c in g]
            try:
                r = subprocess.run([sys.executable, __file__, "episode", "--dir", str(d), "--group", json.dumps(chunk)],
                                   capture_output=True, text=True, cwd=ROOT, timeout=max(10.0, args.budget + 20 - (time.time() - t0)))
                stdout, stderr = r.stdout, r.stderr
            except subprocess.TimeoutExpired:
                stdout, stderr = "", "timed out"
            got = {json.loads(x)["file"]: json.loads(x) for x in stdout.splitlines() if x.startswith("{")}
            for c in group:
                row = got.get(c["file"], {**c, "error": stderr[-500:] or "no row"})
                if c["file"] in failed:
                    row["build_error"] = failed[c["file"]]
                sims = row.pop("sims", {})
                if card in sims:
                    row.update(sims[card], gpu=card)
                rows.append(row)
                f.write(json.dumps(row) + "\n")
    host = {}
    if not REHEARSE:
        try:
            host = host_graph()
        except Exception as e:  # noqa: BLE001
            host = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    (out / "host_graph.json").write_text(json.dumps(host, indent=1) + "\n")
    text = summary(rows) + f"\nhost (us a call, the loop's cost subtracted): {host.get('us', host)}\n" \
        f"elapsed {time.time() - t0:.0f} s\n"
    (out / "summary.txt").write_text(text)
    print(text)
    return 0


def summary(rows: list) -> str:
    lines = [f"{'program':34} {'tag':18} {'ok':>5} {'same':>5} {'meas us':>8} {'sim us':>8} {'host':>6} {'kern':>6}  error"]
    for r in rows:
        lines.append(f"{r['program']:34} {r['tag']:18} {r.get('trials_ok', '-')!s:>5} {r.get('same_as_base', '-')!s:>5} "
                     f"{r.get('measured_ms', float('nan')) * 1e3:8.1f} {r.get('sim_ms', float('nan')) * 1e3:8.1f} "
                     f"{r.get('sim_host_ms', float('nan')) * 1e3:6.1f} {r.get('sim_kernels_ms', float('nan')) * 1e3:6.1f}  "
                     f"{(r.get('error') or r.get('build_error') or '')[:80]}")
    graphs = [r for r in rows if r["role"] == "graph" and "trials_ok" in r]
    correct = sum(r["trials_ok"] == TRIALS for r in graphs)
    lines.append(f"graph candidates correct on all {TRIALS} trials: {correct} of {len(graphs)} "
                 f"(bitwise equal to their base: {sum(bool(r.get('same_as_base')) for r in graphs)})")
    by = {}
    for r in rows:
        if "measured_ms" in r:
            by.setdefault(r["program"], {})[r["role"]] = r
    ratios = [(p, g["graph"]["measured_ms"] / g["base"]["measured_ms"], g["graph"]["sim_ms"] / g["base"]["sim_ms"])
              for p, g in by.items() if "graph" in g and "base" in g and "sim_ms" in g["graph"]]
    lines += [f"  {p}: graph / base measured {a:.3f}, simulated {b:.3f}" for p, a, b in ratios]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=("prepare", "run", "episode"))
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="the stream index to start from")
    ap.add_argument("--cuda", type=int, default=4)
    ap.add_argument("--triton", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=14)
    ap.add_argument("--budget", type=float, default=80.0)
    ap.add_argument("--group", default="")
    args = ap.parse_args(argv)
    if args.cmd == "prepare":
        return prepare(args)
    if args.cmd == "episode":
        for group in json.loads(args.group):
            episode(args.dir, group)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
