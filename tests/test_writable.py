"""The engine never writes a Triton register tile too big to build reliably (sim.TILE_VALUES_MAX):
on the H200, rmsnorm_triton multi_row_tile with 16 rows x 8192 on one warp (4096 values a thread)
gave no result (the compile did not finish), a 2048 one timed out once; 1024 a thread always ran."""
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.profiles import load_profile
from kernelstrain.sim import writable
from kernelstrain.tasks import best_config, make_task

BIG = {"rmsnorm_triton": {"T": 16384, "D": 8192}, "softmax_triton": {"R": 256, "C": 151936}}


def task(name):
    m = REGISTRY[name]
    return m, make_task(m, "H200", "bf16" if name == "rmsnorm_triton" else "fp32", BIG[name])


def test_the_tiles_the_h200_could_not_build_are_not_writable():
    m, t = task("rmsnorm_triton")
    rows = m.variant("multi_row_tile")
    assert not writable(m, rows, {"ROWS": 16, "num_warps": 1}, t)      # 4096 values a thread
    assert not writable(m, rows, {"ROWS": 8, "num_warps": 1}, t)       # 2048: built, but not reliably
    assert writable(m, rows, {"ROWS": 4, "num_warps": 1}, t)           # 1024: built and ran
    m, t = task("softmax_triton")
    whole = m.variant("whole_row_registers")
    assert not writable(m, whole, {"num_warps": 4}, t) and writable(m, whole, {"num_warps": 8}, t)


def test_episodes_never_propose_an_unwritable_tile():
    search = load_profile("kernelinfer").search
    for name in BIG:
        m, t = task(name)
        seen, tiles = 0, set()
        for seed in range(16):      # sessions end when their evidence says so: enough of them to see 100 steps
            ep = Episode(m, t, {k: seeded_rng("writable", name, seed, k) for k in STREAMS}, 120, 0.12, 0.03,
                         30, search)
            unwritable = [(v.tag, v.params) for v in ep.rungs for p in ep.grid(v) if not ep.writable(p)]
            assert unwritable == []
            for s in ep.run():
                seen += 1
                tiles.add(s.tag)
                assert writable(m, m.variant(s.tag), s.params, t), (name, seed, s.step, s.tag, s.params)
        # the sessions did explore the register-tile rungs whose big configs are filtered out
        assert seen > 100 and tiles & {"multi_row_tile", "whole_row_registers", "persistent"}


def test_best_config_is_a_writable_one():
    for name in BIG:
        m, t = task(name)
        _, v, params = best_config(m, t)
        assert writable(m, v, params, t)
