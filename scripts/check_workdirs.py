"""Run every workspace under ROOT (`kernelstrain workdir` outputs) through its own scripts:
build.py, verify.py --json, profile.py --json, in parallel, timing under a lock file so one
workspace is timed at a time. Prints one line per workspace and a summary.

    python3 scripts/check_workdirs.py ROOT [--jobs 8] [--gpu-slots 4] [--budget 300] [--out workdirs.jsonl] [--dry]

--dry (no GPU): build.py --dry (the compilers, no link) and ModelNew's calls on the meta device.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def last_json(text: str):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def dry_model_new(wd: Path, task: dict) -> str | None:
    """--dry: ModelNew's calls against a stand-in of the kernel (kernelstrain.workdir.dry)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    from kernelstrain.workdir.dry import dry_call
    from kernelstrain.workdir.subject import Candidate, Subject
    if task["kind"] != "single":
        return None
    m = REGISTRY[task["module"]]
    s = Subject(task_id=task["task_id"], kind="single", split=task["split"], reference=(wd / "model.py").read_text(),
                dtype=task["dtype"], title=task["title"], desc="", module=m,
                task=make_task(m, task["gpu"], task["dtype"], task["shape"]), gpu=task["gpu"], arch=task["arch"],
                candidate=Candidate((wd / task["kernel"]).read_text(), "dry", "ok", None))
    return dry_call(s, (wd / "model_new.py").read_text())


def check(wd: Path, timeout: float, dry: bool = False, compile_too: bool = True) -> dict:
    task = json.loads((wd / "task.json").read_text())
    flag = os.environ.get("KS_WAIT_FOR")        # see kb_eval.wait_for_pch
    while task["impl"] == "cuda" and flag and not os.path.exists(flag):
        time.sleep(1)
    row = {"workdir": wd.name, "kind": task["kind"], "module": task["module"], "impl": task["impl"],
           "candidate": task["candidate"]["label"], "status": task["candidate"]["status"]}
    if dry:         # no GPU: the build up to the compilers, and ModelNew's Python path
        row["dry"] = dry_model_new(wd, task)
    steps = (("build", ["build.py", "--dry"]),) if dry else (
        ("build", ["build.py"]), ("verify", ["verify.py", "--json"]),
        ("profile", ["profile.py", "--json"] + ([] if compile_too else ["--modes", "eager,custom"])))
    for step, cmd in steps:
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, *cmd], cwd=wd, capture_output=True, text=True, timeout=timeout)
            out = last_json(p.stdout) if step != "build" else None
            row[step] = {"rc": p.returncode, "s": round(time.time() - t0, 1)}
            if p.returncode and step != "verify" or (step == "verify" and not out):
                row[step]["tail"] = (p.stdout + p.stderr)[-1200:]
            if step == "verify" and out:
                row[step].update(ok=out["ok"], error=out.get("error"),
                                 worst_rel_l2=max((o.get("rel_l2_err") or 0) for t in out["trials"] for o in t["outputs"])
                                 if out["trials"] else None)
            if step == "profile" and out:
                row[step].update({k: v for k, v in out.items() if k.startswith("speedup")},
                                 modes={m: r.get("median_ms", r.get("error")) for m, r in out["modes"].items()})
        except subprocess.TimeoutExpired:
            row[step] = {"rc": None, "error": f"timeout after {timeout} s"}
        if row[step]["rc"] != 0:
            break
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no workspace starts")
    ap.add_argument("--timeout", type=float, default=240.0, help="per script")
    ap.add_argument("--gpu-slots", type=int, default=4, help="processes holding GPU memory at once")
    ap.add_argument("--dry", action="store_true", help="no GPU: build.py --dry and ModelNew's calls only")
    ap.add_argument("--compile-count", type=int, default=10 ** 6,
                    help="profile torch.compile too for the first N workspaces only (its compile is CPU work "
                    "inside a GPU slot)")
    ap.add_argument("--build-delay", type=int, default=6,
                    help="with KS_WAIT_FOR: CUDA workspaces start this many places later")
    ap.add_argument("--out", default="workdirs.jsonl")
    a = ap.parse_args()
    os.environ.setdefault("KS_GPU_LOCK", os.path.join(tempfile.gettempdir(), "ks_gpu.lock"))
    os.environ.setdefault("KS_GPU_SLOTS", str(a.gpu_slots))
    wds = sorted(p.parent for p in Path(a.root).glob("*/task.json"))
    if os.environ.get("KS_WAIT_FOR"):      # CUDA ones a few places later (see kb_eval.delay_builds)
        late = {wd: a.build_delay * (json.loads((wd / "task.json").read_text())["impl"] == "cuda") for wd in wds}
        wds = [wd for _, wd in sorted(((i + late[wd], i), wd) for i, wd in enumerate(wds))]
    first = {wd: i < a.compile_count for i, wd in enumerate(wds)}
    deadline = time.time() + a.budget
    rows = []

    def job(wd):
        return {"workdir": wd.name, "skipped": "budget spent"} if time.time() > deadline else \
            check(wd, a.timeout, a.dry, first[wd])
    with open(a.out, "w") as fh, concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        # each row written as it completes (a run killed from outside keeps every finished workspace)
        for future in concurrent.futures.as_completed([pool.submit(job, wd) for wd in wds]):
            row = future.result()
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(json.dumps(row)[:400], flush=True)
    ran = [r for r in rows if "skipped" not in r]
    if a.dry:
        bad = [r for r in ran if r.get("dry") or r["build"]["rc"] != 0]
        print(f"dry run: {len(ran)} workdirs, {len(bad)} with a problem")
        return 1 if bad else 0
    for kind in sorted({r["kind"] for r in ran}):
        rs = [r for r in ran if r["kind"] == kind]
        ok = {s: sum(r.get(s, {}).get("rc") == 0 and (s != "verify" or r[s].get("ok")) for r in rs)
              for s in ("build", "verify", "profile")}
        print(f"{kind}: {len(rs)} workdirs: built {ok['build']}, verified {ok['verify']}, profiled {ok['profile']}")
    print(f"{len(rows) - len(ran)} not run (budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
