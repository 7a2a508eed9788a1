"""Issue 30 (roomT): launch-model contradictions in roomT's Triton modules that the room26 device rows show
(measurements/h100_room26_roomT.json, h200_room26b_roomT.json), each fix beside the figure it answers."""
import json
from pathlib import Path

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROWS = json.loads((Path(__file__).resolve().parents[1] / "measurements" / "h100_room26_roomT.json").read_text())["rows"]
FP4 = {"M": 2048, "N": 4096, "K": 4096, "G": 32}
TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}


def _launch_and_time(module, tag, shape, gpu="H100", dtype="bf16", **params):
    m = REGISTRY[module]
    v = m.variant(tag)
    p = {**v.defaults(), **params}
    task = make_task(m, gpu, dtype, shape)
    return m.launch(v, p, task), simulate(m, v, p, task).time_ms


def _measured_ms(module, tag, shape, **params):
    (row,) = [r for r in ROWS if r["module"] == module and r["variant"] == tag and r["bug"] is None and r["ok"]
              and r["shape"] == shape and all(r["params"].get(k) == x for k, x in params.items())]
    return row["time_ms"]


def test_copies_gemm_registers_follow_the_compiler():
    """Triton 3.9, sm_90a, cuobjdump --dump-resource-usage of dequant_then_dot's GEMM: 236 registers at 128x128x64 on
    4 warps, 124 on 8, 96 at 64x64x64 on 4 (the model said 168 / 104 / 72)."""
    for warps, built in ((4, 236), (8, 124)):
        launch, _ = _launch_and_time("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=warps, **TILE)
        assert abs(launch.regs - built) <= 14, (warps, launch.regs, built)
    small, _ = _launch_and_time("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=4,
                                BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    assert abs(small.regs - 96) <= 14, small.regs


def test_four_warp_copies_gemm_is_not_a_wave_slower_than_eight():
    """H100: 4 warps 211.0 us, 8 warps 200.2 (1.05x); two 4-warp blocks an SM hold the 512 tiles in two full waves
    (the model at 3 blocks an SM said 321.0 us, 1.61x)."""
    t4 = _launch_and_time("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=4, **TILE)[1]
    t8 = _launch_and_time("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=8, **TILE)[1]
    dev4 = _measured_ms("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=4, **TILE)
    dev8 = _measured_ms("gemm_fp4_triton", "dequant_then_dot", FP4, num_warps=8, **TILE)
    assert dev4 / dev8 > 1 and 1.0 < t4 / t8 < 1.2, (t4, t8, dev4, dev8)
    assert abs(t4 / dev4 - 1) < 0.15, (t4, dev4)


LN = {"T": 2048, "D": 2048}
KERNELS = json.loads((Path(__file__).resolve().parents[1] / "measurements" / "h200_kernels.json").read_text())["kernels"]


def test_layernorm_bwd_programs_per_sm_order_and_times_follow_the_h100():
    """H100: 1 / 2 / 4 / 8 programs an SM 28.8 / 31.7 / 42.5 / 72.1 us (the reduce kernel's chain of P / 32 steps
    grows with the partial rows); the model without that chain said 23.5 / 20.9 / 30.3 / 52.1 (2 faster than 1)."""
    sims, devs = [], []
    for k in (1, 2, 4, 8):
        sims.append(_launch_and_time("layernorm_bwd_triton", "persistent_prefetch", LN, num_warps=8, programs_per_sm=k)[1])
        devs.append(_measured_ms("layernorm_bwd_triton", "persistent_prefetch", LN, num_warps=8, programs_per_sm=k))
    assert devs == sorted(devs) and sims == sorted(sims), (sims, devs)
    assert all(0.8 < s / m < 1.25 for s, m in zip(sims, devs)), (sims, devs)


def test_layernorm_bwd_many_partial_rows_cost_the_reduce_steps():
    """H200, T=32768 D=1024 fp16, partial_buffers 16 warps: 8 rows a program (4096 partial rows, 128 reduce steps on
    8 SMs) 454.8 us, 64 rows (512, 16 steps) 130.0: 3.5x (the old model 227.1 / 149.3, faster at 8)."""
    shape = {"T": 32768, "D": 1024}
    dev = {r["params"]["ROWS_PER_PROGRAM"]: r["measured_ms"] for r in KERNELS
           if r["module"] == "layernorm_bwd_triton" and r["variant"] == "partial_buffers" and r["shape"] == shape
           and r["params"]["num_warps"] == 16 and r["matched"]}
    sim = {rows: _launch_and_time("layernorm_bwd_triton", "partial_buffers", shape, gpu="H200", dtype="fp16",
                                  ROWS_PER_PROGRAM=rows, num_warps=16)[1] for rows in (8, 64)}
    assert dev[8] / dev[64] > 3 and sim[8] / sim[64] > 2.5, (sim, dev)
    assert abs(sim[8] / dev[8] - 1) < 0.2, (sim, dev)
