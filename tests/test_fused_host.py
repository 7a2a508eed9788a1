"""The host side of a fused candidate's call (fused/timing.py HOST_*) against what an H100's host measured.

MEASURED: the 21 candidates of 6 fused episodes timed by scripts/fused_device_check.py on an H100 (Torch 2.11,
Triton 3.6, 2026-12-05; median of 7 batches of 20 back-to-back forward calls), every call host-bound there.
The rows are the device's timing.jsonl: (episode of seed 11, module, rung, parameters, measured us).
"""
from __future__ import annotations

import itertools

import pytest

from kernelstrain.fused.module import fused_module
from kernelstrain.fused.timing import (HOST_COST_US, HOST_EXT_US, HOST_MODULE_US, HOST_TRITON_US, call_ms,
                                       host_calls, host_us)
from kernelstrain.gpus import GPUS
from kernelstrain.tasks import make_task

MEASURED = [
    ("000044", "fused_s0_09723_cuda", "eager", {}, 57.5),
    ("000044", "fused_s0_09723_cuda", "vectorized_loads", {"row_threads": 256, "rows_per_block": 1}, 36.1),
    ("000044", "fused_s0_09723_cuda", "vectorized_loads", {"row_threads": 32, "rows_per_block": 1}, 39.0),
    ("000097", "fused_s0_03277_cuda", "eager", {}, 114.6),
    ("000097", "fused_s0_03277_cuda", "fused_row", {"row_threads": 128}, 55.8),
    ("000097", "fused_s0_03277_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 53.6),
    ("000057", "fused_s0_02700_cuda", "eager", {}, 124.2),
    ("000057", "fused_s0_02700_cuda", "vectorized_loads", {"row_threads": 128, "rows_per_block": 1}, 58.6),
    ("000057", "fused_s0_02700_cuda", "vectorized_loads", {"row_threads": 256, "rows_per_block": 1}, 56.7),
    ("000051", "fused_s0_00528_triton", "eager", {}, 195.2),
    ("000051", "fused_s0_00528_triton", "fused_row", {"row_warps": 4}, 89.3),
    ("000051", "fused_s0_00528_triton", "gemm_epilogue", {"row_warps": 8, "ROWS": 16, "BLOCK_M": 32, "BLOCK_N": 32,
                                                          "BLOCK_K": 128, "gemm_warps": 8, "num_stages": 5}, 61.8),
    ("000008", "fused_s0_09794_triton", "eager", {}, 124.5),
    ("000008", "fused_s0_09794_triton", "op_kernels", {"BLOCK": 1024, "num_warps": 4, "row_warps": 4}, 69.8),
    ("000008", "fused_s0_09794_triton", "op_kernels", {"BLOCK": 2048, "num_warps": 4, "row_warps": 4}, 92.8),
    ("000008", "fused_s0_09794_triton", "fused_row", {"row_warps": 4}, 34.6),
    ("000008", "fused_s0_09794_triton", "fused_row", {"row_warps": 2}, 36.8),
    ("000008", "fused_s0_09794_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 16}, 41.0),
    ("000009", "fused_s0_08054_triton", "eager", {}, 69.9),
    ("000009", "fused_s0_08054_triton", "fused_elementwise", {"BLOCK": 1024, "num_warps": 4}, 84.3),
    ("000009", "fused_s0_08054_triton", "fused_elementwise", {"BLOCK": 2048, "num_warps": 4}, 83.2),
]
# round 2 (H200, 2026-12-05, seed 13): the two episodes whose fp32 Triton GEMM epilogue is the call's longest part
ROUND2 = [
    ("000150", "fused_s0_06612_triton", "eager", {}, 82.6),
    ("000150", "fused_s0_06612_triton", "gemm_epilogue", {"row_warps": 4, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32,
                                                          "gemm_warps": 4, "num_stages": 3}, 105.5),
    ("000155", "fused_s0_16034_triton", "multi_row_tiles", {"row_warps": 4, "ROWS": 4}, 96.9),
    ("000155", "fused_s0_16034_triton", "gemm_epilogue", {"row_warps": 8, "ROWS": 4, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64,
                                                          "gemm_warps": 8, "num_stages": 4}, 153.8),
]
NOISE = 0.33       # two candidates of the same calls measured 69.8 and 92.8 us (fused-s11-000008's op_kernels)


def _model_us(module: str, tag: str, params: dict, gpu: str = "H100") -> float:
    m = fused_module(module)
    return m.simulate(m.variant(tag), params, make_task(m, gpu, m.dtypes[0], m.shapes[0])).time_ms * 1e3


def _solve(a: list, b: list) -> list:
    """Gaussian elimination with partial pivoting (a small dense system)."""
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[p] = m[p], m[i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            m[r] = [x - f * y for x, y in zip(m[r], m[i])]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def test_the_host_constants_are_the_fit_of_the_measurements():
    """Least squares on relative error over the 21 calls (the extension call held at its floor, HOST_EXT_US:
    every CUDA candidate pairs it with the same module and library calls, so the rows cannot tell them
    apart) gives the constants timing.py states, to their rounding."""
    kinds = ["module", "op", "library", "triton"]
    rows, ys = [], []
    for _, module, tag, _, us in MEASURED:
        calls = fused_module(module).host_calls(tag)
        rows.append([calls.get(k, 0) / us for k in kinds])
        ys.append((us - calls.get("cuda", 0) * HOST_EXT_US) / us)
    normal = [[sum(r[i] * r[j] for r in rows) for j in range(4)] for i in range(4)]
    fitted = _solve(normal, [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(4)])
    for kind, value in zip(kinds, fitted):
        assert HOST_COST_US[kind] == pytest.approx(value, abs=1.0), (kind, value)


def test_every_measured_call_is_predicted_within_the_timers_spread():
    for episode, module, tag, params, us in MEASURED:
        assert 1 - NOISE < _model_us(module, tag, params) / us < 1 + NOISE, (episode, tag, us)


def test_the_within_episode_order_follows_the_measurements():
    """Pairs measured further apart than the timer's spread are ordered alike; those the model times alike
    (the same calls: a host-bound sweep) are ties it does not claim to order."""
    for episode, rows in itertools.groupby(MEASURED, key=lambda r: r[0]):
        rows = list(rows)
        for a, b in itertools.combinations(rows, 2):
            sim_a, sim_b = _model_us(*a[1:4]), _model_us(*b[1:4])
            if max(a[4], b[4]) / min(a[4], b[4]) > 1 + NOISE:
                assert (sim_a < sim_b) == (a[4] < b[4]), (episode, a[2], b[2])
            if fused_module(a[1]).host_calls(a[2]) == fused_module(b[1]).host_calls(b[2]):
                assert sim_a == sim_b


def test_a_triton_kernel_replacing_two_eager_ops_of_a_small_call_is_not_faster():
    """fused-s11-000009: sdpa -> elu -> scale; eager 69.9 us, the elementwise pair as one Triton kernel 83-84."""
    eager = _model_us("fused_s0_08054_triton", "eager", {})
    fused = _model_us("fused_s0_08054_triton", "fused_elementwise", {"BLOCK": 1024, "num_warps": 4})
    assert fused >= eager


def test_host_calls_count_what_the_code_does():
    m = fused_module("fused_s0_09794_triton")       # rms_norm (an RMSNorm module of 8 ops) -> softplus -> hardtanh
    assert m.host_calls("eager") == {"module": 2, "op": 10, "library": 0, "triton": 0}
    assert m.host_calls("op_kernels") == {"module": 1, "op": 0, "library": 0, "triton": 3}
    assert m.host_us("fused_row") == HOST_MODULE_US + HOST_TRITON_US
    cuda = fused_module("fused_s0_03277_cuda")      # linear -> ... -> softmax: nn.Linear kept, one extension call
    assert cuda.host_calls("fused_row") == {"module": 2, "op": 1, "library": 1, "cuda": 1}
    assert host_us({"module": 1, "cuda": 2}) == HOST_MODULE_US + 2 * HOST_EXT_US


def test_a_call_takes_the_longer_of_its_host_and_gpu_sides():
    gpu = GPUS["H100"]
    gap = 2.0e-3        # FIT.extra_launch_us on NVIDIA
    assert call_ms([0.001, 0.002], 50.0, gpu) == pytest.approx(0.050)
    assert call_ms([0.5, 0.3], 50.0, gpu) == pytest.approx(0.8 + 2 * gap)


def test_a_large_program_is_gpu_bound_and_its_parameters_matter_again():
    """Where the kernels outlast the host (a large program), the rung's parameters move the measured time."""
    for index in range(3000):
        m = fused_module(f"fused_s0_{index:05d}_cuda")
        if m is None or "vectorized_loads" not in m._plans:
            continue
        task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
        v = m.variant("vectorized_loads")
        kernels = sum(m.kernels_ms(v.tag, v.defaults(), task))
        if kernels * 1e3 < 2 * m.host_us(v.tag):
            continue
        times = {m.simulate(v, {**v.defaults(), p.name: x}, task).time_ms for p in v.params for x in p.values}
        assert len(times) > 1
        assert m.simulate(v, v.defaults(), task).time_ms == pytest.approx(kernels + 2.0e-3 * len(m.kernels_ms(v.tag, v.defaults(), task)))
        return
    pytest.fail("no GPU-bound CUDA program in seed 0's first 3,000")


def test_torch_compile_is_counted_as_a_triton_solution_is():
    """linear -> divide -> add -> gelu -> relu -> softmax compiled: the library call kept, one Inductor kernel
    for the rest; its host a module call, the library op, one Triton launch (both sides tiny: host-bound)."""
    m = fused_module("fused_s0_03277_cuda")
    eager, compiled = m.torch_ms(make_task(m, "H100", m.dtypes[0], m.shapes[0]))
    assert compiled * 1e3 == pytest.approx(host_us({"module": 1, "op": 1, "library": 1, "triton": 1}))
    assert eager * 1e3 == pytest.approx(m.host_us("eager"))


def test_an_fp32_triton_gemm_runs_at_the_fma_share_measured():
    """fp32 tl.dot with input_precision="ieee" runs on FMA: the two H200 calls whose GEMM is their longest part
    are predicted within the timer's spread (at the previous share, 0.75: 58 and 106 us), and each is slower
    than the rung measured faster beside it."""
    for episode, module, tag, params, us in ROUND2:
        assert 1 - NOISE < _model_us(module, tag, params, "H200") / us < 1 + NOISE, (episode, tag, us)
    for (_, m1, t1, p1, us1), (_, m2, t2, p2, us2) in (ROUND2[0:2], ROUND2[2:4]):
        assert (_model_us(m1, t1, p1, "H200") < _model_us(m2, t2, p2, "H200")) == (us1 < us2)
