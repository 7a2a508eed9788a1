"""CPU correctness of min_p_triton's rungs at BLOCK 8192 (a value no device has run) under TRITON_INTERPRET=1: values
and bug renders against the op's PyTorch reference (the sampled token of each row; a row may differ only where its
uniform falls within 1e-5 of a kept-mass boundary), at two small shapes. Exit 1 on a disagreement.

    python3 scripts/roomA_interpret_min_p.py
"""
import os
import sys
import types
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

m = REGISTRY["min_p_triton"]
bad = 0
for shape in ({"B": 12, "V": 20000}, {"B": 5, "V": 33000}):
    t = make_task(m, "H100", "fp32", shape)
    B, V = shape["B"], shape["V"]
    torch.manual_seed(3)
    logits = torch.randn(B, V) * 4
    min_p, u = torch.rand(B) * 0.2 + 0.02, torch.rand(B)
    probs = torch.softmax(logits.float(), dim=-1)
    kept = probs.masked_fill(probs < min_p[:, None] * probs.amax(-1, keepdim=True), 0.0)
    cdf = kept.cumsum(-1)
    ref = (cdf < u[:, None] * cdf[:, -1:]).sum(-1).clamp(max=V - 1)
    near = ((cdf / cdf[:, -1:] - u[:, None]).abs() < 1e-5).any(-1)       # a boundary within reach of rounding
    for tag in ("multi_kernel", "fused_row", "chunk_mass_pick"):
        v = m.variant(tag)
        for warps in (8, 16):
            p = {**v.defaults(), "BLOCK": 8192, "num_warps": warps}
            for bug in [None] + list(v.bugs_for("fp32", p)):
                mod = types.ModuleType("cand")
                exec(compile(m.render(v, p, t, bug), "cand.py", "exec"), mod.__dict__)
                got = mod.min_p_sampling(logits, min_p, u).long()
                wrong = int(((got != ref) & ~near).sum())
                ok = wrong == 0
                bad += ok != (bug is None)
                print(("BAD " if ok != (bug is None) else "") + f"{tag} {p} {shape} bug={bug}: {wrong} rows differ "
                      f"{'pass' if ok else 'FAIL'}", flush=True)
print("disagreements", bad)
sys.exit(1 if bad else 0)
