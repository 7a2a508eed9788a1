"""The literature rungs added to the memory-bound / sampling / MoE ladders (issue 26 item 2): each is
appended after the rungs it builds on, writes its technique into the code, and the simulator times
it faster than the old ladder's best only at the shapes whose bottleneck it removes (a grid smaller
than the GPU, a second DRAM read), never under the roofline floor, and slower where it costs more."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import roofline_floor_ms, simulate
from kernelstrain.tasks import make_task, param_grid

NEW = {"topk_cuda": ("split_row_two_stage",), "softmax_cuda": ("split_row_online",),
       "softmax_triton": ("split_row_online",),
"moe_scatter_cuda": ("redundant_rank_one_launch",),
       "moe_combine_cuda": ("column_split_ilp",)}


def best(m, task, tags):
    """Fastest (ms, tag) over every parameter point of the rungs `tags`."""
    return min((r.time_ms, v.tag) for v in m.variants if v.tag in tags and v.offered(task.dtype)
               for p in param_grid(v) for r in [simulate(m, v, p, task)] if r.ok)


def split(name, shape, gpu="H100", dtype=None):
    m = REGISTRY[name]
    task = make_task(m, gpu, dtype or m.dtypes[0], shape)
    old = tuple(v.tag for v in m.variants if v.tag not in NEW[name])
    return m, task, best(m, task, old), best(m, task, NEW[name])


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_rungs_are_appended_and_name_their_technique(name):
    m = REGISTRY[name]
    assert tuple(v.tag for v in m.variants[-len(NEW[name]):]) == NEW[name]
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    marks = {"split_row_two_stage": "topk_merge_kernel", "split_row_online": "softmax_stats_kernel",
             "redundant_rank_one_launch": "block_sum_int(before", "column_split_ilp": "COL_SPLITS"}
    for tag in NEW[name]:
        v = m.variant(tag)
        code = m.render(v, v.defaults(), task)
        assert marks[tag] in code
        for bug in v.bugs:
            assert m.render(v, v.defaults(), task, bug) != code


@pytest.mark.parametrize("name, shape, gain", [
    ("topk_cuda", {"B": 1, "V": 32000, "K": 50}, 3.0),            # one block per row: 1 of 132 SMs
    ("topk_cuda", {"B": 256, "V": 128256, "K": 50}, 1.1),         # the radix passes' re-reads (from smem now)
    ("softmax_cuda", {"R": 32, "C": 128256}, 1.2),                # 32 rows
    ("softmax_triton", {"R": 32, "C": 128256}, 1.2),
    ("moe_scatter_cuda", {"T": 64, "E": 64, "topk": 6, "K": 2048}, 2.0),   # 3 dependent launches
    ("moe_combine_cuda", {"T": 16, "topk": 2, "K": 4096}, 1.2),   # 16 tokens, 16 blocks
])
def test_a_new_rung_wins_where_it_removes_the_bottleneck(name, shape, gain):
    m, task, (old_ms, _), (new_ms, _) = split(name, shape)
    assert old_ms / new_ms >= gain
    assert new_ms > roofline_floor_ms(m, task, m.variants[-1].path)


@pytest.mark.parametrize("name, shape", [
    ("softmax_cuda", {"R": 4096, "C": 32000}),
    ("softmax_triton", {"R": 16384, "C": 1024}),
    ("moe_scatter_cuda", {"T": 8192, "E": 128, "topk": 8, "K": 2048}),  # the recount reads n^2 ids
    ("moe_combine_cuda", {"T": 8192, "topk": 8, "K": 2048}),
])
def test_a_new_rung_does_not_win_where_its_bottleneck_is_absent(name, shape):
    """At most a few % (the timing noise of a ~10 us kernel is 6 %): a different fitted ceiling."""
    _, _, (old_ms, _), (new_ms, _) = split(name, shape)
    assert new_ms >= 0.93 * old_ms
