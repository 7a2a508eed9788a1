"""The generic Triton knobs (kernelstrain/knobs_triton.py): written where their text has a place, never
elsewhere, NVIDIA's only, and what the compiler makes of them."""
import re

import pytest

from kernelstrain import knobs, knobs_triton
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

TRITON = sorted(n for n, m in REGISTRY.items() if m.impl == "triton")


def _render(name, tag, gpu="H100"):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, gpu, m.dtypes[0], m.check_shape or m.shapes[0])
    return m, v, task, m.render(v, v.defaults(), task)


@pytest.mark.parametrize("name", TRITON)
def test_hints_go_on_the_main_loops_loads_only(name):
    m = REGISTRY[name]
    for v in m.variants:
        _, _, _, code = _render(name, v.tag)
        assert knobs_triton.apply_code(code, {}) == code
        places = knobs_triton.places(code)
        loads = knobs_triton._loads(code)
        hinted = knobs_triton.apply_code(code, {"evict": 1, "cache": 1})
        if not places["evict"]:
            continue
        for text in ('eviction_policy="evict_first"', 'cache_modifier=".cg"'):
            assert hinted.count(text) - code.count(text) == len(loads) > 0
        # the other loads of the kernel are as written: removing the hints gives the code back
        assert hinted.replace(', eviction_policy="evict_first", cache_modifier=".cg"', "") == code
        body = code[slice(*knobs_triton._main_loop(code))]
        assert all(code[a:b] in body for a, b in loads)


def test_a_load_with_its_own_hint_leaves_no_place():
    _, _, _, code = _render("cross_entropy_bwd_triton", "persistent_evict_first")
    assert "eviction_policy" in code and not knobs_triton.places(code)["evict"]


def test_maxnreg_joins_every_launch_and_only_once():
    _, _, _, code = _render("rmsnorm_triton", "chunked_two_pass")
    out = knobs_triton.apply_code(code, {"maxnreg": 64})
    assert out.count("maxnreg=64") == len(re.findall(r"\bnum_warps=", code)) > 0
    assert not knobs_triton.places(out)["maxnreg"]


def test_no_register_cap_on_a_tensor_core_kernel():
    _, _, _, code = _render("gemm_fp16_triton", "pipelined_stages")
    assert "tl.dot(" in code and not knobs_triton.places(code)["maxnreg"] and knobs_triton.places(code)["evict"]


def test_triton_knobs_are_offered_on_nvidia_only():
    m, v, task, code = _render("rmsnorm_triton", "chunked_two_pass")
    names = tuple(knobs_triton.KNOBS)
    on_h100 = {p.name for p in knobs.extend(v, "triton", code, names, GPUS["H100"]).params}
    on_mi300 = {p.name for p in knobs.extend(v, "triton", code, names, GPUS["MI300X"]).params}
    assert set(names) <= on_h100 and not set(names) & on_mi300
    # and never on a CUDA rung
    c = REGISTRY["rmsnorm_cuda"]
    cv = c.variants[-1]
    assert not set(names) & {p.name for p in knobs.extend(cv, "cuda", c.render(cv, cv.defaults(), task), names).params}


def _compiled(code, m, v, task, maxnreg=0):
    pytest.importorskip("triton")
    from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target
    triton, _, ASTSource = _import_triton()
    spec = m.compile_specs(v, v.defaults(), task)[0]
    signature, constexprs, attrs = launch_specialization(spec)
    src = ASTSource(fn=load_triton_source(code)[spec.name], signature=signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(src, target=triton_target(task.gpu.arch), options=options)


def test_the_compiler_writes_each_knob_into_the_kernel():
    m, v, task, code = _render("rmsnorm_triton", "chunked_two_pass")
    plain = _compiled(code, m, v, task)
    loads = [line for line in plain.asm["ptx"].splitlines() if "ld.global" in line]
    assert loads and not any("evict" in line or ".cg" in line for line in loads)
    for params, mark in (({"evict": 1}, "L1::evict_first"), ({"evict": 2}, "L1::evict_last"), ({"cache": 1}, "ld.global.cg")):
        ptx = _compiled(knobs_triton.apply_code(code, params), m, v, task).asm["ptx"]
        assert any(mark in line for line in ptx.splitlines() if "ld.global" in line), params
    assert ".maxnreg 32" in _compiled(code, m, v, task, maxnreg=32).asm["ptx"] and ".maxnreg" not in plain.asm["ptx"]


# (module, rung, shape, cap, bytes of stack ptxas gives the capped kernel): Triton 3.9, sm_90a, the rung's defaults
# (scripts/knobs_device.py's comment; the uncapped kernels: 39, 39, 58, 120 and 40 registers, no stack)
SPILLED = [("rmsnorm_triton", "chunked_two_pass", {"T": 4096, "D": 4096}, 32, 16),
           ("softmax_triton", "chunked_three_pass", {"R": 4096, "C": 32000}, 32, 16),
           ("cross_entropy_fwd_triton", "online_softmax", {"T": 512, "V": 128256}, 32, 152),
           ("paged_decode_triton", "split_kv", {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}, 32, 352),
           ("paged_decode_triton", "split_kv", {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}, 64, 72),
           ("rmsnorm_triton", "persistent", {"T": 4096, "D": 4096}, 32, 24)]


@pytest.mark.parametrize("name,tag,shape,cap,stack", SPILLED)
def test_a_cap_ptxas_spills_under_is_never_faster_in_the_model(name, tag, shape, cap, stack):
    """Device-unverified: the sign from the compiler's facts alone (a cap under the kernel's count spills to
    local memory; these memory-bound kernels already run enough warps to cover DRAM's latency)."""
    from kernelstrain.sim import simulate
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", "bf16" if "bf16" in m.dtypes else m.dtypes[0], shape)
    plain = simulate(m, v, v.defaults(), task).time_ms
    assert simulate(m, v, {**v.defaults(), "maxnreg": cap}, task).time_ms > plain * 1.02
