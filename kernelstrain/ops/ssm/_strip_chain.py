"""register_strip's latency chain (causal_conv1d_cuda): one warp walks a long strip of a row one trip at a time, so a
short grid of long strips is bound by its warps' chains of trips, not by DRAM's bandwidth (a floor beside the
roofline: Launch.issue_s)."""
from ..base import Launch, cdiv
from ..occupancy import DRAM_LATENCY_S, UNPIPELINED_TRIP, blocks_per_sm

# One output's dependent chain in register_strip's loop: nvcc 13.0 sm_90a SASS of the loop (scripts/simB_sass.py) holds
# one LDG.E.128 a trip, then for each of the 8 outputs in turn ~25 dependent instructions (4 tap FFMAs, the exp's
# FMUL / FSETP / MUFU.EX2, FADD, MUFU.RCP and its Newton FFMAs, FCHK, all inside the division's BSSY / BSYNC
# convergence region, so the next output's MUFUs wait for it), and the next trip's load issues only after the
# store. A warp's strip is a chain of trips, each a DRAM round trip plus 8 such outputs. Measured on the stored H200
# rows at B=1 D=2048 L=2048, strip 2048 (8 trips a warp, one wave of 2,048 warps): 13.59 / 13.33 us (s5151,
# grid5) = 1.5 us launch + one round trip for the weights and halo + 8 x (0.715 + 8 x 86 ns); the other rungs there
# 9.4-10.5 us (bandwidth). About 150 cycles an output at ~1.75 GHz, what the ~25-instruction chain with two MUFUs
# takes. The held-out H100 rows (s61717 / s91331 / s98282, 64-256 threads, never fitted) ran 14.1 us where the
# roofline alone modelled 10.0-10.6 (0.71-0.75x). Assumed alike on the other cards of the catalog (no row times the
# rung's chain there: the floor binds only where a grid of long strips fits in about one wave)
STRIP_OUTPUT_S = 86e-9


def strip_chain_s(launch: Launch, task, trips: int) -> float:
    """Seconds of register_strip's chains: the waves of resident warps one after another, each warp's prologue
    round trip (weights, halo) and its `trips` trips of a load's round trip plus 8 outputs' chains."""
    trip = DRAM_LATENCY_S[task.gpu.vendor] * UNPIPELINED_TRIP
    waves = cdiv(launch.grid, task.gpu.sms * max(1, blocks_per_sm(launch, task.gpu)))
    return waves * (trip + trips * (trip + 8 * STRIP_OUTPUT_S))
