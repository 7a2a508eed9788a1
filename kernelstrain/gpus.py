"""The GPU catalog: one table of numbers and feature sets (SPEC §5).

Peaks are dense TFLOP/s (TOPS for int8) per datapath; bandwidth in TB/s.

>>> GPUS["H100"].arch, GPUS["H100"].smem_per_block
('sm_90a', 232448)
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Arch features a variant may need. Minimum targets follow SPEC §5.
AMPERE = frozenset({"ldmatrix", "cp_async", "bf16", "mma", "inline_ptx"})
ADA = AMPERE | {"fp8"}
HOPPER = ADA | {"tma", "cluster", "wgmma"}
BLACKWELL_RTX = ADA | {"tma", "cluster", "fp4"}
CDNA3 = frozenset({"bf16", "fp8", "mfma"})  # no PTX, no cp.async, wavefront 64

FEATURE_MIN_TARGET = {
    "ldmatrix": "sm_75",
    "cp_async": "sm_80",
    "bf16": "sm_80",
    "mma": "sm_80",
    "fp8": "sm_89",
    "tma": "sm_90",
    "cluster": "sm_90",
    "wgmma": "sm_90a",
    "fp4": "sm_120a",
    "inline_ptx": "any NVIDIA target",
    "mfma": "gfx90a",
}


@dataclass(frozen=True)
class GPU:
    name: str
    arch: str                 # sm_80, sm_90a, gfx942 ...
    vendor: str               # nvidia | amd
    sms: int                  # SMs or CUs
    peak_tflops: dict         # datapath -> dense TFLOP/s: fp32, fp16 (tensor), fp8, int8, fp4
    bw_tbs: float             # DRAM bandwidth, TB/s
    l2_mb: float              # last-level cache visible to kernels
    smem_per_block: int       # max opt-in shared memory per block, bytes
    smem_per_sm: int          # shared memory per SM, bytes
    regs_per_sm: int          # 32-bit registers per SM
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp: int                 # warp / wavefront size
    features: frozenset
    # fraction of a datapath's tensor peak the legacy mma.sync reaches where wgmma exists (Hopper
    # issues mma.sync at about half its wgmma rate: H200-measured gemm_fp16 / flash_prefill rungs;
    # fp8 mma.sync runs near the 16-bit rate, ~0.28 of the fp8 peak); absent paths: 1.0
    mma_sync_rate: dict = field(default_factory=dict)
    # integer-op throughput relative to the fp32 FLOP peak, as a compute scale: A100 has as many
    # INT32 lanes as FP32 ones (2.0); elsewhere INT32 lanes are half of them or shared (1.0)
    int32_scale: float = 1.0
    # Triton (3.9) buffers every pipeline stage of a dot whose tile has at least this many rows
    # (the wgmma path); below it, or where 0, it keeps one fewer operand buffer than num_stages
    triton_full_stage_rows: int = 0
    # fraction of the tensor peak Triton's dot code reaches, relative to its NVIDIA code (MI300X:
    # its MFMA code trails; one value for the GEMM (0.7) and attention (0.65) models of old)
    triton_dot_scale: float = 1.0
    # gfx942: Triton keeps a loop-invariant dot operand (attention's Q) in registers, not in LDS,
    # and its stream pipeliner buffers at most this many stages (0: no cap)
    triton_q_in_registers: bool = False
    triton_max_stage_buffers: int = 0
    # sm_90: Triton issues wgmma only for dot tiles of >= triton_full_stage_rows rows; a smaller
    # tile falls back to mma.sync at this fraction of the rate (one value for the attention models)
    triton_small_tile_scale: float = 1.0
    # Triton's tl.dot flash-attention kernel against a hand-tuned one (no warp specialisation on sm_90, MFMA scheduling on gfx942)
    triton_flash_scale: float = 1.0

    @property
    def cc(self) -> int:
        """Compute capability as an int (80, 90, 120); 0 for AMD."""
        return int("".join(c for c in self.arch[3:] if c.isdigit())) if self.vendor == "nvidia" else 0

    def peak(self, path: str) -> float:
        """FLOP/s of a datapath; 'fp16' on consumer cards is the fp32-accumulate rate."""
        return self.peak_tflops[path] * 1e12

    def supports(self, feature: str) -> bool:
        return feature in self.features

    def mma_sync_scale(self, path: str) -> float:
        """Compute scale of an mma.sync kernel on `path`: 1.0 unless a faster MMA exists.

        >>> GPUS["H100"].mma_sync_scale("fp16"), GPUS["H100"].mma_sync_scale("fp8"), GPUS["A100"].mma_sync_scale("fp16")
        (0.5, 0.28, 1.0)
        """
        return self.mma_sync_rate.get(path, 1.0)


def _gpu(name, arch, vendor, sms, fp32, fp16, fp8, int8, fp4, bw, l2, smem_block, smem_sm,
         threads_sm, blocks_sm, features, warp=32, regs=65536, **facts):
    peaks = {"fp32": fp32, "fp16": fp16, "fp8": fp8 or 0.0, "int8": int8, "fp4": fp4 or 0.0}
    return GPU(name, arch, vendor, sms, peaks, bw, l2, smem_block, smem_sm, regs,
               threads_sm, blocks_sm, warp, features, **facts)


HOPPER_FACTS = dict(mma_sync_rate={"fp16": 0.5, "int8": 0.5, "fp8": 0.28}, triton_full_stage_rows=64,
                    triton_small_tile_scale=0.65, triton_flash_scale=0.75)


GPUS = {g.name: g for g in (
    _gpu("A100", "sm_80", "nvidia", 108, 19.5, 312, None, 624, None, 2.04, 40, 166912, 167936, 2048, 32, AMPERE,
         int32_scale=2.0),
    _gpu("H100", "sm_90a", "nvidia", 132, 67, 989, 1979, 1979, None, 3.35, 50, 232448, 233472, 2048, 32, HOPPER,
         **HOPPER_FACTS),
    _gpu("H200", "sm_90a", "nvidia", 132, 67, 989, 1979, 1979, None, 4.8, 50, 232448, 233472, 2048, 32, HOPPER,
         **HOPPER_FACTS),
    _gpu("RTX4090", "sm_89", "nvidia", 128, 82.6, 165, 330, 660, None, 1.01, 72, 101376, 102400, 1536, 24, ADA),
    _gpu("RTX5090", "sm_120", "nvidia", 170, 104.8, 209.5, 419, 838, 1676, 1.79, 96, 101376, 102400, 1536, 32, BLACKWELL_RTX),
    _gpu("A10", "sm_86", "nvidia", 72, 31.2, 125, None, 250, None, 0.60, 6, 101376, 102400, 1536, 16, AMPERE),
    _gpu("RTXA6000", "sm_86", "nvidia", 84, 38.7, 154.8, None, 309.7, None, 0.77, 6, 101376, 102400, 1536, 16, AMPERE),
    _gpu("MI300X", "gfx942", "amd", 304, 163, 1307, 2615, 2615, None, 5.3, 256, 65536, 65536, 2048, 32, CDNA3,
         warp=64, regs=131072, triton_dot_scale=0.7, triton_q_in_registers=True, triton_max_stage_buffers=2,
         triton_flash_scale=0.6),
)}

# Launch cost: kernelstrain/calibration (the back-to-back launch floor fitted on the H200).


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None
