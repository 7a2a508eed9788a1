"""sha256 of every file generate writes, for a change that must leave output bytes alone.

    python scripts/output_digests.py record  DIGESTS.json [--runs kernelstrain:300 kernelinfer:100 fused:60]
    python scripts/output_digests.py compare DIGESTS.json

`record` runs `generate --seed 0 --workers 1` for each PROFILE:EPISODES (the held-out
solutions' store off, so each run searches its own) and writes {run: {file: sha256}};
`compare` runs the same commands again and exits 1 naming every file whose bytes differ, or
that one run wrote and the other did not. Run `record` on the tree before the change and
`compare` on the tree after it (the runs are the ones the file names, in a temporary folder).
A `--workers` list runs each with those worker counts too (every count must give the same bytes).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("kernelstrain:300", "kernelinfer:100", "fused:60")


def digests(out: Path) -> dict:
    """{relative path: sha256} of every file under `out`, read in chunks."""
    found = {}
    for p in sorted(q for q in out.rglob("*") if q.is_file()):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        found[p.relative_to(out).as_posix()] = h.hexdigest()
    return found


def generate(run: str, workers: int, tmp: Path) -> dict:
    config, episodes = run.split(":")
    out = tmp / f"{config}-{episodes}-w{workers}"
    env = {**os.environ, "KERNELSTRAIN_SOLUTIONS": "off"}
    r = subprocess.run([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--config", config,
                        "--episodes", episodes, "--workers", str(workers), "--out", str(out), "--quiet"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode not in (0, 1):        # 1: the sample's own qa failed; its bytes still count
        sys.exit(f"output_digests: generate {run} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    found = digests(out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("record", "compare"))
    ap.add_argument("file", type=Path)
    ap.add_argument("--runs", nargs="+", default=None, help="PROFILE:EPISODES (record; compare reads the file's)")
    ap.add_argument("--workers", nargs="+", type=int, default=[1])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="digests-") as tmp:
        if a.action == "record":
            found = {run: generate(run, 1, Path(tmp)) for run in a.runs or RUNS}
            a.file.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
            print(f"recorded {sum(map(len, found.values()))} files of {len(found)} runs in {a.file}")
            return 0
        want = json.loads(a.file.read_text())
        bad = []
        for run, files in want.items():
            for workers in a.workers:
                got = generate(run, workers, Path(tmp))
                bad += [f"{run} (workers {workers}): {name}" for name in sorted(set(files) | set(got))
                        if files.get(name) != got.get(name)]
                print(f"{run}, {workers} worker(s): {len(got)} files, "
                      f"{sum(files.get(n) == got.get(n) for n in got)} the same")
    for b in bad:
        print(f"differs: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
