"""Show how a module's renders and signature differ from another git revision's.

    python3 scripts/render_diff.py MODULE [--base REV] [--gpus A100,H100,RTX4090,MI300X] [--show N]

Exports REV (default HEAD) to a temporary folder, renders MODULE's first shape in its first
supported dtype on each GPU there and here (defaults and every bug, as tests/test_golden.py
does), and prints one line per differing render with its changed lines, then the first N diffs
in full. A conversion that keeps renders unchanged prints "0 differ".
"""
import argparse
import difflib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RENDER = r'''
import json, sys
from kernelstrain.ops import REGISTRY
from kernelstrain.gpus import GPUS
from kernelstrain.tasks import make_task
m, out = REGISTRY[sys.argv[1]], {}
for g in sys.argv[2].split(","):
    d = next((d for d in m.dtypes if m.supports(GPUS[g], d)), None)
    if d is None:
        continue
    t = make_task(m, g, d, m.shapes[0])
    out[g + "|signature"] = m.signature(t)
    for v in m.variants:
        out[g + "|" + v.tag] = m.render(v, v.defaults(), t)
        for b in v.bugs:
            out[g + "|" + v.tag + ":" + b] = m.render(v, v.defaults(), t, b)
print(json.dumps(out))
'''


def renders(cwd: Path, module: str, gpus: str) -> dict:
    r = subprocess.run([sys.executable, "-c", RENDER, module, gpus], cwd=cwd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"render failed in {cwd}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("--base", default="HEAD")
    ap.add_argument("--gpus", default="A100,H100,RTX4090,MI300X")
    ap.add_argument("--show", type=int, default=1, help="full diffs to print")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", a.base], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        old = renders(Path(tmp), a.module, a.gpus)
    new = renders(ROOT, a.module, a.gpus)
    n = 0
    for key in sorted(set(old) | set(new)):
        before, after = (old.get(key) or "").splitlines(True), (new.get(key) or "").splitlines(True)
        if before == after:
            continue
        n += 1
        changed = [line for line in difflib.unified_diff(before, after, n=0)
                   if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        print(f"{key}: {len(changed)} lines changed")
        if n <= a.show:
            sys.stdout.writelines(difflib.unified_diff(before, after, f"{a.base}:{key}", f"worktree:{key}", n=1))
    print(f"{n} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
