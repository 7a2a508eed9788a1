"""Build kernelstrain/corpus/triton_smem.json: the shared memory Triton allocates
(metadata.shared, the figure its launcher's OutOfResources error quotes) for every Triton
candidate the bundled profiles' engine can write over a device's shared-memory cap.

Every such candidate (corpus.build.triton_smem_candidates: each runnable rung's whole
parameter grid on every task combo of the profiles, where the simulator labels it an `smem`
failure) is compiled for its target with Triton's compiler (compilers.compile_triton, as
`verify` compiles it, at the task's launch specialization), keyed by (module, arch), the
source's sha256 and the specialization (compilers.specialization_key). A candidate whose
figure fits the cap is listed: its `smem` label is false.

    nice python scripts/triton_smem_corpus.py [--profiles kernelstrain,kernelinfer] [--jobs 2]
        [--modules a,b] [--archs gfx942,sm_90a] [--shard I/N] [--keep] [--out FILE]
    python scripts/triton_smem_corpus.py --merge a.json b.json ... [--out FILE]

Compiles are cached on disk (compilers.CACHE_DIR). --keep reuses the figures already in
--out (after an op change only the new candidates compile); --modules and --archs limit the
compiles to those cells, the others' figures staying as --out has them. --shard I/N compiles every N-th
candidate from the I-th (several machines; --merge joins their files).
"""
import argparse
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import corpus  # noqa: E402
from kernelstrain.compilers import compile_triton, tool_text  # noqa: E402
from kernelstrain.corpus import build as corpus_build  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import smem_cap  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def compile_one(job):
    """(key, metadata.shared or None, the error text where Triton did not build it)."""
    key, gpu, dtype, shape, tag, params, code = job
    m = REGISTRY[key[0]]
    task, v = make_task(m, gpu, dtype, shape), m.variant(tag)
    result = compile_triton(code, m.compile_specs(v, params, task), key[1])
    return key, result.smem_bytes if result.ok else None, None if result.ok else tool_text(result.log)[-300:]


def triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def write(path: Path, cells: dict, tools: dict) -> None:
    """Compact JSON, one cell a line (a rebuild's diff shows the cells that changed)."""
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(dict(sorted(v.items())), separators=(',', ':'))}"
                      for k, v in sorted(cells.items()))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f'{{"version": {corpus.SMEM_VERSION}, "tools": {json.dumps(tools, sort_keys=True)},\n'
                   f'"cells": {{\n{body}\n}}}}\n')
    tmp.replace(path)


def merge(paths: list, out: Path) -> int:
    cells, versions = defaultdict(dict), set()
    for p in paths:
        data = json.loads(Path(p).read_text())
        if data.get("version") != corpus.SMEM_VERSION:
            print(f"{p}: corpus version {data.get('version')} != {corpus.SMEM_VERSION} (its keys are not this "
                  f"version's): rebuild it with this script", file=sys.stderr)
            return 2
        versions.add(data["tools"].get("triton"))
        for cell, codes in data["cells"].items():
            cells[cell].update(codes)
    if len(versions) != 1:
        print(f"the files come from different Triton versions: {sorted(map(str, versions))}", file=sys.stderr)
        return 2
    write(out, cells, {"triton": versions.pop()})
    print(f"wrote {out}: {sum(map(len, cells.values()))} figures from {len(paths)} files")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", default="kernelstrain,kernelinfer")
    ap.add_argument("--modules", default="")
    ap.add_argument("--archs", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--shard", default="1/1")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--merge", nargs="+")
    ap.add_argument("--out", default=str(corpus.SMEM_PATH))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        return merge(args.merge, out)
    version = triton_version()
    if version is None:
        print("triton is not installed: pip install 'kernelstrain[verify]'", file=sys.stderr)
        return 2
    shard, shards = map(int, args.shard.split("/"))
    todo = corpus_build.triton_smem_candidates(args.profiles.split(","), set(filter(None, args.modules.split(","))),
                                               archs=set(filter(None, args.archs.split(","))))
    keys = sorted(todo)[shard - 1::shards]
    cells = defaultdict(dict)
    if out.exists():
        old = json.loads(out.read_text())
        if old.get("version") == corpus.SMEM_VERSION and old["tools"].get("triton") == version:
            for cell, codes in old["cells"].items():
                if args.keep or cell not in {f"{k[0]}|{k[1]}" for k in todo}:
                    cells[cell].update(codes)     # the cells not compiled now stay as they are
    keys = [k for k in keys if k[2] not in cells.get(f"{k[0]}|{k[1]}", {})]
    print(f"{len(todo)} candidates over the cap, {len(keys)} to compile (shard {args.shard}, Triton {version})",
          flush=True)
    started, fits, failed = time.monotonic(), [], []
    jobs = [(k, t.gpu.name, t.dtype, dict(t.shape), v.tag, p, code)
            for k in keys for t, v, p, code in [todo[k]]]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for i, (key, shared, error) in enumerate(pool.map(compile_one, jobs, chunksize=1), 1):
            task, v, params, _ = todo[key]
            if shared is None:
                failed.append(f"{key[0]} {v.tag} {params} on {key[1]}: {error}")
                continue
            cells[f"{key[0]}|{key[1]}"][key[2]] = shared
            cap = smem_cap(v, REGISTRY[key[0]], task.gpu)
            if shared <= cap:
                fits.append(f"{key[0]} {v.tag} {params} on {task.gpu.name}: Triton {shared} B <= cap {cap} B")
            if i % 50 == 0:
                print(f"  {i}/{len(jobs)} in {time.monotonic() - started:.0f} s", flush=True)
                write(out, cells, {"triton": version})
    write(out, cells, {"triton": version})
    print(f"wrote {out}: {sum(map(len, cells.values()))} figures, {time.monotonic() - started:.0f} s; "
          f"{len(fits)} that fit the cap (a false smem label), {len(failed)} Triton does not build")
    for line in fits + failed:
        print("  " + line)
    return 1 if fits or failed else 0


if __name__ == "__main__":
    sys.exit(main())
