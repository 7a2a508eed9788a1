"""What a profiler reports of one timed candidate (issue 26 Build 3: "what a compiler, a checker, a
timer and a profiler report"), as a harness that runs Nsight Compute's launch statistics, occupancy
and GPU Speed Of Light sections would print it: the main kernel's grid against the SMs and its
waves, its theoretical occupancy and what limits it, the achieved DRAM and compute throughput as
shares of the GPU's peaks, and which roofline side bounds the op.

Every figure comes from the simulator's own launch and cost model of THAT candidate
(sim.built_launch, the module's cost) and the step's measured time, so the feedback shows the
engineer the evidence the engine chooses its moves from (engine.Episode.bottleneck: too few
CTAs to fill the SMs, else the larger of the op's roofline terms; engine.POINTS_AT). validate
re-renders chat rows from the episode rows, so the text is recomputed from the model, never
read back from a written file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .ops.base import Launch
from .ops.occupancy import blocks_per_sm
from .sim import built_launch

# the verdicts, in the engine's names (Episode.bottleneck), and how the profile words each
BOUND_TEXT = {"occupancy": "grid (fewer CTAs than SMs)", "occupancy_amd": "grid (fewer workgroups than CUs)", "memory": "memory", "compute": "compute"}


@dataclass(frozen=True)
class Profile:
    grid: int                # CTAs of the main (heaviest) kernel
    threads: int             # threads per CTA
    sms: int
    blocks: int              # CTAs one SM holds at once (theoretical)
    warps: int               # warps one SM holds at once: blocks x warps per CTA
    max_warps: int           # warps an SM can hold
    limiter: str             # what caps `blocks`: registers | shared memory | warps | blocks
    bytes: float             # DRAM bytes the model charges the candidate (the op's, where `least`)
    flops: float
    time_s: float            # the step's measured time
    bw: float                # peak DRAM bytes/s
    peak: float              # peak FLOP/s of the candidate's datapath
    path: str
    bound: str               # occupancy | memory | compute (Episode.bottleneck's rule)
    intensity: float = 0.0   # the op's FLOPs over the bytes the candidate moves (the engine's roofline terms)
    least: bool = False      # bytes are the program's least (a fused program: no per-kernel traffic model)
    amd: bool = False

    @property
    def waves(self) -> float:
        """Nsight Compute's "Waves Per SM": the grid over the CTAs all SMs hold at once."""
        return self.grid / (self.sms * max(1, self.blocks))

    @property
    def dram_share(self) -> float:
        return self.bytes / self.time_s / self.bw

    @property
    def compute_share(self) -> float:
        return self.flops / self.time_s / self.peak


def bound(grid: int, cost, gpu, path: str, traffic: float = 1.0) -> str:
    """Episode.bottleneck's verdict from a launch's grid, the op's cost and the candidate's traffic (the bytes it
    moves over the op's least, Launch.traffic): `occupancy` where the grid has fewer CTAs than SMs, else
    `compute` or `memory`, whichever roofline term of the candidate (the op's FLOPs at the path's peak, the bytes
    it moves at peak bandwidth) is larger: the larger of the two shares of peak the throughput line prints, as
    Nsight Compute's Speed Of Light section reads. (On a794ac7 the bytes were the op's least: 117 of 2,903
    profiles of default seed 8181 printed `bound: compute` beside a DRAM share above the compute share, a
    GEMM re-reading its operands at 74% of peak DRAM and 20% of its FLOPs.)"""
    if grid < gpu.sms:
        return "occupancy"
    compute_s = cost.flops / gpu.peak(path) if cost.flops else 0.0
    return "compute" if compute_s >= cost.bytes * traffic / (gpu.bw_tbs * 1e12) else "memory"


def charged(module, launch: Launch) -> float:
    """The candidate's DRAM bytes over the op's least (Launch.traffic); a fused program's, 1: no per-kernel
    traffic model there, its bytes are the program's least."""
    return 1.0 if hasattr(module, "simulate") else launch.traffic


def bound_of(module, variant, params: dict, task) -> str:
    """bound() of one candidate: its built launch's grid and traffic (Episode.bottleneck)."""
    launch = built_launch(module, variant, params, task)
    return bound(launch.grid, module.cost(task), task.gpu, variant.path, charged(module, launch))


def limiter(launch: Launch, gpu) -> str:
    """Which per-SM limit sets the CTAs an SM holds (ops.occupancy.blocks_per_sm), in Nsight
    Compute's "Block Limit" names; the first of equals in that order. A candidate without shared
    memory is not limited by it: blocks_per_sm counts its shared-memory limit as the blocks limit,
    and where that one binds (64-thread CTAs on an sm_86, 16 a SM) the profile named `shared memory`
    beside `0 B shared memory` (19 profiles of kernelinfer seed 16262's 150 sessions, main 90dadf3)."""
    limits = {"registers": gpu.regs_per_sm // max(1, launch.threads * launch.regs),
              "shared memory": gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else math.inf,
              "warps": gpu.max_threads_per_sm // max(1, launch.threads),
              "blocks": gpu.max_blocks_per_sm}
    return min(limits, key=limits.get)


def profile(module, variant, params: dict, task, time_ms: float) -> Profile:
    """The profile of one candidate timed at `time_ms`."""
    gpu, cost = task.gpu, module.cost(task)
    launch = built_launch(module, variant, params, task)
    fused = hasattr(module, "simulate")     # a fused program: its heaviest kernel's launch, the program's least bytes
    blocks, traffic = blocks_per_sm(launch, gpu), charged(module, launch)
    return Profile(grid=launch.grid, threads=launch.threads, sms=gpu.sms, blocks=blocks,
                   warps=blocks * math.ceil(launch.threads / gpu.warp), max_warps=gpu.max_threads_per_sm // gpu.warp,
                   limiter=limiter(launch, gpu), bytes=cost.bytes * traffic,
                   flops=cost.flops, time_s=time_ms * 1e-3, bw=gpu.bw_tbs * 1e12, peak=gpu.peak(variant.path),
                   path=variant.path, bound=bound(launch.grid, cost, gpu, variant.path, traffic),
                   intensity=cost.flops / (cost.bytes * traffic) if cost.bytes else math.inf, least=fused,
                   amd=gpu.vendor == "amd")


def sig(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits in fixed point, a value that rounds up to the next power of ten
    counted there: sig(0.012345) == '0.0123', sig(1234.5) == '1234', sig(0.99999) == '1.00'."""
    if x <= 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(x)))
    if decimals and round(x, decimals) >= 10 ** (digits - decimals):
        decimals -= 1
    return f"{x:.{decimals}f}"


def size(n: float) -> str:
    """Bytes in KB / MB / GB (powers of 1000, as Nsight Compute prints them): size(12_600_000) == '12.6 MB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{sig(n / scale)} {unit}"
    return f"{n:.0f} B"


def pct(share: float) -> str:
    """A share as a percentage: one decimal under 10%, whole above."""
    return f"{100 * share:.1f}%" if share < 0.1 else f"{100 * share:.0f}%"


def text(p: Profile) -> str:
    """The profile's two lines: launch and occupancy, then throughput and the roofline's verdict.

    >>> p = Profile(grid=96, threads=256, sms=132, blocks=4, warps=32, max_warps=64, limiter="registers",
    ...             bytes=12.6e6, flops=3.1e6, time_s=10.2e-6, bw=3.35e12, peak=989e12, path="fp16", bound="occupancy")
    >>> print(text(p))
    profile: 96 CTAs x 256 threads on 132 SMs, 0.18 waves; theoretical occupancy 50% (32 of 64 warps per SM, limited by registers)
    throughput: DRAM 1.24 TB/s, 37% of peak (12.6 MB moved); compute 0.0% of the fp16 peak; bound: grid (fewer CTAs than SMs)
    """
    # (AMD's profilers name a CTA a workgroup, a warp a wavefront, an SM a CU)
    ctas, units, warps = ("workgroups", "CUs", "wavefronts per CU") if p.amd else ("CTAs", "SMs", "warps per SM")
    head = ("profile (its heaviest kernel)" if p.least else "profile") + \
        f": {p.grid} {ctas} x {p.threads} threads on {p.sms} {units}, {sig(p.waves, 2)} waves; theoretical occupancy " \
        f"{100 * p.warps / p.max_warps:.0f}% ({p.warps} of {p.max_warps} {warps}{limited(p)})"
    moved = f"the program's least {size(p.bytes)}" if p.least else f"{size(p.bytes)} moved"
    rate = f"{sig(p.bytes / p.time_s / 1e12)} TB/s" if p.bytes / p.time_s >= 1e12 else f"{sig(p.bytes / p.time_s / 1e9)} GB/s"
    compute = f"compute {pct(p.compute_share)} of the {p.path} peak" if p.flops else "no FLOPs"
    return f"{head}\nthroughput: DRAM {rate}, {pct(p.dram_share)} of peak ({moved}); {compute}; bound: {verdict(p)}"


def limited(p: Profile) -> str:
    """What caps the occupancy, where something does (a full SM has no limiter to name)."""
    return "" if p.warps >= p.max_warps else f", limited by {p.limiter}"


def verdict(p: Profile) -> str:
    """The bound and its evidence: the grid against the SMs, or the op's FLOPs per byte the candidate moves
    (the bytes printed) against the GPU's ridge point (the path's peak FLOP/s over peak bandwidth)."""
    if p.bound == "occupancy":
        return BOUND_TEXT["occupancy_amd" if p.amd else "occupancy"]
    if not p.flops:
        return "memory (no FLOPs)"
    side = ">=" if p.bound == "compute" else "<"
    return f"{p.bound} ({sig(p.intensity)} FLOP/B {side} ridge {sig(p.peak / p.bw)})"
