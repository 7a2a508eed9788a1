"""roomC's new values of device-checked CUDA code paths (issue 26 Build 2; docs/roomC_s12.md, docs/roomC_s13.md): on a
list only with KERNELSTRAIN_DEVICE_UNCHECKED=1, priced by the rung's launch model as it is: the model has each ahead of
its inward neighbour somewhere on the menu (else it would not have been room worth a device job). The H100 timed them
(scripts/roomC_device.py plans v1 / v2, measurements/h100_roomC_v1.json, v2.json): each ran correct and slower than
its inward neighbour at some shape where the model has it ahead, so each stays off."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (module, rung, parameter, the new value)
NEW = (("swa_decode_cuda", "gqa_cp_async", "threads", 512), ("selective_scan_cuda", "smem_bc_multi_channel", "rows", 16),
       ("gemm_int4_cuda", "split_k_small_m", "BN", 256))
PROBE = """import json
from kernelstrain.ops import REGISTRY
print(json.dumps([list(REGISTRY[m].variant(t).param(p).values) for m, t, p, _ in %r]))""" % (NEW,)


def _lists(unchecked: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k != "KERNELSTRAIN_DEVICE_UNCHECKED"}
    if unchecked:
        env["KERNELSTRAIN_DEVICE_UNCHECKED"] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                         env={**env, "PYTHONPATH": str(ROOT)}, timeout=120, check=True)
    return json.loads(out.stdout)


def test_the_new_values_are_off_until_a_device_times_them():
    for (module, tag, name, value), off, on in zip(NEW, _lists(False), _lists(True)):
        assert value not in off, (module, tag, name)
        assert on == off + [value], (module, tag, name)


def test_the_model_has_each_new_value_ahead_somewhere(monkeypatch):
    """At the device plan's shape and other parameters, the new value's modelled time beats its inward neighbour's."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from roomC_extend import extended
    from kernelstrain.ops import REGISTRY
    from kernelstrain.sim import simulate
    from kernelstrain.tasks import make_task
    plans = {"swa_decode_cuda": ({"B": 1, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128},
                                 {"tile_n": 16, "partition": 256, "keys_per_step": 8, "stages": 3}, 256),
             "selective_scan_cuda": ({"B": 8, "L": 2048, "D": 5120, "N": 16}, {"threads": 32}, 8),
             "gemm_int4_cuda": ({"M": 1, "N": 14336, "K": 4096}, {"BM": 32, "STAGES": 2, "SPLITS": 16, "BK": 128}, 128)}
    for module, tag, name, value in NEW:
        m = REGISTRY[module]
        v = m.variant(tag)
        v = extended(v, name, tuple(v.param(name).values) + (value,))
        shape, rest, inward = plans[module]
        task = make_task(m, "H100", "bf16", shape)
        new, old = (simulate(m, v, {**rest, name: x}, task) for x in (value, inward))
        assert new.ok and old.ok and new.time_ms < old.time_ms, (module, new.time_ms, old.time_ms)


def test_each_new_value_ran_slower_than_its_inward_neighbour_somewhere_on_the_h100():
    """Why they stay off: at some stored shape the device timed the new value slower than its inward neighbour at the
    same other parameters (a value the device favoured everywhere would belong on the menu)."""
    inward = {"threads": 256, "rows": 8, "BN": 128}
    rows = [r for plan in ("v1", "v2") for r in json.loads((ROOT / f"measurements/h100_roomC_{plan}.json").read_text())["rows"]
            if r["ok"] and not r["bug"]]
    for module, tag, name, value in NEW:
        slower = []
        for r in rows:
            if (r["module"], r["variant"]) == (module, tag) and r["params"][name] == value:
                twin = [q for q in rows if (q["module"], q["variant"], q["shape"]) == (module, tag, r["shape"])
                        and q["params"] == {**r["params"], name: inward[name]}]
                slower += [r["time_ms"] > q["time_ms"] for q in twin]
        assert slower and any(slower), (module, name, value, slower)
