"""Compile a sample of the op modules' tuning knobs (kernelstrain/ops/unroll.py, WIDENED) with the real tools.

    python3 scripts/compile_knobs.py [MODULE ...] [--seed 0] [--json F]

For every rung that has a knob, every target its module runs on (nvcc 13 for sm_80, sm_89,
sm_90a, sm_120a; clang++ with HIP headers for gfx942 where the module has HIP targets; Triton's AOT
compile for cuda:90 and hip:gfx942): candidates with the knob set, targets and knob values taken
in turn until each target and each value is built at least once, the rung's other parameters
drawn from its grid among those the simulator runs (seeded). Prints one line per failure and the counts per tool; exit 1 on a failure.
Without MODULE: every registered module whose rungs have a knob or a WIDENED value.

    python3 scripts/compile_knobs.py --generic [MODULE ...]

The generic Triton knobs (kernelstrain/knobs_triton.py) instead: every rung of every Triton module (or those
named), at its defaults and check shape on the H100, built by Triton's compiler for sm_90a with each knob value
where the knob has a place: a build that fails is a failure; one whose PTX carries the knob's mark (the hint on a
load or cp.async) no more often than the rung's own is `ignored` (the compiler dropped it).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.unroll import NAMES  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402

# one GPU of each target the project compiles for (compilers.NVCC_GENCODE, Triton's targets)
TARGET_GPUS = {"cuda": ("A100", "RTX4090", "H100", "RTX5090", "MI300X"), "triton": ("H100", "MI300X")}


# parameter values added to a module's own ranges for room to tune (issue 26 item 2): built like a knob's;
# a PARAM@RUNG key names the values of that rung only (other rungs of the module range over the param too)
WIDENED = {"cross_entropy_bwd_triton": {"BLOCK": (8192,), "num_warps": (16,)},
           "dropout_cuda": {"threads": (1024,), "unroll": (8,)},
           "swiglu_fwd_triton": {"num_warps": (2, 16)}, "swiglu_bwd_triton": {"num_warps": (2, 16)},
           "kv_append_cuda": {"warps": (16,)},
           "moe_combine_cuda": {"threads": (512,), "tokens_per_block": (8,)},
           # tiled tensor-core families: K depth of a trip, deeper rings, m64n256 wgmma, thinner tiles
           "grouped_gemm_cuda": {"BK": (16, 32, 64, 128), "STAGES": (5, 6), "BN": (256,), "BM": (32,)},
           "flash_prefill_cuda": {"BLOCK_M": (32,), "BLOCK_N": (128,), "stages": (4,)},
           "chunked_prefill_cuda": {"BLOCK_M": (32,), "BLOCK_N": (128,)},
           "paged_decode_cuda": {"keys_per_step": (2, 8), "stages": (3, 4)},
           "swa_decode_cuda": {"keys_per_step": (2, 8), "stages": (3, 4)},
           "gemm_int4_cuda": {"BK": (32, 128), "STAGES": (5,), "SPLITS": (16,)},
           "conv2d_nhwc_cuda": {"BK": (16, 64), "BM": (32,), "BN": (32,)}, "gemm_fp4_cuda": {"stages": (5, 6), "BN": (32,)},
           "mamba_step_cuda": {"channels": (128,)},
           "selective_scan_cuda": {"items@vectorized_regs": (16,)},
           "selective_scan_triton": {"BLOCK_D": (1,)},
           "rmsnorm_triton": {"programs_per_sm@persistent": (8,)},
           "moe_scatter_cuda": {"threads": (64, 512)},
           "transpose_cuda": {"tile": (128,), "block_rows": (2,)},
           "prefix_scan_cuda": {"items": (8,), "items@warp_shuffle_scan": (2, 4)},
           "min_p_cuda": {"vecs": (2, 4)},
           "swiglu_fwd_cuda": {"threads@unrolled_ilp": (64, 1024), "unroll": (8,)},
           "rope_cuda": {"items": (2, 4)},         # vectorized_uint4
           "paged_kv_copy_cuda": {"items": (2, 4)},
           "causal_conv1d_cuda": {"threads@register_strip": (512,), "strip": (256, 8192), "items": (2, 4, 8)},
           "gemv_cuda": {"warps": (16,)}}


def knob_rungs(m) -> list:
    """(rung, parameter name, values to build): the unroll knobs' non-default values, and WIDENED's."""
    added = WIDENED.get(m.name, {})
    out = [(v, p.name, [x for x in p.values if x != p.default] if p.name in NAMES
            else [x for x in added.get(f"{p.name}@{v.tag}", added.get(p.name, ())) if x in p.values])
           for v in m.variants for p in v.params]
    return [(v, name, values) for v, name, values in out if values]


def tool_of(m, task) -> str:
    return ("clang-hip" if task.is_hip else "nvcc") if m.impl == "cuda" else "triton"


def build(m, v, params, task):
    src = m.render(v, params, task)
    if m.impl == "triton":
        return compile_triton(src, m.compile_specs(v, params, task), task.gpu.arch)
    if task.is_hip:
        return compile_hip(src, task.gpu.arch, f"{m.op}_kernel")
    return compile_cuda(src, task.gpu.arch, f"{m.op}_kernel")


def runs_on(m, v, gpu) -> bool:
    """The rung is a task on this GPU and its target's compiler is here."""
    if not any(m.supports(gpu, d) for d in (v.dtypes or m.dtypes)) or v.needs - gpu.features:
        return False
    return not (gpu.vendor == "amd" and m.impl == "cuda" and not find_hip_compiler())


def sample(m, rng) -> list:
    """(variant, params, task) to build: per knob rung, every target and every knob value, taken
    in turn (as many candidates as the larger of the two)."""
    out = []
    for v, knob, values in knob_rungs(m):
        grid = [p for p in param_grid(v) if p[knob] in values]
        targets = [g for g in TARGET_GPUS[m.impl] if runs_on(m, v, GPUS[g])]
        for i in range(max(len(targets), len(values)) if targets else 0):
            g, value = targets[i % len(targets)], values[i % len(values)]
            dtypes = [d for d in (v.dtypes or m.dtypes) if m.supports(GPUS[g], d)]
            task = make_task(m, g, rng.choice(dtypes), rng.choice(m.shapes))
            # a candidate the simulator fails (shared memory, registers past the block) fails the tool too
            runnable = [p for p in grid if p[knob] == value and simulate(m, v, p, task).ok]
            if runnable:
                out.append((v, rng.choice(runnable), task))
    return out


# what the PTX of a build with the knob's value carries
PTX_MARKS = {("evict", 1): "evict_first", ("evict", 2): "evict_last"}


def generic(names: list) -> int:
    """Build every Triton rung with each generic knob value where it has a place (see the docstring)."""
    from kernelstrain import knobs_triton
    from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target
    triton, _, ASTSource = _import_triton()
    built = failed = ignored = 0
    for name in names or sorted(n for n, m in REGISTRY.items() if m.impl == "triton"):
        m = REGISTRY[name]
        for v in m.variants:
            task = make_task(m, "H100", (v.dtypes or m.dtypes)[0], m.check_shape or m.shapes[0])
            params = v.defaults()
            code = m.render(v, params, task)
            places = knobs_triton.places(code)

            def ptx(knob, value):
                ns, text = load_triton_source(knobs_triton.apply_code(code, {knob: value})), ""
                for spec in m.compile_specs(v, params, task):
                    signature, constexprs, attrs = launch_specialization(spec)
                    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
                    text += triton.compile(ASTSource(fn=ns[spec.name], signature=signature, constexprs=constexprs,
                                                     attrs=attrs), target=triton_target("sm_90a"), options=options).asm["ptx"]
                return text
            plain = None
            for knob, p in knobs_triton.KNOBS.items():
                for value in (p.values[1:] if places[knob] else ()):
                    mark = PTX_MARKS[(knob, value)]
                    try:
                        plain = ptx(knob, 0) if plain is None else plain
                        state = "ok" if ptx(knob, value).count(mark) > plain.count(mark) else "ignored"
                        why = ""
                    except Exception as e:      # the compiler's own text
                        text = str(e)
                        at = text.find("fatal")
                        state, why = "FAIL", ": " + " ".join((text[at:at + 200] if at >= 0 else text[-160:]).split())
                    built, failed, ignored = built + 1, failed + (state == "FAIL"), ignored + (state == "ignored")
                    print(f"{state:7} {name} {v.tag} {knob}={value}{why}", flush=True)
    print(f"{built} builds, {failed} failed, {ignored} ignored by the compiler")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the per-module counts here")
    ap.add_argument("--generic", action="store_true", help="the generic Triton knobs (knobs_triton.py) instead")
    a = ap.parse_args()
    if a.generic:
        return generic(a.modules)
    names = a.modules or sorted(n for n, m in REGISTRY.items() if knob_rungs(m))
    rng = random.Random(a.seed)
    counts: dict = {}
    for name in names:
        m = REGISTRY[name]
        for v, params, task in sample(m, rng):
            r = build(m, v, params, task)
            tool = tool_of(m, task)
            c = counts.setdefault(name, {}).setdefault(tool, {"compiled": 0, "failed": 0})
            c["compiled" if r.ok else "failed"] += 1
            if not r.ok:
                print(f"FAIL {name} {v.tag} {params} {task.gpu.name} {task.dtype} {dict(task.shape)}: "
                      f"{r.log.strip().splitlines()[0] if r.log.strip() else r.error_class}")
        print(name, json.dumps(counts.get(name, {})), flush=True)
    total: dict = {}
    for per in counts.values():
        for tool, c in per.items():
            t = total.setdefault(tool, {"compiled": 0, "failed": 0})
            t["compiled"] += c["compiled"]
            t["failed"] += c["failed"]
    print("total", json.dumps(total))
    if a.json:
        Path(a.json).write_text(json.dumps({"modules": counts, "total": total}, indent=1) + "\n")
    return 1 if any(t["failed"] for t in total.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
