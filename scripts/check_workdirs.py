"""Run every workspace under ROOT (`kernelstrain workdir` outputs) through its own scripts:
build.py, verify.py --json, profile.py --json, in parallel, timing under a lock file so one
workspace is timed at a time. Prints one line per workspace and a summary.

    python3 scripts/check_workdirs.py ROOT [--jobs 8] [--budget 300] [--out workdirs.jsonl]
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


def check(wd: Path, timeout: float) -> dict:
    task = json.loads((wd / "task.json").read_text())
    row = {"workdir": wd.name, "kind": task["kind"], "module": task["module"], "impl": task["impl"],
           "candidate": task["candidate"]["label"], "status": task["candidate"]["status"]}
    for step, cmd in (("build", ["build.py"]), ("verify", ["verify.py", "--json"]),
                      ("profile", ["profile.py", "--json"])):
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
    ap.add_argument("--out", default="workdirs.jsonl")
    a = ap.parse_args()
    os.environ.setdefault("KS_GPU_LOCK", os.path.join(tempfile.gettempdir(), "ks_gpu.lock"))
    wds = sorted(p.parent for p in Path(a.root).glob("*/task.json"))
    deadline = time.time() + a.budget
    rows = []

    def job(wd):
        return {"workdir": wd.name, "skipped": "budget spent"} if time.time() > deadline else check(wd, a.timeout)
    with open(a.out, "w") as fh, concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for row in pool.map(job, wds):
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(json.dumps(row)[:400], flush=True)
    ran = [r for r in rows if "skipped" not in r]
    for kind in sorted({r["kind"] for r in ran}):
        rs = [r for r in ran if r["kind"] == kind]
        ok = {s: sum(r.get(s, {}).get("rc") == 0 and (s != "verify" or r[s].get("ok")) for r in rs)
              for s in ("build", "verify", "profile")}
        print(f"{kind}: {len(rs)} workdirs: built {ok['build']}, verified {ok['verify']}, profiled {ok['profile']}")
    print(f"{len(rows) - len(ran)} not run (budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
