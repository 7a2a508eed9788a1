"""Dequantize first, then the Hopper TMA + wgmma GEMM on 16-bit operands: the rung of the low-bit CUDA GEMMs
(gemm_fp4_cuda, gemm_int4_cuda) where the GPU has no tensor-core path for the packed format, or M is large enough
that a one-off 16-bit copy of the weights costs less than dequantizing them in every CTA's main loop (vLLM's AWQ
layer switches to dequantize + a 16-bit GEMM from 256 tokens; its nvfp4 emulation off Blackwell does the same).
"""
from __future__ import annotations

from dataclasses import replace

from ..base import Param
from ._gemm_tc import tc_launch
from ._gemm_wgmma import wgmma_host, wgmma_kernel
from .gemm_fp16_cuda import kind, store

WGMMA16 = tc_launch("fp16", 2, 2, wgmma=True)
COPY_EFF = 0.8          # the copy pass's share of DRAM bandwidth (the H100 timed it only with its GEMM)
NEEDS = frozenset({"wgmma", "tma", "inline_ptx"})
PARAMS = (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4, 5, 6), 4))
PROTO = ("static void {op}_wgmma(const scalar_t* A, const scalar_t* B, scalar_t* C, int M, int N, int K, "
         "cudaStream_t stream)")


def wgmma_on_copies(op: str, p: dict, task, kt_end: str = "KT") -> str:
    """The 16-bit wgmma kernel and `static void {op}_wgmma(A, B, C, M, N, K, stream)`, its host (A [M, K] and
    B [N, K] 16-bit, K-major), for the module's entry point to call on its copies."""
    return (wgmma_kernel(op, kind(task), p, args="scalar_t* __restrict__ C, int M, int N, int K",
                         epilogue=store(task), kt_end=kt_end)
            + wgmma_host(op, kind(task), PROTO.format(op=op), "C, M, N, K"))


def launch_model(cost_bytes, copy_bytes, launches: int, level: float = 1.0):
    """The wgmma GEMM on 16-bit operands (its traffic in the op's own bytes, cost_bytes(task)), after the copy pass:
    copy_bytes(task) read and written by launches - 1 more kernels before the GEMM starts (Launch.later_s).
    level: the GEMM's measured speed against the module's fit (which never timed a wgmma kernel), on both
    roofline sides."""
    def launch(p, task):
        m, n, k = task["M"], task["N"], task["K"]
        one = WGMMA16(p, task)
        traffic = one.traffic * (m * k + n * k + m * n) * 2 / cost_bytes(task)
        return replace(one, traffic=traffic / level, compute_scale=one.compute_scale * level, launches=launches,
                       later_s=copy_bytes(task) / (task.gpu.bw_tbs * 1e12 * COPY_EFF))
    return launch
