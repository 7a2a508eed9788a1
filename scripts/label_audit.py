"""Audit of the wrong_result labels on the CPU: is every bug the engine offers wrong where it is offered?

    python3 scripts/label_audit.py static            # every module, rung, bug, dtype, menu shape, parameter extreme:
                                                     # a bug render identical to the clean one is DEAD
    TRITON_INTERPRET=1 python3 scripts/label_audit.py triton [MODULE ...]
                                                     # every Triton bug run in Triton's interpreter on CPU tensors
                                                     # against the module's reference, with gpu-check's comparison
    LABELS_CLEAN=1                                   # triton: also each configuration's clean render, once a
                                                     # shape (a verdict `CLEAN FAILS` is a false ok label)
    LABELS_INTERPRETED=1                             # triton: leave out the rungs the interpreter cannot run
                                                     # (label_device_check.NOT_INTERPRETED: the device runs them)

Each prints a table: module / rung / bug / params / shape / verdict. `static` walks the configurations the engine can
offer a bug at: each parameter's smallest and largest value (the others at the rung's defaults) and the defaults, every
dtype and menu shape where `Episode.bugs` keeps it (bug_dtypes / bug_params / bug_tasks). `triton` runs the same
configurations at the menu shapes the bug is offered at, with the dimensions that only count independent rows, heads
or batches shrunk (SHRINK: each module's own rule; the dimensions a loop, a mask or a reduction spans stay as on the
menu, so a dropped tail or a diluted sum is what it is there), fp16 for bf16 (the interpreter's numpy has no
bfloat16) judged by the task dtype's tolerance class, outputs poisoned as gpu-check poisons them. A race cannot show
in the interpreter (it runs one program at a time): racy_update is not run. A verdict `PASSES` is a false label.
"""
import difflib
import os
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402
from label_device_check import configs, not_interpreted  # noqa: E402


def offered_at(m, v, bug: str, dtype: str, params: dict) -> list:
    """The menu shapes the engine offers `bug` at (Episode.bugs), for this dtype and these params."""
    if bug not in v.bugs_for(dtype, params):
        return []
    return [s for s in m.shapes if v.breaks_at(bug, make_task(m, "H100", dtype, s), params)]


def edited_lines(clean: str, bugged: str) -> list:
    return [ln for ln in difflib.unified_diff(clean.splitlines(), bugged.splitlines(), n=0, lineterm="")
            if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]


def static(modules=()) -> int:
    """Renders each offered bug beside the clean code; identical ones are DEAD."""
    dead = 0
    for name, m in sorted(REGISTRY.items()):
        if modules and name not in modules:
            continue
        for v in m.variants:
            for label, params, _ in configs(v):
                for bug in v.bugs:
                    for dtype in m.dtypes:
                        for shape in offered_at(m, v, bug, dtype, params):
                            task = make_task(m, "H100", dtype, shape)
                            if m.render(v, params, task) == m.render(v, params, task, bug):
                                dead += 1
                                print(f"{name:28} {v.tag:28} {bug:18} {label:22} {dtype:5} {shape}  DEAD (render unchanged)")
    print(f"{dead} dead (module, rung, bug, params, dtype, shape) cases")
    return dead


# -- Triton: run in the interpreter ---------------------------------------------------------------------------------

def _batch(n: int, to: int = 2) -> int:
    return min(n, to)



def _heads(s: dict) -> dict:
    """Two KV heads (two indices for a per-head combine to confuse) with their whole query groups (the GQA ratio
    stays)."""
    if "KVH" in s:
        kvh = _batch(s["KVH"], 2)
        return {"KVH": kvh, "H": s["H"] // s["KVH"] * kvh}
    return {"H": _batch(s["H"], 2)}


ROWS = lambda s, dim: {dim: _batch(s[dim], 16)}                      # noqa: E731 - rows of a row-wise op
# K (the reduction, where every GEMM bug sits: a K tile, a 16-bit sum, a scale, a split's combine) stays; one N tile and
# 16 rows: the interpreter's time goes by programs (M 64 N 256: 95 s for one clean render at load 10)
GEMM = lambda s: {"M": _batch(s["M"], 16), "N": _batch(s["N"], 64)}  # noqa: E731
# per module: the shrunk dims of a menu shape (the rest stay)
SHRINK = {
    "add_rmsnorm_triton": lambda s: ROWS(s, "T"), "rmsnorm_triton": lambda s: ROWS(s, "T"),
    "layernorm_triton": lambda s: ROWS(s, "T"), "fp8_quant_triton": lambda s: ROWS(s, "T"),
    "swiglu_fwd_triton": lambda s: ROWS(s, "T"), "swiglu_bwd_triton": lambda s: ROWS(s, "T"),
    "softmax_triton": lambda s: ROWS(s, "R"), "cross_entropy_fwd_triton": lambda s: ROWS(s, "T"),
    "cross_entropy_bwd_triton": lambda s: ROWS(s, "T"), "rope_triton": lambda s: ROWS(s, "T"),
    "layernorm_bwd_triton": lambda s: {},                            # its partial sums span the programs' rows
    "chunked_prefill_triton": lambda s: {"B": _batch(s["B"]), **_heads(s)},
    # a conv's output pixels are independent rows (its bugs sit in the R * S * C tap loop): 8 x 8 of them (the
    # interpreter ran one clean 56 x 56 render past 150 s)
    "conv2d_nhwc_triton": lambda s: {"N": _batch(s["N"]), "H": min(s["H"], 8), "W": min(s["W"], 8)},
    "cross_attention_triton": lambda s: {"B": _batch(s["B"]), "H": _batch(s["H"])},
    "flash_attn_bwd_triton": lambda s: {"B": 1, "H": _batch(s["H"])},
    "flash_decode_triton": lambda s: {"B": 1, **_heads(s)},
    "flash_prefill_triton": lambda s: {"B": 1, "H": _batch(s["H"])},
    "fused_qkv_rope_triton": lambda s: {"T": _batch(s["T"], 64), **_heads(s)},
    "gemm_fp16_triton": GEMM, "gemm_splitk_triton": GEMM,
    # fp4's grids divide N by BLOCK_N (up to 256: every menu N is a multiple): N 64 left them no program
    "gemm_fp4_triton": lambda s: {"M": _batch(s["M"], 16), "N": _batch(s["N"], 256)},
    "grouped_gemm_triton": lambda s: {"T": _batch(s["T"], 16), "N": _batch(s["N"], 64)},
    "int8_kv_quant_triton": lambda s: {"N": _batch(s["N"], 4)},
    "mamba_step_triton": lambda s: {"B": _batch(s["B"])},
    "min_p_triton": lambda s: {},                                    # rows decide a sampler bug's reach
    "mla_decode_triton": lambda s: {"B": 1, **_heads(s)},
    "paged_decode_triton": lambda s: {"B": 1, **_heads(s)},
    "selective_scan_triton": lambda s: {"B": _batch(s["B"]), "D": _batch(s["D"], 256)},
    "sliding_window_attn_triton": lambda s: {"B": 1, "H": _batch(s["H"])},
    "swa_decode_triton": lambda s: {"B": 1, **_heads(s)},
    "tree_attention_triton": lambda s: {"B": _batch(s["B"]), "H": _batch(s["H"])},
    "paged_kv_copy_triton": lambda s: {"M": _batch(s["M"], 8)},
}
SMS = 132           # an H100's SMs, for the persistent grids that read the device's count
SM_COUNT = re.compile(r"torch\.cuda\.get_device_properties\([^)]*\)\.multi_processor_count")
CASE_S = int(os.environ.get("LABELS_CASE_S", "90"))
# which offered shapes a configuration runs at: "small" (the cheapest: reach), "large" (the largest menu task:
# dilution), "both"
WHICH = os.environ.get("LABELS_SHAPES", "both")


def on_cpu(src: str) -> str:
    return SM_COUNT.sub(str(SMS), src.replace("device='cuda'", "device='cpu'").replace('device="cuda"', 'device="cpu"')
                        .replace(".cuda()", ".cpu()").replace("torch.cuda.synchronize()", "pass"))


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def run_case(torch, m, v, params, task, bug, ref_bundle):
    """gpu-check's comparison of one render on the CPU: poisoned allocations, the module's adapter and tolerance."""
    from kernelstrain.gpucheck.adapters import tolerance, triton_adapter, default_outs
    from kernelstrain.gpucheck.runtime import _PoisonTorch, _check_all
    model, inputs, ref, tol_dtype = ref_bundle
    ns = {}
    exec(compile(on_cpu(m.render(v, params, task, bug)), f"<{m.name}>", "exec"), ns)
    poisoned = _PoisonTorch(torch)
    ns["torch"] = poisoned
    cand = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    adapter = triton_adapter(m)
    args, outs_of = adapter(task.dims, model, cand) if adapter else (list(cand), default_outs)
    fn = ns[m.entry.py_name or m.entry.name]
    ret = fn(*args)
    per = _check_all(torch, outs_of(ret, ref), tolerance(m, tol_dtype), poisoned.guards)
    return per


def reference(torch, m, task):
    ns = {}
    exec(compile(on_cpu(m.reference(task)), "<reference>", "exec"), ns)
    seed = 0
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]())
    inputs = list(ns["get_inputs"]())
    from kernelstrain.gpucheck.adapters import prepare
    if prepare(m):
        prepare(m)(task.dims, inputs)
    cand_inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    src = m.reference(task)
    with torch.enable_grad() if ".backward(" in src else torch.no_grad():
        ref = model(*inputs)
    return model, cand_inputs, ref


def run_task(m, dtype: str, shape: dict):
    """A task at the dtype the interpreter runs (fp16 also for a module of bf16 only: numpy has no bfloat16)."""
    from kernelstrain.ops.base import Task
    from kernelstrain.gpus import get_gpu
    return Task(m.name, get_gpu("H100"), dtype, tuple((d, int(shape[d])) for d in m.dims))


def summary(per: dict) -> str:
    worst = max(per.values(), key=lambda p: (not p.get("ok"), p.get("nbad") or 0))
    return f"nbad {worst.get('nbad')} rel_l2 {worst.get('rel_l2_err')}"


# Triton parameters that change no program's semantics (the interpreter ignores them): their extremes are not run
SEMANTICS_FREE = ("num_warps", "num_stages", "loop_unroll", "STAGES")


def subtle(m, v, bug: str, params: dict) -> bool:
    """Whether a bug's reach needs a run to settle (LABELS_SUBTLE=1 runs only these): a wrong identity, a combine
    index, a 16-bit accumulator, a bound that is not a store's mask (a store mask dropping an element leaves it
    poisoned: gpu-check fails it), a dropped online rescale (alpha: wrong only where the running max moves)."""
    if bug in ("wrong_init", "bad_combine_index", "half_accumulator"):
        return True
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    diff = "\n".join(edited_lines(m.render(v, params, task), m.render(v, params, task, bug)))
    if bug == "off_by_one":
        return "tl.store" not in diff
    return bug == "missing_scale" and "alpha" in diff


def triton_runs(m, v):
    """(label, params, bug, run dtype, judged dtypes, shrunk shape, menu shape): per configuration and bug, the
    offered menu shapes' shrunk forms, the cheapest and the one of the largest menu task; 16-bit dtypes run once
    (fp16) and are judged each by its own tolerance class."""
    out = []
    for label, params, _ in configs(v):
        if label.split("=")[0] in SEMANTICS_FREE:
            continue
        for bug in v.bugs:
            if bug == "racy_update" or (os.environ.get("LABELS_SUBTLE") and not subtle(m, v, bug, params)):
                continue
            for precision in ("16", "fp32"):
                dtypes = [d for d in m.dtypes if (d == "fp32") == (precision == "fp32")]
                shapes = {}
                for d in dtypes:
                    for s in offered_at(m, v, bug, d, params):
                        small = {**s, **SHRINK[m.name](s)}
                        shapes.setdefault(tuple(small.items()), (s, set()))[1].add(d)
                if not shapes:
                    continue
                rd = "fp32" if precision == "fp32" else "fp16"
                size = lambda s: m.cost(run_task(m, rd, dict(s))).bytes      # noqa: E731
                small_end, large_end = min(shapes, key=size), max(shapes, key=lambda k: size(shapes[k][0].items()))
                picked = {"small": {small_end}, "large": {large_end}}.get(WHICH, {small_end, large_end})
                for small in sorted(picked, key=size):
                    menu, judged = shapes[small]
                    out.append((label, params, bug, rd, sorted(judged), dict(small), menu))
    return out


def clean_run(torch, m, v, label: str, params: dict, task, key, judged: list, refs: dict, small: dict, menu) -> bool:
    """The clean render of one configuration at one shape, judged as the bug renders are: True where it fails."""
    t0 = time.time()
    signal.alarm(CASE_S)
    try:
        if key not in refs:
            refs.clear()
            refs[key] = reference(torch, m, task)
        model, inputs, ref = refs[key]
        per = {d: run_case(torch, m, v, params, task, None, (model, inputs, ref, d)) for d in judged}
        bad = [d for d, p in per.items() if not all(r.get("ok") for r in p.values())]
        verdict, detail = ("CLEAN FAILS " + ",".join(bad) if bad else "clean ok"), summary(per[judged[-1]])
    except Timeout:
        verdict, detail = "clean timeout", f"> {CASE_S} s"
    except Exception as e:  # noqa: BLE001 - a render may fail in any way; record it
        verdict, detail = "clean error", f"{type(e).__name__}: {str(e)[:160]}"
    finally:
        signal.alarm(0)
    print(f"{m.name:26} {v.tag:24} {'-':17} {label:18} {task.dtype:4} {small} (menu {menu}) {verdict} {detail} "
          f"{time.time() - t0:.1f}s", flush=True)
    return verdict.startswith("CLEAN FAILS")


def triton(modules=()) -> int:
    import torch
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    signal.signal(signal.SIGALRM, _alarm)
    passed = 0
    refs = {}
    for name, m in sorted(REGISTRY.items()):
        if m.impl != "triton" or (modules and name not in modules):
            continue
        for v in m.variants:
            if os.environ.get("LABELS_INTERPRETED") and not_interpreted(m, v):
                continue
            clean_done = set()
            for label, params, bug, rd, judged, small, menu in triton_runs(m, v):
                task = run_task(m, rd, small)
                key = (name, rd, tuple(small.items()))
                if os.environ.get("LABELS_CLEAN") and (label, key) not in clean_done:
                    clean_done.add((label, key))
                    passed += clean_run(torch, m, v, label, params, task, key, judged, refs, small, menu)
                t0 = time.time()
                signal.alarm(CASE_S)
                try:
                    if key not in refs:
                        refs.clear()
                        refs[key] = reference(torch, m, task)
                    model, inputs, ref = refs[key]
                    oks = {d: all(p.get("ok") for p in run_case(torch, m, v, params, task, bug,
                                                                  (model, inputs, ref, d)).values()) for d in judged[:1]}
                    per = run_case(torch, m, v, params, task, bug, (model, inputs, ref, judged[-1]))
                    oks[judged[-1]] = all(p.get("ok") for p in per.values())
                    verdict = "PASSES " + ",".join(d for d in judged if oks.get(d)) if any(oks.values()) else "fails"
                    detail = summary(per)
                except Timeout:
                    verdict, detail = "timeout", f"> {CASE_S} s"
                except Exception as e:  # noqa: BLE001 - a render may fail in any way; record it
                    verdict, detail = "error", f"{type(e).__name__}: {str(e)[:160]}"
                finally:
                    signal.alarm(0)
                passed += verdict.startswith("PASSES")
                print(f"{name:26} {v.tag:24} {bug:17} {label:18} {rd:4} {small} (menu {menu}) "
                      f"{verdict} {detail} {time.time() - t0:.1f}s", flush=True)
    print(f"{passed} bug renders passed gpu-check's comparison (or clean renders failed it)")
    return passed


if __name__ == "__main__":
    what, mods = sys.argv[1], tuple(sys.argv[2:])
    sys.exit(1 if {"static": static, "triton": triton}[what](mods) else 0)
