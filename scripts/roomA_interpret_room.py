"""Correctness on the CPU of the tile values roomA added to the attention Triton rungs (issue 26 item 2): Triton's
interpreter (TRITON_INTERPRET=1, numpy) runs each candidate at 2-3 small shapes against the module's PyTorch reference
(inputs made on the CPU), and every bug render at the same values must fail. fp16 only (the interpreter's numpy has no
bfloat16). Where no device has checked a value, this is its correctness proof (not its time).

    TRITON_INTERPRET=1 python3 scripts/roomA_interpret_room.py       # exit 1 if a value is wrong or a bug passes

Also the new rung fused_qkv_rope_triton persistent_tma (its grid on SMS = 2 "SMs", so each program loops over
several tiles). The shapes leave ragged tiles: a window or a cache that is not a multiple of the 256-key tile, splits past the last
tile (an empty split), T not a multiple of BLOCK_M, and two heads in one 256-wide QKV column tile.
"""
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TRITON_INTERPRET", "1")      # before triton is imported (roomK_interpret asserts it)

import torch  # noqa: E402

import roomK_interpret  # noqa: E402  (on_cpu: the render's tensors made on the CPU)
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

SWA = [{"B": 2, "H": 8, "KVH": 2, "S": 700, "W": 600, "D": 64}, {"B": 1, "H": 4, "KVH": 4, "S": 300, "W": 300, "D": 128}]
DECODE = [{"B": 2, "H": 3, "S": 700, "D": 64}, {"B": 1, "H": 2, "S": 1500, "D": 128}]
QKV = [{"T": 100, "HID": 256, "H": 4, "KVH": 2, "D": 128}, {"T": 70, "HID": 128, "H": 8, "KVH": 4, "D": 64}]
CASES = (
    [("swa_decode_triton", "gqa_dot", {"BLOCK_N": 256, "num_stages": st, "num_warps": 4}, s, "fp16")
     for s in SWA for st in (1, 2)]
    + [("flash_decode_triton", "online_softmax", {"BLOCK_N": 256, "num_stages": st, "num_warps": 4}, s, "fp16")
       for s in DECODE for st in (1, 2)]
    + [("flash_decode_triton", "split_kv", {"BLOCK_N": 256, "NUM_SPLITS": n, "num_stages": 1, "num_warps": 4}, s, "fp16")
       for s in DECODE for n in (2, 8)]
    # the new persistent rung: both tile widths, both row tiles (T=100 / 70: a ragged last row
    # tile, its rows read as zeros by the descriptor), SMS programs striding over 2-12 tiles each
    + [("fused_qkv_rope_triton", "persistent_tma", {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, s, "fp16")
       for s in QKV for bm, bn, bk in ((64, 128, 64), (128, 256, 64), (64, 256, 64))]
)
SMS = 2          # the SM count a persistent grid reads from torch.cuda, which the CPU has not
SM_COUNT = re.compile(r"torch\.cuda\.get_device_properties\([^)]*\)\.multi_processor_count")




def flat(out):
    """A candidate's or the reference's outputs as one fp32 vector (fused_qkv_rope returns q, k, v)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return torch.cat([o.float().reshape(-1) for o in outs])


def run(module, variant, params, task, bug, inputs):
    """Render, run on the CPU; the attention entries take the scale too (their check_adapter: triton_check)."""
    ns = {}
    src = SM_COUNT.sub(str(SMS), roomK_interpret.on_cpu(module.render(variant, params, task, bug)))
    exec(compile(src, f"<{module.name}>", "exec"), ns)
    args = [x.clone() for x in inputs]
    adapter = getattr(module, "check_adapter", None)
    if adapter is not None:
        args, _ = adapter(task.dims, None, args)
    return flat(ns[module.entry.name](*args))


def main() -> int:
    problems = 0
    for name, tag, over, shape, dtype in CASES:
        m = REGISTRY[name]
        v = m.variant(tag)
        params = {**v.defaults(), **over}
        task = make_task(m, "H100", dtype, shape)
        ref_ns = {}
        exec(compile(roomK_interpret.on_cpu(m.reference(task)), "<reference>", "exec"), ref_ns)
        torch.manual_seed(0)
        inputs = ref_ns["get_inputs"]()
        ref = flat(ref_ns["Model"](*ref_ns["get_init_inputs"]())(*inputs))
        for bug in [None] + [b for b in v.bugs_for(dtype, params) if v.breaks_at(b, task, params)]:
            out = run(m, v, params, task, bug, inputs)
            err = ((out - ref).norm() / ref.norm()).item()
            ok = err < 1e-2 and bool(torch.isfinite(out).all())
            bad = ok != (bug is None)
            problems += bad
            print(f"{'PROBLEM ' if bad else ''}{name} {tag} {over} {shape} {dtype} bug={bug}: rel_l2 {err:.2e}", flush=True)
    print(f"{problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
