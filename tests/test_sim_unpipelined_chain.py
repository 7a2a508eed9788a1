"""An unpipelined K loop (num_stages=1) waits a DRAM round trip a step (sim.chain_floor_s), a pipelined one a round trip
every num_stages - 1 steps: gemm_fp16_triton's
broadcast_sum at M=16 N=K=8192, timed by gpu-check on the H200 (seed 50505) and the H100 (seed 40404), ran
344-411 us where the roofline model said 53-99 us; its register figure is ptxas's, not the product's."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import modelled_launch, simulate
from kernelstrain.tasks import make_task

M16 = {"M": 16, "N": 8192, "K": 8192}
# (gpu, dtype, tile, measured us): gpu-check H200 s50505 (default / kernelinfer) and H100 s40404 (kernelinfer)
MEASURED = (("H200", "bf16", (16, 16, 16), 370.1), ("H200", "fp16", (16, 32, 8), 411.3),
            ("H200", "fp16", (32, 16, 16), 366.8), ("H100", "fp16", (16, 32, 16), 353.2),
            ("H100", "fp16", (32, 16, 16), 344.0))


def _tile(bm, bn, bk):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}


@pytest.mark.parametrize("gpu, dtype, tile, measured_us", MEASURED)
def test_broadcast_sum_at_one_wave_takes_its_latency_chain(gpu, dtype, tile, measured_us):
    m = REGISTRY["gemm_fp16_triton"]
    v = m.variant("broadcast_sum")
    r = simulate(m, v, _tile(*tile), make_task(m, gpu, dtype, M16))
    assert r.ok and 0.8 <= r.time_ms * 1e3 / measured_us <= 1.25      # was 0.14-0.29


def test_the_chain_counts_a_round_trip_per_new_sector_and_only_unpipelined():
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "H200", "fp16", M16)
    bk16 = modelled_launch(m, m.variant("broadcast_sum"), _tile(16, 16, 16), task)
    bk8 = modelled_launch(m, m.variant("broadcast_sum"), _tile(16, 16, 8), task)
    assert bk16.serial_trips == 512 and bk8.serial_trips == 512      # 8192 / 16 steps; 1,024 half-sector steps
    dot = m.variant("tl_dot_blocked")
    assert modelled_launch(m, dot, dot.defaults(), task).serial_trips == 8192 / 32
    for tag in ("pipelined_stages", "persistent_tma"):       # num_stages - 1 steps' loads run ahead of the math
        v = m.variant(tag)
        p = v.defaults()
        steps = 8192 // p["BLOCK_K"]
        assert modelled_launch(m, v, p, task).serial_trips == steps / (p["num_stages"] - 1)
        assert modelled_launch(m, v, {**p, "num_stages": 2}, task).serial_trips == steps


# H100 gpu-check s88339 (held out), M=16 N=K=8192 bf16, 8 warps, 3 stages: (rung, tile, measured us)
PIPELINED_M16 = (("pipelined_stages", (64, 64, 32), 107.5), ("pipelined_stages", (64, 128, 64), 68.7),
                 ("persistent_tma", (64, 128, 128), 54.9))


def test_a_pipelined_loop_of_many_short_steps_waits_its_round_trips():
    """128 programs of 256 K steps each, two steps' loads in flight: the round trips, not the bandwidth, set the time
    (the model had 53.4 us, the fastest of the three, before the pipelined chain)."""
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "H100", "bf16", M16)
    got = {tile: simulate(m, m.variant(tag), {**_tile(*tile), "num_stages": 3, "num_warps": 8}, task).time_ms * 1e3
           for tag, tile, _ in PIPELINED_M16}
    assert max(got, key=got.get) == (64, 64, 32)
    assert 0.8 <= got[(64, 64, 32)] / 107.5 <= 1.25


def test_split_k_shortens_each_programs_chain():
    m = REGISTRY["gemm_splitk_triton"]
    task = make_task(m, "H200", "fp16", {"M": 16, "N": 4096, "K": 14336})
    v = m.variant("split_k_reduce")
    one, eight = (modelled_launch(m, v, {**v.defaults(), "SPLIT_K": s}, task) for s in (2, 8))
    assert one.serial_trips == 4 * eight.serial_trips > 0


# ptxas's registers (Triton 3.9, sm_90a, 4 warps; cuobjdump --dump-resource-usage) of broadcast_sum tiles
PTXAS_REGS = (((16, 16, 16), 44), ((16, 32, 8), 50), ((32, 16, 16), 48), ((32, 32, 8), 54), ((32, 32, 16), 56),
              ((32, 64, 8), 72), ((16, 64, 16), 56), ((32, 64, 16), 79))


@pytest.mark.parametrize("tile, regs", PTXAS_REGS)
def test_broadcast_sum_registers_are_ptxas_figure(tile, regs):
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "H100", "fp16", {"M": 128, "N": 4096, "K": 14336})
    assert abs(modelled_launch(m, m.variant("broadcast_sum"), _tile(*tile), task).regs - regs) <= 8
