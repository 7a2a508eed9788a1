"""simS (issue 30): the registers a thread of a Triton rung uses, as ptxas reports them for sm_90a (Triton's own
compile on the CPU: scripts/sim2_ptxas_regs.figures), beside the launch model's estimate, over a grid of parameters.

    nice python3 scripts/simS_regs.py cross_entropy_bwd_triton persistent_evict_first '{"T":16384,"V":32000}' bf16 \
        '{"BLOCK":[2048,4096,8192],"num_warps":[4,8]}'
"""
import itertools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from sim2_ptxas_regs import figures  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def main(argv: list) -> int:
    module, tag, shape, dtype, grid = argv[0], argv[1], json.loads(argv[2]), argv[3], json.loads(argv[4])
    m = REGISTRY[module]
    v = m.variant(tag)
    task = make_task(m, "H100", dtype, shape)
    for values in itertools.product(*grid.values()):
        p = {**v.defaults(), **dict(zip(grid, values))}
        try:
            f = figures(module, tag, p, shape, dtype)
        except Exception as err:  # a configuration Triton refuses: say so, go on
            print(json.dumps(dict(zip(grid, values))), "ERROR", repr(err)[:200])
            continue
        print(json.dumps(dict(zip(grid, values))), "ptxas regs", f["regs"], "spill", f["spill_bytes"],
              "model regs", v.launch(p, task).regs, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
