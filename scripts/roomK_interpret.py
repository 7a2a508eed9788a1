"""Correctness of roomK's new Triton values on the CPU: Triton's interpreter (TRITON_INTERPRET=1, numpy) runs each
candidate at a small shape against the module's PyTorch reference (its inputs made on the CPU), and each bug render
at the same values must fail (but racy_update: the interpreter runs one program at a time). fp16 only: the
interpreter's numpy has no bfloat16. Where no device has checked a value, this is its correctness proof (not its time).
gemm_fp4_triton pipelined_copies' 32-wide K tiles passed here too (0.0 rel. L2 at M=80 N=128 K=256) but are not
offered: gemm_fp16_triton's own H100 rows (measurements/h100_gpucheck_simgrid.json, h100_sim2_fit.json) ran 128 x 128
x 32 1.1-1.6x slower than x 64, where the tile model the copies' GEMM shares puts 32 ahead.

    TRITON_INTERPRET=1 python3 scripts/roomK_interpret.py [MODULE ...]

(module, rung, params over the rung's defaults, shape, dtype): exit 1 if a value is wrong or a bug passes.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from kernelstrain.gpucheck.adapters import entry_triton_adapter  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

CASES = [
    # gemm_splitk_triton's 32-wide N tiles on every rung that takes them (M below the 16-row tile: masked rows)
    ("gemm_splitk_triton", "tl_dot_tiles", {"BLOCK_N": 32}, {"M": 16, "N": 256, "K": 512}, "fp16"),
    ("gemm_splitk_triton", "split_k_reduce", {"BLOCK_N": 32, "SPLIT_K": 4}, {"M": 16, "N": 256, "K": 512}, "fp16"),
    ("gemm_splitk_triton", "split_k_atomic", {"BLOCK_N": 32, "SPLIT_K": 4}, {"M": 5, "N": 256, "K": 512}, "fp16"),
    ("gemm_splitk_triton", "pipelined_split_k", {"BLOCK_N": 32, "SPLIT_K": 2}, {"M": 16, "N": 128, "K": 1024}, "fp16"),
    ("gemm_splitk_triton", "split_k_fused_reduce", {"BLOCK_N": 32, "SPLIT_K": 4}, {"M": 16, "N": 256, "K": 1024}, "fp16"),
    # (2026-12-07) on the menus by this check: gemm_fp4_triton's 256-row copies tiles, grouped_gemm_triton
    # m_fastest_order's 256-wide N tiles; checked, not offered (the Triton smem corpus figures they would add):
    # grouped_gemm_triton's 128-wide K and 5 stages; gemm_splitk_triton's 2 warps (on every rung's menu since the eighth
    # session, priced as mma.sync: base.triton_wgmma)
    ("gemm_splitk_triton", "pipelined_split_k", {"num_warps": 2, "SPLIT_K": 4}, {"M": 16, "N": 256, "K": 1024}, "fp16"),
    ("gemm_splitk_triton", "tl_dot_tiles", {"num_warps": 2, "BLOCK_M": 64, "BLOCK_K": 128}, {"M": 80, "N": 256, "K": 512},
     "fp16"),
    ("gemm_splitk_triton", "split_k_reduce", {"num_warps": 2, "SPLIT_K": 4}, {"M": 16, "N": 256, "K": 1024}, "fp16"),
    ("gemm_splitk_triton", "split_k_atomic", {"num_warps": 2, "SPLIT_K": 2}, {"M": 5, "N": 128, "K": 1024}, "fp16"),
    ("gemm_splitk_triton", "split_k_fused_reduce", {"num_warps": 2, "SPLIT_K": 4, "BLOCK_M": 32},
     {"M": 5, "N": 128, "K": 1024}, "fp16"),
    # gemm_fp4_triton pipelined_copies' 256-row tiles (M past one tile and a ragged last one; both warp counts)
    ("gemm_fp4_triton", "pipelined_copies", {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8},
     {"M": 300, "N": 256, "K": 256, "G": 32}, "fp16"),
    ("gemm_fp4_triton", "pipelined_copies", {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4,
                                             "GROUP_M": 4}, {"M": 80, "N": 128, "K": 256, "G": 32}, "fp16"),
    # grouped_gemm_triton block_lookup / m_fastest_order: 128-wide K tiles, 256-wide N tiles, 5 stages (K past one
    # tile and ragged for the masks; N two 256-wide blocks; a 256-wide N tile alone on m_fastest_order)
    ("grouped_gemm_triton", "m_fastest_order", {"BLOCK_K": 128, "BLOCK_M": 16},
     {"T": 24, "E": 4, "K": 320, "N": 256, "topk": 2}, "fp16"),
    ("grouped_gemm_triton", "m_fastest_order", {"BLOCK_N": 256, "num_stages": 5, "BLOCK_M": 32},
     {"T": 40, "E": 4, "K": 192, "N": 512, "topk": 2}, "fp16"),
    ("grouped_gemm_triton", "m_fastest_order", {"BLOCK_N": 256, "BLOCK_M": 64, "num_warps": 8},
     {"T": 96, "E": 4, "K": 320, "N": 768, "topk": 2}, "fp16"),
    ("grouped_gemm_triton", "block_lookup", {"BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 5, "BLOCK_M": 16},
     {"T": 24, "E": 8, "K": 384, "N": 512, "topk": 2}, "fp16"),
]


def on_cpu(src: str) -> str:
    # grouped_gemm's reference moves its routing tensors with .cuda()
    return (src.replace("device='cuda'", "device='cpu'").replace('device="cuda"', 'device="cpu"')
            .replace(".cuda()", ".cpu()"))


def run(module, variant, params, task, bug, model, inputs):
    """The candidate's wrapper on the check's arguments (the Model's weights where the entry takes them)."""
    ns = {}
    exec(compile(on_cpu(module.render(variant, params, task, bug)), f"<{module.name}>", "exec"), ns)
    args, _ = entry_triton_adapter(module)(dict(task.shape), model, [x.clone() for x in inputs])
    return ns[module.entry.name](*args)


def main(modules=()) -> int:
    """modules: only their cases (all where empty)."""
    problems = 0
    for name, tag, over, shape, dtype in CASES:
        if modules and name not in modules:
            continue
        m = REGISTRY[name]
        v = m.variant(tag)
        params = {**v.defaults(), **over}
        task = make_task(m, "H100", dtype, shape)
        ref_ns = {}
        exec(compile(on_cpu(m.reference(task)), "<reference>", "exec"), ref_ns)
        torch.manual_seed(0)
        inputs = ref_ns["get_inputs"]()
        model = ref_ns["Model"](*ref_ns["get_init_inputs"]())
        ref = model(*inputs).float()
        # a race cannot show where the interpreter runs one program at a time
        for bug in [None] + [b for b in v.bugs_for(dtype, params) if v.breaks_at(b, task, params) and b != "racy_update"]:
            out = run(m, v, params, task, bug, model, inputs).float()
            err = ((out - ref).norm() / ref.norm()).item()
            ok = err < 1e-2
            bad = ok != (bug is None)
            problems += bad
            print(f"{'PROBLEM ' if bad else ''}{name} {tag} {over} {shape} {dtype} bug={bug}: rel_l2 {err:.2e}")
    print(f"{problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
