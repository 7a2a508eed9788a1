"""The literature rungs added to the memory-bound / sampling / MoE ladders (issue 26 item 2): each is
appended after the rungs it builds on, writes its technique into the code, and the simulator times
it faster than the old ladder's best only at the shapes whose bottleneck it removes (a grid smaller
than the GPU, a second DRAM read), never under the roofline floor, and slower where it costs more."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import roofline_floor_ms, simulate
from kernelstrain.tasks import make_task, param_grid

NEW = {"topk_cuda": ("split_row_two_stage",), "softmax_cuda": ("split_row_online", "smem_cached_row"),
       "grad_clip_cuda": ("register_held_persistent",), "moe_scatter_cuda": ("redundant_rank_one_launch",),
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
             "smem_cached_row": "extern __shared__", "register_held_persistent": "Pack held[ITEMS]",
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
    ("softmax_cuda", {"R": 4096, "C": 32000}, 1.3),               # the row's second read
    ("grad_clip_cuda", {"N": 4194304}, 1.2),                      # the norm pass's data held on chip
    ("moe_scatter_cuda", {"T": 64, "E": 64, "topk": 6, "K": 2048}, 2.0),   # 3 dependent launches
    ("moe_combine_cuda", {"T": 16, "topk": 2, "K": 4096}, 1.2),   # 16 tokens, 16 blocks
])
def test_a_new_rung_wins_where_it_removes_the_bottleneck(name, shape, gain):
    m, task, (old_ms, _), (new_ms, _) = split(name, shape)
    assert old_ms / new_ms >= gain
    assert new_ms > roofline_floor_ms(m, task, m.variants[-1].path)


@pytest.mark.parametrize("name, shape", [
    ("grad_clip_cuda", {"N": 1235814400}),                        # 2.5 GB: a few % of it fits on chip
    ("moe_scatter_cuda", {"T": 8192, "E": 128, "topk": 8, "K": 2048}),  # the recount reads n^2 ids
    ("moe_combine_cuda", {"T": 8192, "topk": 8, "K": 2048}),
])
def test_a_new_rung_does_not_win_where_the_grid_already_fills_the_gpu(name, shape):
    _, _, (old_ms, _), (new_ms, _) = split(name, shape)
    assert new_ms >= 0.97 * old_ms


def test_smem_cached_row_builds_only_where_the_row_fits():
    m = REGISTRY["softmax_cuda"]
    v = m.variant("smem_cached_row")
    fits = make_task(m, "H100", "bf16", {"R": 4096, "C": 32000})        # 64 KB of the 227 KB opt-in
    wide = make_task(m, "H100", "bf16", {"R": 256, "C": 151936})        # 297 KB
    assert simulate(m, v, v.defaults(), fits).ok
    failed = simulate(m, v, v.defaults(), wide)
    assert not failed.ok and failed.error_class == "smem"
    assert m.launch(v, v.defaults(), fits).traffic == 1.0 < m.launch(m.variant("vectorized_online"),
                                                                     m.variant("vectorized_online").defaults(), fits).traffic


def test_register_held_share_shrinks_with_n_and_grows_with_items():
    m = REGISTRY["grad_clip_cuda"]
    v = m.variant("register_held_persistent")
    small, big = (make_task(m, "H100", "bf16", {"N": n}) for n in (4194304, 1235814400))
    p = {"threads": 512, "blocks_per_sm": 2, "items": 4}
    assert m.launch(v, p, small).traffic < m.launch(v, p, big).traffic <= 1.5
    deeper = m.launch(v, dict(p, items=8), small)
    assert deeper.traffic <= m.launch(v, p, small).traffic and deeper.regs > m.launch(v, p, small).regs
