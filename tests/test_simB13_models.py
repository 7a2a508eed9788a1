"""Launch-model fixes of issue 30, thirteenth session (helper simB), each resting on compiler output produced here
(nvcc 13.0 sm_90a SASS, scripts/simB_sass.py --order) and on stored H100 rows outside the held-out gpu-check seeds."""
from kernelstrain.ops.occupancy import LOADS_IN_FLIGHT, blocks_per_sm

from test_sim31_models import sim_us
from test_simB12_models import launch_of

N16M, N268M = {"N": 16777216}, {"N": 268435456}


def in_flight_bytes(rung: str, params: dict, dtype: str = "bf16") -> float:
    """Bytes a thread of the rung keeps in flight as the launch model has it (Launch.bytes_per_access counts
    them over occupancy.LOADS_IN_FLIGHT loads)."""
    launch, _ = launch_of("grad_clip_cuda", rung, params, N16M, dtype)
    return launch.bytes_per_access * LOADS_IN_FLIGHT


def test_grad_clip_loads_in_flight_are_what_nvcc_builds():
    """two_stage_deterministic's scalar norm loop: nvcc unrolls it 16 deep on its own (16 LDG.E.U16 before their
    FFMAs), `#pragma unroll N` makes it N deep; vectorized_persistent's uint4 loop keeps one LDG.E.128 in flight, with
    or without the pragma (each copy's load sits behind the previous copy's exit test and FFMAs)."""
    threads = {"threads": 128, "blocks": 1024}
    assert in_flight_bytes("two_stage_deterministic", threads) == 16 * 2
    for n in (2, 4, 8):
        assert in_flight_bytes("two_stage_deterministic", {**threads, "pragma_unroll": n}) == n * 2
    assert in_flight_bytes("two_stage_deterministic", threads, "fp32") == 16 * 4
    for n in (0, 2, 4):
        assert in_flight_bytes("vectorized_persistent", {"threads": 256, "blocks_per_sm": 2, "pragma_unroll": n}) == 16


def test_grad_clip_persistent_short_of_bytes_in_flight_on_the_h100():
    """The H100 (stored s96969, bf16 N=16,777,216) ran vectorized_persistent with 512 resident threads an SM 1.16-1.23x
    slower than with 1,024 or 2,048 (44.0 / 44.3 us against 36.0 / 38.0): 16 bytes a thread in flight there (the
    old model's 32 had 512 threads an SM level, 1.02-1.03x). And a pragma changes nothing (s93131 / s95353, fp32
    N=268,435,456, 256 x 2 blocks: pragma 2 1,242 / 1,269 us, pragma 0 1,231 / 1,265; the old model 1.40x)."""
    fast = [sim_us("grad_clip_cuda", "vectorized_persistent", {"threads": t, "blocks_per_sm": b}, N16M, "bf16")
            for t, b in ((1024, 2), (512, 2))]
    slow = [sim_us("grad_clip_cuda", "vectorized_persistent", {"threads": t, "blocks_per_sm": b}, N16M, "bf16")
            for t, b in ((512, 1), (256, 2))]
    assert min(slow) >= 1.1 * max(fast), (fast, slow)
    plain, unrolled = (sim_us("grad_clip_cuda", "vectorized_persistent",
                              {"threads": 256, "blocks_per_sm": 2, "pragma_unroll": n}, N268M, "fp32") for n in (0, 2))
    assert abs(unrolled / plain - 1) < 0.03, (plain, unrolled)


def test_grad_clip_two_stage_follows_its_bytes_in_flight():
    """The H100 (stored s99199, bf16 N=16,777,216, 128 threads): 512 blocks at nvcc's own 16 loads 51.5 us, 1,024
    blocks at `#pragma unroll 2` 71.2 (1.38x): the pragma holds 2 loads a thread in flight where nvcc holds 16, a
    quarter of the grid's bytes in flight for twice the blocks. The old model (nvcc's own depth 4) had 1.36x; with
    the loads counted as built it stays ordered and at least 1.2x."""
    own = sim_us("grad_clip_cuda", "two_stage_deterministic", {"threads": 128, "blocks": 512}, N16M, "bf16")
    two = sim_us("grad_clip_cuda", "two_stage_deterministic", {"threads": 128, "blocks": 1024, "pragma_unroll": 2},
                 N16M, "bf16")
    assert two >= 1.2 * own, (own, two)


PAGED_D2 = {"B": 8, "H": 28, "KVH": 4, "S": 8192, "D": 128, "P": 16}


def test_paged_decode_loop_rungs_registers_are_ptxas():
    """page_tile / multi_page_tile at D=128: about 48 registers + half a tile value a thread (Triton 3.9's ptxas, sm_90a:
    page_tile 2 / 4 warps 64 / 56, multi_page_tile 64 keys on 2 warps 107, 128 keys on 2 / 4 warps 168 / 108-120),
    so 128 keys on 8 warps (ptxas 106) holds two programs an SM, which the estimate 32 + 2 a value (160) held to one.
    The H100 (device d2, stored measurements/h100_simB_d2.json, B=8 H=28 KVH=4 S=8192): 128 keys on 8 warps 360.1 us
    at one stage, 64 keys on 8 warps 649.0 (the old model 525 / 464, the other way)."""
    ptxas = {("page_tile", 2, 0): 64, ("page_tile", 4, 0): 56, ("multi_page_tile", 2, 64): 107,
             ("multi_page_tile", 2, 128): 168, ("multi_page_tile", 4, 128): 114}
    for (rung, warps, keys), regs in ptxas.items():
        params = {"num_warps": warps, "num_stages": 1, **({"BLOCK_N": keys} if keys else {})}
        launch, _ = launch_of("paged_decode_triton", rung, params, PAGED_D2, "fp16")
        assert abs(launch.regs / regs - 1) <= 0.12, (rung, warps, keys, launch.regs)
    launch, task = launch_of("paged_decode_triton", "multi_page_tile", {"BLOCK_N": 128, "num_warps": 8, "num_stages": 1},
                             PAGED_D2, "fp16")
    assert blocks_per_sm(launch, task.gpu) >= 2
    wide, narrow = (sim_us("paged_decode_triton", "multi_page_tile", {"BLOCK_N": n, "num_warps": 8, "num_stages": 1},
                           PAGED_D2, "fp16") for n in (128, 64))
    assert wide < narrow, (wide, narrow)
