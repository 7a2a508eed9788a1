"""No rung beats the hardware: at every menu shape of every module, on the cards the fit was measured on (H100, H200),
no configuration a task can offer is simulated faster than the GPU catalog allows for its instruction class -- its
FLOPs at the tensor peak of its datapath (an mma.sync rung on Hopper at gpus.mma_sync_rate of it: the wgmma rate is
not its to reach; an FMA rung at the fp32 peak) or its bytes at the DRAM bandwidth. A calibration term carried past
the sizes its rows measured broke this: flash_prefill_cuda's mma_sync, whose size exponent (-0.415) was taken over
its module's range of roofline floors (3.5-513 us) while its own rows span 3.5-35 us, was timed at 0.88 ms at B=4
H=32 S=4096 D=128 fp16 on the H100 (625 TFLOP/s; mma.sync issues at most 494 there; its fastest row ran 204)."""
import pytest

from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate, writable
from kernelstrain.tasks import make_task, param_grid

CARDS = ("H100", "H200")


def instruction_peak(module, variant, gpu) -> float:
    """FLOP/s the rung's instruction class can issue: its datapath's peak, an mma.sync rung's (CUDA code needing
    "mma" and not "wgmma") at the catalog's mma.sync share of it."""
    peak = gpu.peak(variant.path)
    if module.impl == "cuda" and "mma" in variant.needs and "wgmma" not in variant.needs:
        peak *= gpu.mma_sync_scale(variant.path)
    return peak


def bound_ms(module, variant, task) -> float:
    """The least time the catalog allows one launch of the rung: its FLOPs at its instruction peak or its bytes at
    the DRAM bandwidth, whichever is longer."""
    cost = module.cost(task)
    flops = cost.flops / instruction_peak(module, variant, task.gpu) if cost.flops else 0.0
    return max(flops, cost.bytes / (task.gpu.bw_tbs * 1e12)) * 1e3


def fastest(module, variant, task):
    """(simulated ms, params) of the rung's fastest configuration a task offers (writable, builds), or None."""
    timed = [(r.time_ms, p) for p in param_grid(variant)
             if writable(module, variant, p, task) and (r := simulate(module, variant, p, task)).ok]
    return min(timed, key=lambda tp: tp[0]) if timed else None


def violations(modules=None, cards=CARDS) -> list:
    """(module, rung, card, dtype, shape, simulated ms, bound ms, params) of every rung faster than its bound."""
    out = []
    for name in modules or sorted(REGISTRY):
        module = REGISTRY[name]
        if hasattr(module, "simulate"):          # a fused program: a sum of registry kernels, each checked alone
            continue
        for card in (c for c in cards if GPUS[c].vendor in module.vendors):
            for dtype in module.dtypes:
                for shape in module.shapes:
                    task = make_task(module, card, dtype, shape)
                    for variant in module.variants:
                        if variant.needs - task.gpu.features:
                            continue
                        best = fastest(module, variant, task)
                        if best and best[0] < bound_ms(module, variant, task):
                            out.append((name, variant.tag, card, dtype, shape, best[0], bound_ms(module, variant, task),
                                        best[1]))
    return out


def test_instruction_peak_of_mma_sync_on_hopper():
    m = REGISTRY["flash_prefill_cuda"]
    assert instruction_peak(m, m.variant("mma_sync"), GPUS["H100"]) == pytest.approx(494.5e12)
    assert instruction_peak(m, m.variant("wgmma_warpgroup"), GPUS["H100"]) == pytest.approx(989e12)
    assert instruction_peak(m, m.variant("mma_sync"), GPUS["A100"]) == pytest.approx(312e12)
    assert instruction_peak(m, m.variant("online_softmax"), GPUS["H100"]) == pytest.approx(67e12)


def test_flash_prefill_mma_sync_at_the_large_menu_shape_is_under_the_mma_sync_peak():
    """The case found (above): mma.sync's 494 TFLOP/s on the H100 bound it at 1.11 ms."""
    m = REGISTRY["flash_prefill_cuda"]
    task = make_task(m, "H100", "fp16", {"B": 4, "H": 32, "S": 4096, "D": 128})
    v = m.variant("mma_sync")
    t, _ = fastest(m, v, task)
    assert bound_ms(m, v, task) == pytest.approx(1.1117, rel=1e-3)
    assert t >= bound_ms(m, v, task)


@pytest.mark.slow
def test_no_rung_beats_its_instruction_peak_or_the_dram_bandwidth():
    assert violations() == []
