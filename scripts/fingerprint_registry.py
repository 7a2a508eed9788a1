"""A behaviour fingerprint of every op module, to prove a refactor changes nothing.

    python scripts/fingerprint_registry.py > before.json   # edit ...
    python scripts/fingerprint_registry.py > after.json && diff before.json after.json

Per module: sha256 over its declared attributes, cost, reference, signature, and for each
default-profile GPU every variant's render (defaults and each bug), Triton kernel specs,
launch model and simulated result over its parameter grid.
"""
import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402


def fingerprint(m) -> str:
    h = hashlib.sha256()
    put = lambda x: h.update(json.dumps(x, sort_keys=True, default=str).encode())  # noqa: E731
    put([m.op, m.impl, m.family, m.title, m.desc, m.dims, m.shapes, m.dtypes, m.vendors])
    put([(v.tag, v.title, [(p.name, p.values, p.default) for p in v.params], sorted(v.needs), v.path,
          v.compute_eff, v.memory_eff, v.bugs, v.smem) for v in m.variants])
    for g in ("A100", "H100", "RTX4090", "MI300X"):
        for dtype in m.dtypes:
            if not m.supports(GPUS[g], dtype):
                continue
            for shape in m.shapes:
                t = make_task(m, g, dtype, shape)
                put([asdict(m.cost(t)), m.reference(t), m.signature(t)])
                for v in m.variants:
                    for params in param_grid(v):
                        put([asdict(m.launch(v, params, t)), asdict(simulate(m, v, params, t))])
                    put(m.render(v, v.defaults(), t))
                    put([asdict(k) for k in m.triton_kernels(v, v.defaults(), t)])
                    for bug in v.bugs:
                        put(m.render(v, v.defaults(), t, bug))
    return h.hexdigest()


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(REGISTRY)
    print(json.dumps({n: fingerprint(REGISTRY[n]) for n in names}, indent=1))
