"""Device proof of the room parameters added to the thinnest CUDA rungs (issue 26 item 2): every value of each
new parameter built, checked against the PyTorch reference and timed on the GPU, beside the simulator's time for the
catalog GPU it runs on; every bug render at the parameter's smallest and largest values must fail the check; a few rows of the
neighbouring rungs (their own parameter) give the order between rungs.

    python3 scripts/room_device_check.py                 # on a CUDA machine; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/room_device_check.py   # no GPU: the first 3 cases through every path but the GPU's

Uses kernelstrain.gpucheck's build and run passes (the harness of `kernelstrain gpu-check`). Exit 1 if a value fails
or a bug passes.
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.gpucheck import _build_all, _passes, _sim_ms, catalog_gpu, require_gpu  # noqa: E402
from kernelstrain.gpucheck.sample import fits  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate, writable  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# (module, rung, parameter, shapes): 2-3 shapes of the menu a parameter moves the most
NEW = [
    ("causal_conv1d_cuda", "smem_halo_tile", "items", [{"B": 16, "D": 2048, "L": 1024}, {"B": 1, "D": 2048, "L": 2048},
                                                        {"B": 64, "D": 1536, "L": 256}]),
    ("rope_cuda", "vectorized_uint4", "items", [{"T": 64, "H": 32, "D": 128}, {"T": 2048, "H": 16, "D": 256},
                                                {"T": 512, "H": 64, "D": 128}]),
    ("paged_kv_copy_cuda", "vectorized_uint4", "items", [{"NB": 1024, "M": 32, "P": 16, "H": 8, "D": 128},
                                                          {"NB": 1024, "M": 8, "P": 16, "H": 4, "D": 256},
                                                          {"NB": 2048, "M": 256, "P": 16, "H": 8, "D": 128}]),
]
# the rungs beside the new values (their own parameter): the order between rungs on the device
REFERENCE = [
    ("rope_cuda", "token_block_smem", "threads", [{"T": 2048, "H": 16, "D": 256}]),
    ("rope_cuda", "cos_sin_registers", "tokens_per_block", [{"T": 2048, "H": 16, "D": 256}]),
    ("causal_conv1d_cuda", "vectorized_uint4", "threads", [{"B": 16, "D": 2048, "L": 1024}]),
]


def cases(gpu: str) -> list:
    out = []
    for module_name, tag, name, shapes in NEW + REFERENCE:
        new = (module_name, tag, name, shapes) in NEW
        m = REGISTRY[module_name]
        v = m.variant(tag)
        dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        for shape in shapes:
            if not fits(m, dtype, shape, gpu):
                continue
            task = make_task(m, gpu, dtype, shape)
            values = v.param(name).values
            for value in values:
                params = {**v.defaults(), name: value}
                if not simulate(m, v, params, task).ok or not writable(m, v, params, task):   # as the engine offers
                    continue
                for bug in [None] + ([b for b in v.bugs_for(dtype, params) if v.breaks_at(b, task, params)]
                                     if new and value in (values[0], values[-1]) else []):
                    cid = f"{module_name}|{tag}|{name}={value}|{','.join(f'{k}={x}' for k, x in shape.items())}|{bug}"
                    out.append({"id": cid, "episode": f"{module_name}|{tag}|{shape}", "step": len(out),
                                "module": module_name, "impl": m.impl, "variant": tag, "params": params,
                                "dtype": dtype, "shape": dict(shape), "at": "task",
                                "label": "wrong_result" if bug else "ok", "kind": "wrong_result" if bug else "ok",
                                "bug": bug, "bug_repeats": 3 if bug else 1, "main": True, "rendered": True,
                                "code": knobs.render(m, v, params, task, bug)})
    for i, c in enumerate(out):         # the runner's key for a case (gpucheck.sample does the same)
        c["idx"] = i
    return out


def main() -> int:
    out = Path(os.environ.get("OUT", "/tmp/knobA_device_out"))
    out.mkdir(parents=True, exist_ok=True)
    rehearse = int(os.environ.get("KNOBA_REHEARSE", "0"))     # N cases without a GPU: every path but the GPU's
    device = "rehearsal (no GPU)" if rehearse else require_gpu()
    gpu = "H100" if rehearse else catalog_gpu(device)
    planned = cases(gpu)[:rehearse] if rehearse else cases(gpu)
    print(f"knob_device: {len(planned)} cases on {device} (simulated as {gpu})", file=sys.stderr)
    build_dir = Path("/tmp/knobA_build")
    t0 = time.time()
    _build_all(planned, build_dir, os.cpu_count() or 8)
    print(f"built in {time.time() - t0:.0f} s; {sum(not c['build_ok'] for c in planned)} failed", file=sys.stderr)
    work = build_dir / f"run_{int(time.time())}"
    work.mkdir(parents=True)
    rows = _passes(planned, work, os.cpu_count() or 8, 150.0)
    for r in rows:
        r["sim_ms"] = _sim_ms(r, gpu)
    keep = ("id", "module", "variant", "params", "dtype", "shape", "label", "bug", "build_ok", "ok", "error",
            "time_ms", "time_ms_2", "sim_ms", "rel_l2_err", "nbad")
    (out / "knob_device.json").write_text(json.dumps({"device": device, "sim_gpu": gpu,
                                                      "rows": [{k: r.get(k) for k in keep} for r in rows]}, indent=1))
    lines, problems = [], 0
    for r in rows:
        expected = not r["bug"]
        unrun = (r.get("error") or "").startswith("not run")        # past the time budget: no verdict
        bad = not r.get("build_ok") or (not unrun and bool(r.get("ok")) != expected)
        problems += bad
        t = f"{r['time_ms'] * 1e3:9.1f} us" if r.get("time_ms") else " " * 12
        s = f"{r['sim_ms'] * 1e3:9.1f} us" if r.get("sim_ms") else " " * 12
        err = (r.get("error") or "").splitlines()[0][:100] if bad else ""
        lines.append(f"{'PROBLEM ' if bad else 'NOT RUN ' if unrun else ''}{r['id']:90} device {t} sim {s} {err}")
    text = "\n".join(lines) + f"\n{len(rows)} cases, {problems} problems (a bug that passes, a value that fails)\n"
    (out / "summary.txt").write_text(text)
    print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
