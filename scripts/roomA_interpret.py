"""CPU correctness of a flash_prefill_triton rung under TRITON_INTERPRET=1 (Triton's numpy interpreter), for a rung
no device has run: every value of its grid (at two small shapes, one with B*H > 1 so a head's rows follow another's)
and every bug render, against PyTorch's causal scaled_dot_product_attention in fp32. A value must pass (relative L2
error under 1e-2, all finite), a bug must fail. Exit 1 on a disagreement.

    python3 scripts/roomA_interpret.py tma_descriptors
"""
import itertools
import os
import sys
import types
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

m = REGISTRY["flash_prefill_triton"]
tag = sys.argv[1]
v = m.variant(tag)
torch.manual_seed(0)
bad = 0
for shape in ({"B": 1, "H": 2, "S": 256, "D": 64}, {"B": 2, "H": 1, "S": 128, "D": 128}):
    t = make_task(m, "H100", "fp16", shape)
    names = [p.name for p in v.params]
    for combo in itertools.product(*[p.values for p in v.params]):
        p = dict(zip(names, combo))
        if shape["S"] % p["BLOCK_M"] or shape["S"] % p.get("BLOCK_N", 1):
            continue
        for bug in [None] + list(v.bugs_for("fp16", p)):
            code = m.render(v, p, t, bug).replace('device="cuda"', 'device="cpu"')
            mod = types.ModuleType("cand")
            exec(compile(code, "cand.py", "exec"), mod.__dict__)
            q, k, vv = (torch.randn(shape["B"], shape["H"], shape["S"], shape["D"], dtype=torch.float16) for _ in range(3))
            scale = shape["D"] ** -0.5
            out = mod.flash_prefill(q, k, vv, scale).float()
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), vv.float(), is_causal=True)
            err = ((out - ref).norm() / ref.norm()).item()
            ok = err < 1e-2 and torch.isfinite(out).all().item()
            expect = bug is None
            bad += ok != expect
            print(f"{'BAD ' if ok != expect else ''}{tag} {p} {shape} bug={bug}: rel_err {err:.2e} {'pass' if ok else 'FAIL'}", flush=True)
print("disagreements", bad)
sys.exit(1 if bad else 0)
