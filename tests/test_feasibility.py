"""Physical feasibility (kernelstrain/feasibility.py, issue 30): alignment and descriptor rules decide
what a candidate can be at a task's shape, in `kernelstrain sim` and the engine alike."""
import random
import re

import pytest

from kernelstrain import feasibility
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.base import DTYPE_BYTES
from kernelstrain.ops.contract import Arg
from kernelstrain.shapes import constraints, sim_report
from kernelstrain.sim import simulate, writable
from kernelstrain.tasks import make_task, param_grid

# rungs whose name says they move rows with 16-byte vectors, 16-byte cp.async, TMA or bulk copies
EXPLICIT = re.compile(r"uint4|float4|(^|_)tma(_|$)|cp_async|bulk|dp4a")


def odd_shape(module, shape: dict) -> dict:
    """`shape` with every shape-dependent innermost dim of a data tensor made odd (where the module's
    documented constraints allow it): no such row is then a multiple of 4 bytes."""
    cons, out = constraints(module), dict(shape)
    for a in module.entry.args:
        if isinstance(a, Arg) and len(a.dims) >= 2 and isinstance(a.dims[-1], str) and a.dims[-1] in module.dims:
            mult, _, choices = cons[a.dims[-1]]
            if choices is None and mult % 2 and out[a.dims[-1]] % 2 == 0:
                out[a.dims[-1]] += -1 if out[a.dims[-1]] > 2 else 1
    return out


def data_rows_odd(module, task) -> bool:
    """Every row of the task's dtype the rules check is odd in elements (so misaligned for every rule)."""
    own = [row for _, row, of_task in feasibility.rows(module, task) if of_task]
    return bool(own) and all(row % 4 for row in own) if DTYPE_BYTES[task.dtype] < 4 else \
        bool(own) and all(row % 8 for row in own)


def test_issue_example_picks_no_tma():
    """Rows of 777 fp16 are 1,554 bytes: no TMA descriptor, 16-byte vector or cp.async takes them."""
    for impl, tma in (("triton", "persistent_tma"), ("cuda", "wgmma_tma")):
        out = sim_report("H100", "gemm_fp16", impl, "fp16", "M=1000,N=3000,K=777")
        assert out["best_variant"] != tma
        m = REGISTRY[f"gemm_fp16_{impl}"]
        v = m.variant(tma)
        task = make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777})
        r = simulate(m, v, v.defaults(), task)
        assert not r.ok and r.error_class == "align" and "an illegal instruction was encountered" in r.error
        assert not writable(m, v, v.defaults(), task)
        aligned = make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 776})
        assert simulate(m, v, v.defaults(), aligned).ok and writable(m, v, v.defaults(), aligned)
    cuda = REGISTRY["gemm_fp16_cuda"]
    r = simulate(cuda, cuda.variant("cp_async_pipeline"), cuda.variant("cp_async_pipeline").defaults(),
                 make_task(cuda, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777}))
    assert not r.ok and r.error.startswith("torch.AcceleratorError: CUDA error: misaligned address")


def test_menu_shapes_break_no_rule():
    """Every menu shape keeps every rung (the generated datasets are unchanged by the rules)."""
    for m in REGISTRY.values():
        for shape in m.shapes:
            for dtype in m.dtypes:
                task = make_task(m, "H100", dtype, shape)
                for v in m.variants:
                    assert feasibility.violation(m, v, v.defaults(), task) is None, (m.name, v.tag, shape, dtype)


@pytest.mark.parametrize("name", sorted(n for n, m in REGISTRY.items() if m.entry is not None))
def test_no_ok_candidate_breaks_a_rule_at_odd_shapes(name):
    """Over odd shapes, every ok candidate's code moves no misaligned row with a 16-byte vector, a
    16-byte cp.async, a bulk copy or TMA; a rung named for such a mechanism is not ok where all rows
    are odd; Triton rungs without tensor descriptors still run (Triton narrows its loads itself)."""
    m = REGISTRY[name]
    for shape in m.shapes[:2]:
        s = odd_shape(m, shape)
        if s == shape:
            continue
        task = make_task(m, "H100", m.dtypes[0], s)
        for v in m.variants:
            combos = [v.defaults()] + [c for c in param_grid(v)][:: max(1, len(list(param_grid(v))) // 6)]
            for params in combos:
                r = simulate(m, v, params, task)
                found = feasibility.violation(m, v, params, task)
                assert r.ok is (found is None) or r.error_class in ("arch", "smem", "resources"), (v.tag, params)
                assert found is None or r.error_class in ("arch", "smem", "resources",
                                                          "align" if found[0] != "arange" else "syntax")
                assert writable(m, v, params, task) is False or found is None
                if r.ok and EXPLICIT.search(v.tag) and data_rows_odd(m, task):
                    pytest.fail(f"{name}/{v.tag} {params} is ok at {s}, whose every row is odd")
                code = m.render(v, params, task)
                if r.ok and m.impl == "triton":
                    assert "make_tensor_descriptor" not in code, (v.tag, s)
            if m.impl == "triton" and "make_tensor_descriptor" not in m.render(v, v.defaults(), task) \
                    and not (v.needs - task.gpu.features):
                found = feasibility.violation(m, v, v.defaults(), task)
                assert found is None or found[0] == "arange"


def test_on_chip_vectors_need_no_aligned_rows():
    """A float4 read of a shared-memory tile or a local array is aligned whatever K is: the smem-tiled
    split-K GEMM and the register-blocked GEMM run at K = 14335 / 2047; the cp.async rung does not."""
    m = REGISTRY["gemm_splitk_cuda"]
    task = make_task(m, "H100", "fp16", {"M": 1, "N": 4096, "K": 14335})
    assert simulate(m, m.variant("tiled"), m.variant("tiled").defaults(), task).ok
    assert not simulate(m, m.variant("cp_async_split_k"), m.variant("cp_async_split_k").defaults(), task).ok
    g = REGISTRY["gemm_fp16_cuda"]
    assert simulate(g, g.variant("register_blocked"), g.variant("register_blocked").defaults(),
                    make_task(g, "H100", "fp16", {"M": 2048, "N": 2048, "K": 2047})).ok


def test_amd_runs_misaligned_vectors():
    """gfx942 splits a misaligned global vector access in hardware: no rule applies there."""
    m = REGISTRY["rmsnorm_cuda"]
    v = m.variant("vectorized_uint4")
    assert simulate(m, v, v.defaults(), make_task(m, "MI300X", "fp16", {"T": 64, "D": 4095})).ok
    assert not simulate(m, v, v.defaults(), make_task(m, "H100", "fp16", {"T": 64, "D": 4095})).ok


def test_tile_rules_hold_for_every_tma_and_wgmma_rung():
    """Static rules of the instructions (TMA box <= 256 a dim and >= 16 bytes inner; wgmma M % 64,
    N % 8, K % 16 or 32) hold for every parameter combination the rungs offer."""
    checked = 0
    for m in REGISTRY.values():
        task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
        for v in m.variants:
            code = m.render(v, v.defaults(), task)
            tma = bool(re.search(r"cuTensorMapEncodeTiled|cp\.async\.bulk\.tensor|make_tensor_descriptor", code))
            wgmma = m.impl == "cuda" and "wgmma.mma_async" in code
            if not (tma or wgmma):
                continue
            for params in param_grid(v):
                for dtype in m.dtypes:
                    assert feasibility.tile_violation(v, params, DTYPE_BYTES[dtype], tma, wgmma) is None, \
                        (m.name, v.tag, params, dtype)
                    checked += 1
    assert checked > 50
    assert feasibility.tile_violation(REGISTRY["gemm_fp16_cuda"].variant("wgmma_tma"), {"BM": 96, "BN": 128}, 2,
                                      True, True) == "wgmma M tile 96 not a multiple of 64"


def test_engine_offers_no_misaligned_rung():
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777})
    e = Episode(m, task, {s: random.Random(s) for s in STREAMS}, budget=10, p_compile=0.0, p_wrong=0.0)
    assert "persistent_tma" not in [v.tag for v in e.rungs] and "pipelined_stages" in [v.tag for v in e.rungs]


def test_triton_narrows_loads_of_misaligned_rows():
    """Triton vectorizes only what it proves 16-byte divisible: at D = 4095 every load is one element, the
    memory side is slower by (loads multiplied) ** 0.19, as the H100 measured it (median 1.49x for bf16
    rmsnorm_triton at D=4095 vs 4096, 1.29x for fp32 softmax_triton at C=31999 vs 32000, 1.00x for the
    tensor-core gemm_fp16_triton at K=777 vs 776: measurements/h100_gpucheck_kigrid.json)."""
    from kernelstrain.sim import narrowed
    from kernelstrain.tasks import best_config
    m = REGISTRY["rmsnorm_triton"]
    odd, even = (make_task(m, "H100", "fp16", {"T": 4096, "D": d}) for d in (4095, 4096))
    v = m.variant("persistent")
    launch = m.launch(v, v.defaults(), odd)
    assert narrowed(m, v, launch, odd).narrow == pytest.approx((launch.bytes_per_access / 2) ** 0.19)
    assert narrowed(m, v, launch, odd).traffic == launch.traffic     # the fitted traffic exponent is the re-reads'
    assert launch.narrow == 1.0
    assert narrowed(m, v, m.launch(v, v.defaults(), even), even) == m.launch(v, v.defaults(), even)
    assert narrowed(m, v, launch, odd).bytes_per_access == launch.bytes_per_access     # as many bytes in flight
    ratio = simulate(m, v, v.defaults(), odd).time_ms / simulate(m, v, v.defaults(), even).time_ms
    assert 1.40 / 1.25 < ratio < 1.40 * 1.25          # measured 45.3 / 32.5 us = 1.40x for this candidate (H100)
    per_byte = [best_config(m, t)[0] / m.cost(t).bytes for t in (odd, even)]
    assert 1.1 * per_byte[1] < per_byte[0] < 2.0 * per_byte[1]
    g = REGISTRY["gemm_fp16_triton"]
    k777, k776 = (make_task(g, "H100", "fp16", {"M": 1000, "N": 3000, "K": k}) for k in (777, 776))
    tile = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    ratio = simulate(g, g.variant("tl_dot_blocked"), tile, k777).time_ms / simulate(g, g.variant("tl_dot_blocked"), tile, k776).time_ms
    assert ratio < 1.1                                              # measured 0.98x: the GEMM is compute-bound


# (module, rung, shape): Triton rungs that bind a tl.arange range to a dim of the task (a head dim of
# 96, 6 KV heads, TOKENS x 6 rows), and one that pads it
ARANGE_CASES = (("int8_kv_quant_triton", "program_per_head", {"N": 64, "H": 8, "Dh": 96, "S": 65536}, False),
                ("int8_kv_quant_triton", "multi_token_tile", {"N": 64, "H": 6, "Dh": 128, "S": 65536}, False),
                ("rope_triton", "token_program", {"T": 64, "H": 32, "D": 96}, False),
                ("int8_kv_quant_triton", "fused_kv", {"N": 64, "H": 6, "Dh": 128, "S": 65536}, True),
                ("rope_triton", "flat_pairs", {"T": 64, "H": 32, "D": 96}, True))


@pytest.mark.parametrize("name,tag,shape,runs", ARANGE_CASES)
def test_non_power_of_2_arange_is_triton_s_compile_error(name, tag, shape, runs):
    """A tl.arange range bound to a dim that is not a power of 2 does not compile: the simulator's text
    is Triton's CompilationError, character for character (checked against Triton where installed)."""
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", "fp16", shape)
    r = simulate(m, v, v.defaults(), task)
    assert r.ok is runs and writable(m, v, v.defaults(), task) is runs
    if not runs:
        assert r.error_class == "syntax" and r.error.endswith("arange's range must be a power of 2")
    pytest.importorskip("triton", reason="Triton's compiler checks the text (extra [verify])")
    from kernelstrain.compilers import compile_triton
    real = compile_triton(m.render(v, v.defaults(), task), m.compile_specs(v, v.defaults(), task), "sm_90a")
    assert real.ok is runs
    if not runs:
        assert r.error.strip() in real.log


# -- the property sweep (issue 30 item 2): at every shape `kernelstrain sim` accepts, no ok candidate breaks a rule

def row_dims(module) -> list:
    """The module's dims that are the innermost dim of a data tensor and free (no choices): what sets a row's bytes."""
    cons = constraints(module)
    return sorted({a.dims[-1] for a in module.entry.args if isinstance(a, Arg) and len(a.dims) >= 2
                   and a.dims[-1] in module.dims and cons[a.dims[-1]][2] is None})


def swept_shapes(module) -> list:
    """Shapes off the menu that `sim` accepts: every row dim of the first menu shape moved down by 1, 2, 4 and 8
    elements (rows odd, 2 mod 4, 4 mod 8 and 8 mod 16 bytes for 1-byte data: each rule's edge), one row dim at a
    time odd, each row dim at its least allowed value (tiny) and 64x + its multiple (huge)."""
    cons, base = constraints(module), dict(module.shapes[0])
    dims = row_dims(module)

    def ok(d, v):
        mult, cap, _ = cons[d]
        return 1 <= v <= cap and v % mult == 0

    out = []
    for k in (1, 2, 4, 8):
        s = {**base, **{d: base[d] - k * cons[d][0] for d in dims if ok(d, base[d] - k * cons[d][0])}}
        out.append(s)
    for d in dims:
        out.append({**base, d: base[d] - cons[d][0]} if ok(d, base[d] - cons[d][0]) else base)
        out.append({**base, d: cons[d][0]})
        out.append({**base, d: 64 * base[d] + cons[d][0]} if ok(d, 64 * base[d] + cons[d][0]) else base)
    unique = []
    for s in out:
        if s != base and s not in unique and all(ok(d, v) for d, v in s.items() if cons[d][2] is None):
            unique.append(s)
    return unique


def accepted(module, gpu: str, dtype: str, shape: dict) -> dict | None:
    """`kernelstrain sim`'s report at this shape, or None where it refuses it (a usage error)."""
    from kernelstrain.errors import UsageError
    text = ",".join(f"{d}={v}" for d, v in shape.items())
    try:
        return sim_report(gpu, module.op, module.impl, dtype, text)
    except UsageError:
        return None


def every_row_odd(module, task) -> bool:
    """Every row of every 2-D-or-more tensor of the entry is an odd number of elements (read off the entry's
    Args, not feasibility.rows: an independent account of what no vector, cp.async or TMA can take)."""
    shapes = [a.shape(task) for a in module.entry.args if isinstance(a, Arg) and len(a.dims) >= 2]
    return bool(shapes) and all(int(sh[-1]) % 2 for sh in shapes)


def sampled_params(v) -> list:
    grid = list(param_grid(v))
    return [v.defaults()] + grid[:: max(1, len(grid) // 3)]


@pytest.mark.parametrize("name", sorted(n for n, m in REGISTRY.items() if m.entry is not None))
def test_sweep_no_ok_candidate_breaks_a_rule(name):
    """Over shapes off the menu (rows odd, 2/4/8 bytes off a 16-byte multiple, tiny and huge dims) that `sim`
    accepts, on the H100 (TMA, wgmma, cp.async, bulk copies): every candidate feasibility.violation names fails
    with an alignment (or, for a Triton arange, the compiler's) error and is not writable; every ok one breaks no
    rule; `sim`'s best is such a candidate; a rung named for 16-byte vectors, cp.async, TMA or bulk copies is
    never ok where every data row is odd; and the engine offers no rung and records no ok step that breaks one."""
    m = REGISTRY[name]
    checked = 0
    for s in swept_shapes(m):
        for dtype in m.dtypes:
            report = accepted(m, "H100", dtype, s)
            if report is None:
                continue
            task = make_task(m, "H100", dtype, s)
            best = m.variant(report["best_variant"])
            assert feasibility.violation(m, best, report["best_params"], task) is None, (s, dtype, report)
            assert writable(m, best, report["best_params"], task)
            for v in m.variants:
                for params in sampled_params(v):
                    r = simulate(m, v, params, task)
                    found = feasibility.violation(m, v, params, task)
                    checked += 1
                    if found is not None:
                        assert not r.ok and r.error_class in ("arch", "smem", "resources", "align", "syntax"), \
                            (v.tag, params, s, dtype, found)
                        assert not writable(m, v, params, task)
                        if r.error_class == "align":
                            assert feasibility.RUNTIME[found[0]] in r.error
                    if r.ok and m.impl == "cuda" and EXPLICIT.search(v.tag) and every_row_odd(m, task):
                        pytest.fail(f"{name}/{v.tag} {params} is ok at {s} {dtype}, whose every row is odd")
    assert checked or not row_dims(m)


@pytest.mark.parametrize("name", ["gemm_fp16_cuda", "gemm_fp16_triton", "gemm_int8_cuda", "gemm_fp8_cuda",
                                  "rmsnorm_cuda", "flash_prefill_cuda", "paged_decode_cuda", "embedding_gather_cuda"])
def test_engine_and_sim_agree_at_misaligned_rows(name):
    """At rows one element short of the menu's, the engine's rungs and every ok step it records break no rule,
    and each ok step is what `sim` times ok (the same candidate, simulate)."""
    m = REGISTRY[name]
    for s in swept_shapes(m)[:2]:
        task = make_task(m, "H100", m.dtypes[0], s)
        e = Episode(m, task, {st: random.Random(st) for st in STREAMS}, budget=12, p_compile=0.0, p_wrong=0.0)
        assert all(feasibility.violation(m, v, v.defaults(), task) is None for v in e.rungs)
        for step in e.run():
            v = m.variant(step.tag)
            params = {**v.defaults(), **step.params}
            if step.status == "ok":
                assert feasibility.violation(m, v, params, task) is None, (step.tag, params, s)
                assert simulate(m, v, params, task).ok
