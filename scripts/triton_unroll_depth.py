"""How many bytes a Triton streaming loop keeps in flight once `loop_unroll_factor=N` is written on it: compiled
for sm_90a (Triton's own ptxas), disassembled (Triton's nvdisasm), and read off the SASS.

    python3 scripts/triton_unroll_depth.py [--module NAME ...] [--json F]

For every Triton rung with the loop_unroll knob (ops/unroll.py LOOP_UNROLL), at the rung's defaults on a menu shape
(bf16, H100), each N of the knob: the bytes the loop's global loads bring per DRAM round trip a thread waits on
(`in_flight`: over the straight-line segments that hold the kernel's main loops, the LDG bytes over the stalls, a
stall being the first instruction that reads a load still outstanding; every load issued before it returns with it),
and that figure over the rolled loop's (N = 0). Unrolling buys bytes in flight only where ptxas issues the copies'
loads ahead of the previous copies' math; the ratio says whether it did. ops/unroll.TRITON_IN_FLIGHT holds the
printed table (per module: the geometric mean over its rungs, each clipped to 1..N). Run on 2026-12-06 (Triton 3.9;
the H100 that timed softmax_triton's unrolled loop ran 3.6): 11 rungs x 4 values in ~3 min of one CPU core.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.unroll import LOOP_UNROLL  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

WIDTH = {"128": 16, "64": 8, "32": 4, "U16": 2, "S16": 2, "16": 2, "U8": 1, "S8": 1, "8": 1, None: 4}
LDG = re.compile(r"^(?:@!?U?P\w+\s+)?LDG\.E(?:\.(128|64|32|U16|S16|16|U8|S8|8))?\S*\s+(R\d+),")
BREAK = re.compile(r"\b(BRA|EXIT|RET|BAR)\b")


def instructions(sass: str) -> list:
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", sass)]


def _regs(text: str) -> set:
    return {int(r) for r in re.findall(r"\bR(\d+)\b", text)}


def segments(ins: list) -> list:
    """Straight-line runs of instructions, cut after each branch, exit or barrier."""
    out, seg = [], []
    for s in ins:
        seg.append(s)
        if BREAK.search(s):
            out.append(seg)
            seg = []
    return out + ([seg] if seg else [])


def loads_and_stalls(seg: list) -> tuple[int, int]:
    """(LDG bytes, round trips waited on) of one straight-line segment."""
    outstanding, loaded, stalls = [], 0, 0
    for s in seg:
        sources = _regs(s.split(",", 1)[1]) if "," in s else set()
        m = LDG.match(s)
        if any(sources & regs for regs, _ in outstanding):
            stalls += 1                  # waits on a load: every load issued before it returns with it
            outstanding = []
        if m:
            width, first = WIDTH[m.group(1)], int(m.group(2)[1:])
            outstanding.append(({first + i for i in range(max(1, width // 4))}, width))
            loaded += width
    return loaded, stalls + bool(outstanding)


def in_flight(sass: str) -> float:
    """LDG bytes per round trip over the segments holding the main loops (>= half the largest one's LDG bytes)."""
    figures = [f for f in map(loads_and_stalls, segments(instructions(sass))) if f[0]]
    if not figures:
        return 0.0
    big = max(b for b, _ in figures)
    main = [(b, s) for b, s in figures if b >= big / 2]
    return sum(b for b, _ in main) / max(1, sum(s for _, s in main))


def nvdisasm() -> str:
    triton, _, _ = _import_triton()
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm")


def compiled_sass(module, variant, params: dict, task) -> list:
    """The SASS of each kernel of a candidate, compiled for sm_90a as gpu-check's harness specializes it."""
    triton, _, ASTSource = _import_triton()
    ns = load_triton_source(module.render(variant, params, task))
    out = []
    for spec in module.compile_specs(variant, params, task):
        signature, constexprs, attrs = launch_specialization(spec)
        compiled = triton.compile(ASTSource(fn=ns[spec.name], signature=signature, constexprs=constexprs, attrs=attrs),
                                  target=triton_target("sm_90a"),
                                  options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(compiled.asm["cubin"])
            f.flush()
            out.append(subprocess.run([nvdisasm(), "-c", f.name], capture_output=True, text=True, check=True).stdout)
    return out


def rung_in_flight(module, variant, task, base: dict | None = None) -> dict:
    """{N: bytes in flight a round trip at loop_unroll N} of a rung (its kernels' loads pooled)."""
    out = {}
    for n in LOOP_UNROLL.values:
        params = {**variant.defaults(), **(base or {}), LOOP_UNROLL.name: n}
        out[n] = sum(in_flight(s) for s in compiled_sass(module, variant, params, task))
    return out


def shape_of(module) -> dict:
    """A menu shape of a few rows: the second one (the decode-like first is often one row)."""
    return dict(module.shapes[1] if len(module.shapes) > 1 else module.shapes[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", nargs="*", help="modules (default: every Triton module with loop_unroll)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    a = ap.parse_args(argv)
    names = a.module or sorted(n for n, m in REGISTRY.items() if m.impl == "triton" and any(
        p.name == LOOP_UNROLL.name for v in m.variants for p in v.params))
    rows, table = [], {}
    for name in names:
        m = REGISTRY[name]
        task = make_task(m, "H100", "bf16" if "bf16" in m.dtypes else m.dtypes[0], shape_of(m))
        ratios = []
        for v in m.variants:
            if not any(p.name == LOOP_UNROLL.name for p in v.params):
                continue
            got = rung_in_flight(m, v, task)
            ratio = {n: got[n] / got[0] for n in got if n}
            rows.append({"module": name, "rung": v.tag, "shape": dict(task.shape), "dtype": task.dtype,
                         "bytes_in_flight": got, "over_rolled": ratio})
            ratios.append(ratio)
            print(f"{name:28} {v.tag:20} " + "  ".join(f"{n}: {got[n]:6.1f} B" for n in got)
                  + "   over rolled " + " ".join(f"{n}: {r:.2f}" for n, r in ratio.items()), flush=True)
        # each rung's ratio clipped to 1..N (a copy holds no fewer loads than the rolled trip, no more than N trips')
        table[name] = {n: round(math.exp(sum(math.log(min(n, max(1.0, r[n]))) for r in ratios) / len(ratios)), 2)
                       for n in ratios[0]}
    print("TRITON_IN_FLIGHT = " + json.dumps(table))
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "table": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
