"""Print no_bounds_check's feedback text for each rung over_read_texts models, at a few H100 shapes and thread counts
(docs/labels_s13.md's samples):

    python3 scripts/over_read_texts_sample.py [SEED]
"""
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import messages  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

CASES = (("rmsnorm_cuda", {"T": 4096, "D": 4096}, 256), ("rmsnorm_cuda", {"T": 64, "D": 4096}, 64),
         ("add_rmsnorm_cuda", {"T": 64, "D": 4096}, 256), ("add_rmsnorm_cuda", {"T": 8192, "D": 5120}, 1024),
         ("layernorm_cuda", {"T": 4096, "D": 4096}, 256), ("layernorm_cuda", {"T": 8192, "D": 1024}, 1024),
         ("fp8_quant_cuda", {"T": 4096, "D": 4096}, 256), ("fp8_quant_cuda", {"T": 512, "D": 5120}, 64),
         ("causal_conv1d_cuda", {"B": 8, "D": 5120, "L": 2048}, 256), ("causal_conv1d_cuda", {"B": 1, "D": 2048, "L": 2048}, 64))


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    for name, shape, threads in CASES:
        m = REGISTRY[name]
        v = next(v for v in m.variants if "no_bounds_check" in dict(v.edits))
        task = make_task(m, "H100", "fp16", shape)
        print(f"== {name} {v.tag} {shape} threads {threads}")
        print(messages.mismatch_text("no_bounds_check", m, task, random.Random(seed), v, {**v.defaults(), "threads": threads}))


if __name__ == "__main__":
    main()
