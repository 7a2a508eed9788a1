"""Golden renders: a checked-in sha256 of every module x variant x one GPU per arch family x
(default params, each bug), of each module's reference and signature, and of each variant's
launch model and simulated result over its parameter grid and every shape of the menu. A render change then fails with
the module, variant, GPU and bug named. After a deliberate change regenerate the file with

    python3 scripts/update_golden.py            # all modules
    python3 scripts/update_golden.py rmsnorm_cuda ...   # only these

and say in the commit which renders changed and why.
"""
import hashlib
import json
from pathlib import Path

import pytest

from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task, param_grid

GOLDEN = Path(__file__).with_name("golden") / "renders.json"
# one GPU per arch family (vendor and feature set), the catalog's first: a new family's row is covered
# (today A100 sm_80, H100 sm_90a, RTX4090 sm_89, RTX5090 sm_120, MI300X gfx942)
FAMILIES: dict = {}
for _name, _gpu in GPUS.items():
    FAMILIES.setdefault((_gpu.vendor, _gpu.features), _name)
ARCH_GPUS = tuple(FAMILIES.values())


def _sha(x) -> str:
    text = x if isinstance(x, str) else json.dumps(x, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def golden_of(m) -> dict:
    """{key: sha} for one module; keys 'gpu|what' with what = variant[:bug], variant@launch,
    reference, signature. Renders use the module's first shape in its first supported dtype;
    launches every shape."""
    out = {}
    for g in ARCH_GPUS:
        dtype = next((d for d in m.dtypes if m.supports(GPUS[g], d)), None)
        if dtype is None:
            continue
        task = make_task(m, g, dtype, m.shapes[0])
        shape_tasks = [make_task(m, g, dtype, s) for s in m.shapes]
        out[f"{g}|reference"] = _sha(m.reference(task))
        out[f"{g}|signature"] = _sha(m.signature(task))
        for v in m.variants:
            out[f"{g}|{v.tag}"] = _sha(m.render(v, v.defaults(), task))
            for bug in v.bugs:
                out[f"{g}|{v.tag}:{bug}"] = _sha(m.render(v, v.defaults(), task, bug))
            # vars(): the flat records' fields as asdict gives them, without its deep copies (half the time)
            out[f"{g}|{v.tag}@launch"] = _sha([(launch_fields(m.launch(v, p, t)), vars(simulate(m, v, p, t)))
                                              for t in shape_tasks for p in param_grid(v)])
    return out


# Launch fields added after the goldens were written, left out where they hold their default so that the modules
# that do not set them keep their hashes (Launch.issue_s, Launch.later_s: 2026-12-06; Launch.mma_rate, Launch.loop_stages:
# 2026-12-07)
LATER_FIELDS = {"issue_s": 0.0, "later_s": 0.0, "mma_rate": 1.0, "loop_stages": 0}


def launch_fields(launch) -> dict:
    return {k: v for k, v in vars(launch).items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}


def load() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_golden(name):
    want = load().get(name)
    assert want is not None, f"{name} has no golden entry: run scripts/update_golden.py {name}"
    got = golden_of(REGISTRY[name])
    changed = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    assert not changed, f"{name}: changed {', '.join(changed[:12])}" + (" ..." if len(changed) > 12 else "")


def test_golden_lists_only_registered_modules():
    assert set(load()) == set(REGISTRY)
