"""roomC's persistent_prefetch rung of the register-cached row kernels (kernelstrain/ops/persistent_rows.py)."""
import importlib

import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY, persistent_rows
from kernelstrain.ops.base import Rung
from kernelstrain.ops.norms import _persistent_norms
from kernelstrain.ops.quant import _fp8_persistent
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

MODULES = {"rmsnorm_cuda": "register_cached", "add_rmsnorm_cuda": "register_cached",
           "layernorm_cuda": "register_cached", "fp8_quant_cuda": "ptx_cvt_e4m3x2"}


def persistent(name: str):
    """The module's persistent_prefetch rung as KERNELSTRAIN_DEVICE_UNCHECKED=1 builds it, and the rung below it."""
    m = REGISTRY[name]
    below = m.variant(MODULES[name])
    if name == "fp8_quant_cuda":
        return m, persistent_rows.rung(below, _fp8_persistent.render, 1, _fp8_persistent.TITLE), below
    mod = importlib.import_module(type(m).__module__)
    render, carried = {"rmsnorm_cuda": (_persistent_norms.rmsnorm_src(mod.ENTRY), 2),
                       "add_rmsnorm_cuda": (_persistent_norms.add_rmsnorm_src(mod.ENTRY, getattr(mod, "SIG", "")), 4),
                       "layernorm_cuda": (_persistent_norms.layernorm_src(mod.ENTRY, getattr(mod, "SIG", "")), 3)}[name]
    return m, persistent_rows.rung(below, render, carried, _persistent_norms.TITLE), below


def test_off_the_menus_until_a_device_checks_it(monkeypatch):
    monkeypatch.delenv("KERNELSTRAIN_DEVICE_UNCHECKED", raising=False)
    assert persistent_rows.offered("nothing_cuda", "rung") == ()
    assert all(("persistent_prefetch" in [v.tag for v in REGISTRY[n].variants]) == (n in persistent_rows.CHECKED)
               for n in MODULES)
    monkeypatch.setenv("KERNELSTRAIN_DEVICE_UNCHECKED", "1")
    assert persistent_rows.offered("nothing_cuda", "rung") == ("rung",)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_grid_is_resident_and_waits_once(name, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_DEVICE_UNCHECKED", "1")
    m, rung, below = persistent(name)
    assert isinstance(rung, Rung) and rung.fit_as == below.tag
    task = make_task(m, "H100", "bf16", {"T": 16384, "D": 4096})
    for bps in (1, 2, 4, 8):
        p = {"threads": 256, "rows_per_block": 1, "blocks_per_sm": bps}
        out, cached = rung.launch(p, task), below.launch(p, task)
        assert out.grid == min(cached.grid, task.gpu.sms * bps) and out.rounds == 1
        assert out.regs > cached.regs          # the prefetched row (and the weight) held in registers
    one_row = make_task(m, "H100", "bf16", {"T": 1, "D": 4096})
    assert rung.launch({"threads": 256, "rows_per_block": 1, "blocks_per_sm": 2}, one_row).grid == 1


@pytest.mark.parametrize("name", sorted(MODULES))
def test_gains_only_where_the_grid_ran_in_waves(name, monkeypatch):
    """The prefetch removes the waves' latency chain: level with the rung below at one row, a few percent faster
    on many-wave grids of short rows, never under the DRAM floor."""
    monkeypatch.setenv("KERNELSTRAIN_DEVICE_UNCHECKED", "1")
    m, rung, below = persistent(name)

    def best(v, task, extra):
        times = [simulate(m, v, {"threads": t, "rows_per_block": 1, **extra}, task) for t in (128, 256, 512)]
        return min(r.time_ms for r in times if r.ok)
    few = make_task(m, "H100", "bf16", {"T": 1, "D": 4096})
    assert best(rung, few, {"blocks_per_sm": 2}) == pytest.approx(best(below, few, {}), rel=0.01)
    many = make_task(m, "H100", "bf16", {"T": 4096, "D": 4096})
    gain = best(below, many, {}) / min(best(rung, many, {"blocks_per_sm": b}) for b in (1, 2, 4, 8))
    assert 1.0 < gain < 1.25
    floor_ms = m.cost(many).bytes / (many.gpu.bw_tbs * 1e12) * 1e3
    assert best(rung, many, {"blocks_per_sm": 4}) > floor_ms


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_code_prefetches_before_it_reduces(name, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_DEVICE_UNCHECKED", "1")
    m, rung, _ = persistent(name)
    task = make_task(m, "H100", "bf16", {"T": 4096, "D": 4096})
    p = {"threads": 256, "rows_per_block": 2, "blocks_per_sm": 4}
    code = rung.source(p, task)
    assert "cudaDevAttrMultiProcessorCount" in code and "#define BLOCKS_PER_SM 4" in code
    loop = code[code.index("for (int group"):]
    reduce = "post_warp_total(" if "post_warp_total(" in loop else "warp_max("
    assert loop.index("load_row(next_x" if "next_x" in loop else "load_row(next") < loop.index(reduce)
    for bug in rung.bugs:
        assert rung.source(p, task, bug) != code, bug
    # the loop waits at a block barrier every trip: main_unroll credits it no loads in flight (knobs.main_loop_kind)
    assert knobs.main_loop_kind(code) == "barrier"
