"""The fused candidates' simulated times against what the device measured, episode by episode (gpu-check's
figure: the within-episode Spearman of fused/timing.py's model against the device).

ROWS: every candidate scripts/fused_device_check.py timed in rounds 2 and 3 (2026-12-05; Torch 2.11, Triton 3.6;
median of 7 batches of 20 back-to-back forward calls): round 2 on an H200 (seed 13, 24 episodes of >= 3 candidates),
round 3 on an H100 (seed 8484, 10 Triton episodes each timing a gemm_epilogue). Each row: (card, episode, module,
rung, parameters, measured us), from the device's timing.jsonl (the lead's /tmp/fused/device_out/).
"""
from __future__ import annotations

import itertools

import pytest

from kernelstrain.calibration.metrics import spearman
from kernelstrain.fused.module import fused_module
from kernelstrain.fused.timing import fma_dot_registers
from kernelstrain.tasks import make_task

ROWS = [
    ("H200", "s13-000088", "fused_s0_14249_cuda", "eager", {}, 86.6),
    ("H200", "s13-000088", "fused_s0_14249_cuda", "fused_elementwise", {"threads": 256, "row_threads": 128}, 63.0),
    ("H200", "s13-000088", "fused_s0_14249_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 85.7),
    ("H200", "s13-000183", "fused_s0_05550_cuda", "eager", {}, 73.1),
    ("H200", "s13-000183", "fused_s0_05550_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 69.4),
    ("H200", "s13-000183", "fused_s0_05550_cuda", "fused_elementwise", {"threads": 256, "row_threads": 128}, 58.1),
    ("H200", "s13-000183", "fused_s0_05550_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 35.0),
    ("H200", "s13-000016", "fused_s0_08403_cuda", "eager", {}, 53.1),
    ("H200", "s13-000016", "fused_s0_08403_cuda", "op_kernels", {"threads": 256}, 53.4),
    ("H200", "s13-000016", "fused_s0_08403_cuda", "vectorized_loads", {"threads": 256, "vec": 4}, 40.5),
    ("H200", "s13-000167", "fused_s0_07669_cuda", "eager", {}, 117.4),
    ("H200", "s13-000167", "fused_s0_07669_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 106.0),
    ("H200", "s13-000167", "fused_s0_07669_cuda", "fused_row", {"threads": 256, "row_threads": 128}, 82.2),
    ("H200", "s13-000225", "fused_s0_02362_cuda", "eager", {}, 57.9),
    ("H200", "s13-000225", "fused_s0_02362_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 55.4),
    ("H200", "s13-000225", "fused_s0_02362_cuda", "fused_row", {"row_threads": 128}, 34.1),
    ("H200", "s13-000216", "fused_s0_05516_cuda", "eager", {}, 91.1),
    ("H200", "s13-000216", "fused_s0_05516_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 82.4),
    ("H200", "s13-000216", "fused_s0_05516_cuda", "fused_elementwise", {"threads": 256, "row_threads": 128}, 70.1),
    ("H200", "s13-000216", "fused_s0_05516_cuda", "fused_row", {"row_threads": 128}, 59.3),
    ("H200", "s13-000047", "fused_s0_13343_cuda", "eager", {}, 64.4),
    ("H200", "s13-000047", "fused_s0_13343_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 63.3),
    ("H200", "s13-000047", "fused_s0_13343_cuda", "fused_row", {"row_threads": 128}, 44.7),
    ("H200", "s13-000256", "fused_s0_02656_cuda", "eager", {}, 114.2),
    ("H200", "s13-000256", "fused_s0_02656_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 85.9),
    ("H200", "s13-000256", "fused_s0_02656_cuda", "fused_elementwise", {"threads": 256, "row_threads": 128}, 73.8),
    ("H200", "s13-000256", "fused_s0_02656_cuda", "fused_row", {"row_threads": 128}, 63.7),
    ("H200", "s13-000134", "fused_s0_12554_cuda", "eager", {}, 59.0),
    ("H200", "s13-000134", "fused_s0_12554_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 60.5),
    ("H200", "s13-000134", "fused_s0_12554_cuda", "fused_row", {"row_threads": 128}, 57.2),
    ("H200", "s13-000255", "fused_s0_16210_cuda", "eager", {}, 51.4),
    ("H200", "s13-000255", "fused_s0_16210_cuda", "op_kernels", {"threads": 256}, 53.6),
    ("H200", "s13-000255", "fused_s0_16210_cuda", "fused_elementwise", {"threads": 256}, 41.3),
    ("H200", "s13-000116", "fused_s0_00985_cuda", "eager", {}, 65.4),
    ("H200", "s13-000116", "fused_s0_00985_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 62.3),
    ("H200", "s13-000116", "fused_s0_00985_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 30.7),
    ("H200", "s13-000232", "fused_s0_04229_cuda", "eager", {}, 73.3),
    ("H200", "s13-000232", "fused_s0_04229_cuda", "fused_elementwise", {"threads": 256, "row_threads": 128}, 59.4),
    ("H200", "s13-000232", "fused_s0_04229_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 67.4),
    ("H200", "s13-000232", "fused_s0_04229_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 36.7),
    ("H200", "s13-000215", "fused_s0_03689_cuda", "eager", {}, 128.1),
    ("H200", "s13-000215", "fused_s0_03689_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 65.7),
    ("H200", "s13-000215", "fused_s0_03689_cuda", "fused_row", {"row_threads": 128}, 53.6),
    ("H200", "s13-000298", "fused_s0_05812_cuda", "eager", {}, 53.0),
    ("H200", "s13-000298", "fused_s0_05812_cuda", "op_kernels", {"threads": 256}, 58.0),
    ("H200", "s13-000298", "fused_s0_05812_cuda", "vectorized_loads", {"threads": 256, "vec": 4}, 51.1),
    ("H200", "s13-000287", "fused_s0_05650_cuda", "eager", {}, 260.9),
    ("H200", "s13-000287", "fused_s0_05650_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 52.4),
    ("H200", "s13-000287", "fused_s0_05650_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 32.1),
    ("H200", "s13-000148", "fused_s0_05247_cuda", "eager", {}, 59.4),
    ("H200", "s13-000148", "fused_s0_05247_cuda", "op_kernels", {"threads": 256, "row_threads": 128}, 52.2),
    ("H200", "s13-000148", "fused_s0_05247_cuda", "fused_row", {"row_threads": 128}, 26.6),
    ("H200", "s13-000015", "fused_s0_03478_triton", "eager", {}, 249.4),
    ("H200", "s13-000015", "fused_s0_03478_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 250.6),
    ("H200", "s13-000015", "fused_s0_03478_triton", "fused_elementwise", {"BLOCK": 1024, "num_warps": 4}, 157.6),
    ("H200", "s13-000251", "fused_s0_02798_triton", "eager", {}, 81.2),
    ("H200", "s13-000251", "fused_s0_02798_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 114.3),
    ("H200", "s13-000251", "fused_s0_02798_triton", "fused_row", {"row_warps": 4}, 46.7),
    ("H200", "s13-000310", "fused_s0_07612_triton", "eager", {}, 114.2),
    ("H200", "s13-000310", "fused_s0_07612_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "gemm_warps": 8, "num_stages": 3}, 75.1),
    ("H200", "s13-000310", "fused_s0_07612_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 112.2),
    ("H200", "s13-000237", "fused_s0_06573_triton", "eager", {}, 34.9),
    ("H200", "s13-000237", "fused_s0_06573_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 65.5),
    ("H200", "s13-000237", "fused_s0_06573_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 42.5),
    ("H200", "s13-000155", "fused_s0_16034_triton", "eager", {}, 130.2),
    ("H200", "s13-000155", "fused_s0_16034_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 181.4),
    ("H200", "s13-000155", "fused_s0_16034_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 96.9),
    ("H200", "s13-000155", "fused_s0_16034_triton", "gemm_epilogue", {"row_warps": 8, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "gemm_warps": 8, "num_stages": 4}, 153.8),
    ("H200", "s13-000199", "fused_s0_00071_triton", "eager", {}, 223.6),
    ("H200", "s13-000199", "fused_s0_00071_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 180.3),
    ("H200", "s13-000199", "fused_s0_00071_triton", "fused_elementwise", {"BLOCK": 1024, "num_warps": 4}, 75.0),
    ("H200", "s13-000150", "fused_s0_06612_triton", "eager", {}, 82.6),
    ("H200", "s13-000150", "fused_s0_06612_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 148.7),
    ("H200", "s13-000150", "fused_s0_06612_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 105.5),
    ("H200", "s13-000230", "fused_s0_08592_triton", "eager", {}, 155.2),
    ("H200", "s13-000230", "fused_s0_08592_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 115.4),
    ("H200", "s13-000230", "fused_s0_08592_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "gemm_warps": 8, "num_stages": 3}, 99.1),
    ("H200", "s13-000230", "fused_s0_08592_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 91.6),
    ("H100", "s8484-000134", "fused_s0_00659_triton", "eager", {}, 167.6),
    ("H100", "s8484-000134", "fused_s0_00659_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 64.3),
    ("H100", "s8484-000134", "fused_s0_00659_triton", "gemm_epilogue", {"row_warps": 2, "ROWS": 2, "BLOCK_M": 32, "BLOCK_N": 256, "BLOCK_K": 128, "gemm_warps": 4, "num_stages": 2}, 582.0),
    ("H100", "s8484-000229", "fused_s0_03712_triton", "eager", {}, 67.3),
    ("H100", "s8484-000229", "fused_s0_03712_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 137.1),
    ("H100", "s8484-000229", "fused_s0_03712_triton", "gemm_epilogue", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 43.2),
    ("H100", "s8484-000193", "fused_s0_14736_triton", "eager", {}, 140.5),
    ("H100", "s8484-000193", "fused_s0_14736_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 80.6),
    ("H100", "s8484-000193", "fused_s0_14736_triton", "gemm_epilogue", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 44.2),
    ("H100", "s8484-000213", "fused_s0_05891_triton", "eager", {}, 158.7),
    ("H100", "s8484-000213", "fused_s0_05891_triton", "fused_row", {"row_warps": 4}, 86.2),
    ("H100", "s8484-000213", "fused_s0_05891_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 96.8),
    ("H100", "s8484-000230", "fused_s0_13218_triton", "eager", {}, 158.8),
    ("H100", "s8484-000230", "fused_s0_13218_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 93.6),
    ("H100", "s8484-000230", "fused_s0_13218_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 81.9),
    ("H100", "s8484-000230", "fused_s0_13218_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 82.3),
    ("H100", "s8484-000064", "fused_s0_15539_triton", "eager", {}, 47.6),
    ("H100", "s8484-000064", "fused_s0_15539_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 83.9),
    ("H100", "s8484-000064", "fused_s0_15539_triton", "gemm_epilogue", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "gemm_warps": 8, "num_stages": 3}, 44.2),
    ("H100", "s8484-000191", "fused_s0_04968_triton", "eager", {}, 66.9),
    ("H100", "s8484-000191", "fused_s0_04968_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 128.1),
    ("H100", "s8484-000191", "fused_s0_04968_triton", "gemm_epilogue", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 47.1),
    ("H100", "s8484-000018", "fused_s0_13704_triton", "eager", {}, 61.5),
    ("H100", "s8484-000018", "fused_s0_13704_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4}, 96.5),
    ("H100", "s8484-000018", "fused_s0_13704_triton", "gemm_epilogue", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 71.6),
    ("H100", "s8484-000018", "fused_s0_13704_triton", "gemm_epilogue", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 81.6),
    ("H100", "s8484-000270", "fused_s0_17843_triton", "eager", {}, 118.0),
    ("H100", "s8484-000270", "fused_s0_17843_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 131.1),
    ("H100", "s8484-000270", "fused_s0_17843_triton", "fused_row", {"row_warps": 4}, 70.2),
    ("H100", "s8484-000270", "fused_s0_17843_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 193.1),
    ("H100", "s8484-000216", "fused_s0_11683_triton", "eager", {}, 113.0),
    ("H100", "s8484-000216", "fused_s0_11683_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "gemm_warps": 4, "num_stages": 3}, 75.7),
    ("H100", "s8484-000216", "fused_s0_11683_triton", "fused_row", {"row_warps": 4}, 45.7),
]


def _model_us(card: str, module: str, tag: str, params: dict) -> float:
    m = fused_module(module)
    return m.simulate(m.variant(tag), params, make_task(m, card, m.dtypes[0], m.shapes[0])).time_ms * 1e3


def _within_episode(card: str) -> list:
    out = []
    for _, rows in itertools.groupby([r for r in ROWS if r[0] == card], key=lambda r: r[1]):
        rows = list(rows)
        if len(rows) >= 3:
            out.append(spearman([_model_us(*r[:1], *r[2:5]) for r in rows], [r[5] for r in rows]))
    return out


@pytest.mark.parametrize("card,episodes,floor", [("H200", 24, 0.82), ("H100", 10, 0.88)])
def test_the_within_episode_order_follows_the_device(card, episodes, floor):
    """gpu-check's within-episode Spearman (mean over episodes of >= 3 candidates): round 3 (H100, every episode
    with an fp32 Triton GEMM epilogue) 0.84 with the wave model of tl.dot at a share of cuBLAS's ceiling, 0.89 with
    the FMA model (timing.fma_gemm_ms); round 2 (H200) 0.83 at both, its misordered episodes host-bound near-ties
    and library calls (fused-s13-000015's conv_transpose3d)."""
    rhos = _within_episode(card)
    assert len(rhos) == episodes
    assert sum(rhos) / len(rhos) >= floor


def test_an_fp32_triton_gemm_step_costs_as_its_registers_say():
    """The fp32 GEMM epilogues the device timed GPU-bound (every call measured above its host side's model) are
    predicted within a factor 1.7 -- the wave model of round 2 put fused-s8484-000134's 32x256x128 tile at 139 us
    against 582 measured -- and a tile of more registers a thread is never modelled faster a step."""
    for card, episode, module, tag, params, us in ROWS:
        if tag == "gemm_epilogue" and fused_module(module).view.dtype == "fp32" and us > 70:
            assert 1 / 1.7 < _model_us(card, module, tag, params) / us < 1.7, (episode, params, us)
    assert fma_dot_registers(64, 64, 32, 4) < fma_dot_registers(64, 128, 32, 4) < fma_dot_registers(32, 256, 128, 4)
