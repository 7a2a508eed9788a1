"""The launch models' registers against ptxas's (nvcc 13.0, sm_90a), for CUDA rungs with a `threads` parameter at
512 and 1024 threads: each candidate rendered at its rung's defaults on the module's third menu shape (bf16 where the
module has it), compiled with -Xptxas -v, and the blocks an SM holds by the model's registers and by ptxas's
printed side by side; a line ends with "occupancy differs" where the two counts part (the rows there are timed on a
wrong occupancy). Compile-only: no GPU.

    python3 scripts/simB_regscan.py causal_conv1d_cuda,bias_gelu_cuda,moe_combine_cuda
"""
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import NVCC_GENCODE  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.occupancy import blocks_per_sm  # noqa: E402
from kernelstrain.sim import modelled_launch  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def ptxas_regs(source: str) -> int | None:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "c.cu"
        cu.write_text(source)
        r = subprocess.run(["nvcc", "-c", "-std=c++17", "-gencode", NVCC_GENCODE["sm_90a"], "-Xptxas", "-v", str(cu),
                            "-o", str(Path(tmp) / "c.o")], capture_output=True, text=True)
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", r.stderr)]
    return max(regs) if regs else None


def scan(name: str):
    m = REGISTRY[name]
    task = make_task(m, "H100", "bf16" if "bf16" in m.dtypes else m.dtypes[0], m.shapes[min(2, len(m.shapes) - 1)])
    for v in m.variants:
        threads = next((p for p in v.params if p.name == "threads"), None)
        for t in (512, 1024):
            if threads is None or t not in threads.values:
                continue
            p = {**v.defaults(), "threads": t}
            launch, real = modelled_launch(m, v, p, task), ptxas_regs(m.render(v, p, task))
            if real is None:
                yield f"{name:24} {v.tag:28} threads {t:4d} compile failed"
                continue
            ours, theirs = blocks_per_sm(launch, task.gpu), blocks_per_sm(replace(launch, regs=real), task.gpu)
            yield (f"{name:24} {v.tag:28} threads {t:4d} model {launch.regs:3d} ptxas {real:3d} blocks an SM "
                   f"{ours} / {theirs}{'  occupancy differs' if ours != theirs else ''}")


def main(argv: list) -> int:
    for name in argv[0].split(","):
        for line in scan(name):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
