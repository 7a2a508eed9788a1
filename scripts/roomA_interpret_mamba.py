"""CPU correctness of mamba_step_triton's persistent rung at 32 programs an SM (a value no device has run) under
TRITON_INTERPRET=1: values and bug renders against the op's PyTorch math in fp32, at two small shapes (the second has
more tiles than programs, so a program loops); the SM count is taken as 2 (no device). Exit 1 on a disagreement.

    python3 scripts/roomA_interpret_mamba.py
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
m = REGISTRY["mamba_step_triton"]; v = m.variant("persistent_vectorized")
bad = 0
for shape in ({"B": 4, "D": 96, "N": 16}, {"B": 3, "D": 200, "N": 32}):
    t = make_task(m, "H100", "fp16", shape)
    for p in ({"BLOCK_D": 16, "num_warps": 1, "programs_per_sm": 32}, {"BLOCK_D": 64, "num_warps": 4, "programs_per_sm": 32}):
        for bug in [None] + list(v.bugs_for("fp16", p)):
            code = m.render(v, p, t, bug).replace("torch.cuda.get_device_properties(x.device).multi_processor_count", "2")
            mod = types.ModuleType("c"); exec(compile(code, "c.py", "exec"), mod.__dict__)
            B, D, N = shape["B"], shape["D"], shape["N"]; torch.manual_seed(1); dt16 = torch.float16
            state = torch.randn(B, D, N); x = torch.randn(B, D, dtype=dt16); dt = (torch.randn(B, D) * 0.5).to(dt16)
            dtb = torch.rand(D) * -4 - 1; A = -torch.arange(1, N + 1, dtype=torch.float32).repeat(D, 1)
            Bs = torch.randn(B, N, dtype=dt16); Cs = torch.randn(B, N, dtype=dt16); Ds = torch.randn(D); z = torch.randn(B, D, dtype=dt16)
            st_ref = state.clone()
            dtv = torch.nn.functional.softplus(dt.float() + dtb); xf = x.float()
            st_ref = torch.exp(dtv[..., None] * A) * st_ref + (dtv * xf)[..., None] * Bs.float()[:, None, :]
            y_ref = ((st_ref * Cs.float()[:, None, :]).sum(-1) + Ds * xf) * torch.nn.functional.silu(z.float())
            fn = [getattr(mod, n) for n in dir(mod) if n == "mamba_step"][0]
            y, st = fn(state, x, dt, dtb, A, Bs, Cs, Ds, z)
            err = max(((y.float() - y_ref).norm() / y_ref.norm()).item(), ((st - st_ref).norm() / st_ref.norm()).item())
            ok = err < 1e-2
            bad += ok != (bug is None)
            print(("BAD " if ok != (bug is None) else "") + f"{p} {shape} bug={bug} err {err:.2e} {'pass' if ok else 'FAIL'}", flush=True)
print("disagreements", bad)
sys.exit(1 if bad else 0)
