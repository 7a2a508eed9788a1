"""CPU correctness of roomM's new Triton candidates under TRITON_INTERPRET=1 (seventh session): each value and each
bug render against the op's PyTorch reference at small shapes; a value must match, a bug must fail. Where no device
has run a candidate this is its correctness proof (not its time; the interpreter runs one program at a time, so a
race cannot show: the device plan, scripts/roomM_device.py m8, runs them on a GPU).

min_p_triton split_row_combine's last_combine 1 (the combine in the mass kernel's last program of a row), and
BLOCK 4096 with either combine: the sampled token of each row against the reference's inverse CDF over the kept
mass (a row may differ only where its uniform falls within 1e-5 of a kept-mass boundary), at shapes where a slice
is partial, empty (split 32 of 20000: PER 1024 leaves slices past V) and where B has several rows.

    python3 scripts/roomM_interpret.py            # exit 1 on a disagreement
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

# (module, rung, parameter values over its defaults, shapes)
MIN_P = [("min_p_triton", "split_row_combine", {"last_combine": 1, **over}, ({"B": 3, "V": 20000}, {"B": 5, "V": 33000}))
         for over in ({"split": 2, "BLOCK": 512}, {"split": 8, "BLOCK": 1024}, {"split": 32, "BLOCK": 2048},
                      {"split": 32, "BLOCK": 512})] + [
    # BLOCK 4096 with either combine: one trip a slice at 32 splits, several at 2, a slice past V at 33000 / 32
    ("min_p_triton", "split_row_combine", {"split": split, "BLOCK": 4096, "last_combine": last},
     ({"B": 3, "V": 20000}, {"B": 5, "V": 33000})) for last in (0, 1) for split in (2, 32)]


def min_p_case(m, v, params, shape) -> int:
    """Disagreements of one min_p value (and its bugs) at one shape: 0 when the value matches and every bug fails."""
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
    bad = 0
    for bug in [None] + list(v.bugs_for("fp32", params)):
        mod = types.ModuleType("cand")
        exec(compile(m.render(v, params, t, bug), "cand.py", "exec"), mod.__dict__)
        got = mod.min_p_sampling(logits, min_p, u).long()
        wrong = int(((got != ref) & ~near).sum())
        ok = wrong == 0
        bad += ok != (bug is None)
        print(("BAD " if ok != (bug is None) else "") + f"{m.name} {v.tag} {params} {shape} bug={bug}: {wrong} rows "
              f"differ, {'pass' if ok else 'FAIL'}", flush=True)
    return bad


def main() -> int:
    bad = 0
    for name, tag, over, shapes in MIN_P:
        m = REGISTRY[name]
        v = m.variant(tag)
        for shape in shapes:
            bad += min_p_case(m, v, {**v.defaults(), **over}, shape)
    print("disagreements", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
