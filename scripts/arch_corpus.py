"""Build kernelstrain/corpus/arch_texts.json: the real tools' text for every
architecture-failing candidate the bundled profiles can render.

Every arch-failing candidate the bundled profiles' engine can write (corpus.candidates: each
gated rung with the parameters carried from any setting of a runnable rung, knobs off) is
compiled for its target with the real tool: nvcc 13.0 for NVIDIA targets (`-cubin`, the device
compile alone: ptxas prints what it prints under `nvcc -c`, which tests/test_arch_texts.py
checks), clang with the HIP headers for MI300X (compilers.compile_hip), Triton's compiler
through GPUTarget for Triton modules. The log is put in compilers.tool_text form and packed
(kernelstrain.corpus.pack), keyed by (module, arch) and the source's sha256.
A candidate the tool builds is recorded as [] (no arch failure) and listed.

    nice python scripts/arch_corpus.py [--profiles kernelstrain,kernelinfer] [--jobs 2]
                                       [--modules a,b] [--limit N] [--out FILE] [--missing]

--missing compiles only the candidates --out does not hold yet and adds them to its cells (the rest of the file as
it was): a new rung's arch failures without rebuilding its module's cells.

Compiles are cached on disk (compilers.CACHE_DIR), so a rerun after an op change compiles
only the changed candidates. --limit N keeps N candidates per cell (a quick look; the
checked-in corpus is built without it).
"""
import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import compilers, corpus  # noqa: E402
from kernelstrain.corpus import build as corpus_build  # noqa: E402
from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler, tool_text  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def tool_of(task, module) -> str:
    return "triton" if module.impl == "triton" else "clang" if task.is_hip else "nvcc"


def compile_one(job):
    """Compile one candidate (a picklable job: the rung's render functions are not)."""
    (name, arch, key), gpu, dtype, shape, tag, params, code = job
    m = REGISTRY[name]
    task, v = make_task(m, gpu, dtype, shape), m.variant(tag)
    if m.impl == "triton":
        result = compile_triton(code, m.compile_specs(v, params, task), arch)
    elif task.is_hip:
        result = compile_hip(code, arch, f"{m.op}_kernel")
    else:
        result = nvcc_device_only(code, arch)
    return (name, arch, key), v.tag, result.ok, None if result.ok else tool_text(result.log)


def nvcc_device_only(source: str, arch: str):
    """nvcc -cubin: the device compile alone (ptxas prints the same lines as under `nvcc -c`,
    which tests/test_arch_texts.py checks; half the CPU time, no host pass). A result cached
    by compile_cuda is used as it is."""
    if (compilers.CACHE_DIR / f"{hashlib.sha256(f'nvcc2|{arch}|{source}'.encode()).hexdigest()}.json").exists():
        return compile_cuda(source, arch)

    def run():
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "candidate.cu"
            src.write_text(source)
            proc = subprocess.run(["nvcc", "-cubin", "-std=c++17", "-gencode", compilers.NVCC_GENCODE[arch], str(src),
                                   "-o", str(Path(tmp) / "candidate.cubin")], capture_output=True, text=True, timeout=300)
        log = proc.stdout + proc.stderr
        return compilers.CompileResult(proc.returncode == 0, log)
    return compilers._cached(hashlib.sha256(f"nvcc-cubin|{arch}|{source}".encode()).hexdigest(), run)


def tool_versions() -> dict:
    """The tools the corpus was built with (nvcc's release line, clang's first line, Triton's version)."""
    def line(cmd, pick):
        try:
            return pick(subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines())
        except (OSError, IndexError, TypeError):
            return None
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    hip = find_hip_compiler()
    return {"nvcc": line(["nvcc", "--version"], lambda ls: ls[-2]),
            "clang": hip and line([hip, "--version"], lambda ls: ls[0]), "triton": triton_version}


def build(results, cells=None) -> dict:
    """The corpus cells of `results`, added to `cells` (a corpus file's, for --missing) where given."""
    start = cells or {}
    cells = defaultdict(lambda: {"lines": [], "forms": [], "codes": {}}, start)
    for (name, arch, key), _, ok, text, code in sorted(results, key=lambda r: r[0]):
        cell = cells[f"{name}|{arch}"]
        if ok:
            cell["codes"][key] = []
            continue
        template, numbers = corpus.pack(text, code)
        assert corpus.unpack(template, numbers, code) == text, (name, arch, key)
        form = corpus.runs(template, cell["lines"])
        if form not in cell["forms"]:
            cell["forms"].append(form)
        cell["codes"][key] = [cell["forms"].index(form), *numbers]
    return {k: cells[k] for k in sorted(cells)}


def write(path: Path, cells: dict, tools: dict) -> None:
    """Compact JSON, one cell a line (a rebuild's diff shows the cells that changed)."""
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'), sort_keys=True)}" for k, v in cells.items())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f'{{"version": {corpus.VERSION}, "tools": {json.dumps(tools, sort_keys=True)},\n"cells": {{\n{body}\n}}}}\n')
    tmp.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", default="kernelstrain,kernelinfer")
    ap.add_argument("--modules", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=str(corpus.PATH))
    ap.add_argument("--missing", action="store_true", help="compile only what --out lacks, and add it there")
    args = ap.parse_args(argv)
    todo = corpus_build.candidates(args.profiles.split(","), set(filter(None, args.modules.split(","))), args.limit)
    held = json.loads(Path(args.out).read_text())["cells"] if args.missing else None
    if held is not None:
        todo = {k: c for k, c in todo.items() if k[2] not in held.get(f"{k[0]}|{k[1]}", {}).get("codes", {})}
    by_tool = defaultdict(int)
    for (name, _, _), (task, _, _, _) in todo.items():
        by_tool[tool_of(task, REGISTRY[name])] += 1
    print(f"{len(todo)} candidates to compile: {dict(by_tool)}", flush=True)
    if by_tool.get("clang") and find_hip_compiler() is None:
        print("no HIP compiler (clang-17+ with the HIP headers, or hipcc): cannot build the corpus", file=sys.stderr)
        return 2
    started, results, built = time.monotonic(), [], []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        jobs = [(k, t.gpu.name, t.dtype, dict(t.shape), v.tag, p, code) for k, (t, v, p, code) in todo.items()]
        for i, (k, tag, ok, text) in enumerate(pool.map(compile_one, jobs, chunksize=1), 1):
            results.append((k, tag, ok, text, todo[k][3]))
            if ok:
                built.append(f"{k[0]} {tag} on {k[1]} ({todo[k][0].gpu.name}, {todo[k][0].dtype}) builds")
            if i % 100 == 0:
                print(f"  {i}/{len(todo)} in {time.monotonic() - started:.0f} s", flush=True)
    cells = build(results, held)
    write(Path(args.out), {k: cells[k] for k in sorted(cells)}, tool_versions())
    print(f"wrote {args.out}: {len(results)} candidates, {len(built)} that build, {time.monotonic() - started:.0f} s")
    for line in built:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
