"""Room on the Triton decode rungs whose K/V tile loop feeds no tl.dot (issue 26 item 2): the loop's
own num_stages (tl.range(..., num_stages=N)) is what pipelines such loads in Triton 3.x; the launch's
num_stages leaves them alone. Each value is written into the loop, 1 renders the loop as before, the
launch model's shared memory is Triton 3.9's metadata.shared (sm_90) and its bytes in flight grow
with the depth, which pays where the grid is short (B=1) and not where it already covers DRAM.
Device check (H100, gpu-check of 96 candidates and 9 bugs, data/knobB/stages_grid.py): every value
correct, every bug caught; 2 stages never slower than 1 by more than 9%, where the model's direction
holds or it misses a gain; 3 stages were dropped (1.45-3.2x slower than 2 at 128-key tiles)."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

RUNGS = (("flash_decode_triton", "online_softmax"), ("flash_decode_triton", "split_kv"),
         ("flash_decode_triton", "blocked_two_pass"),
         ("swa_decode_triton", "blocked_online_softmax"), ("swa_decode_triton", "window_block_skip"),
         ("paged_decode_triton", "page_tile"), ("paged_decode_triton", "multi_page_tile"))


@pytest.mark.parametrize("name,tag", RUNGS)
def test_the_loop_names_its_depth_and_one_stage_is_the_plain_loop(name, tag):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", "fp16", m.shapes[0])
    stages = v.param("num_stages")
    assert stages.values == (1, 2) and stages.default == 1
    base = v.defaults()
    one = m.render(v, base, task)
    assert "tl.range(" not in one and "num_stages=" not in one.split("def ", 2)[1]
    code = m.render(v, {**base, "num_stages": 2}, task)
    assert "BLOCK_N, num_stages=2):" in code and "for start in tl.range(" in code
    assert code.replace("tl.range(", "range(").replace(", num_stages=2):", "):") == one


# Triton 3.9 metadata.shared, sm_90a, fp16 (tests/../_kv_pipeline.smem: K and V tiles of the trips
# copied ahead + 2 bytes a head-dim element a warp of reduction scratch)
FIGURES = {  # (BLOCK_N, num_warps, D, num_stages): bytes
    (64, 4, 128, 1): 1024, (64, 4, 128, 2): 33792, (64, 4, 128, 3): 66560,
    (128, 4, 64, 2): 33280, (128, 2, 64, 3): 65792, (16, 2, 128, 3): 16896, (64, 8, 128, 2): 34816,
}


@pytest.mark.parametrize("key,smem", FIGURES.items())
def test_shared_memory_is_tritons(key, smem):
    bn, warps, d, stages = key
    m = REGISTRY["flash_decode_triton"]
    v = m.variant("online_softmax")
    shape = next(s for s in m.shapes if s["D"] == d)
    task = make_task(m, "H100", "fp16", shape)
    assert m.launch(v, {"BLOCK_N": bn, "num_warps": warps, "num_stages": stages}, task).smem_bytes == smem


@pytest.mark.parametrize("name,tag", RUNGS[:1] + RUNGS[2:])       # split_kv's grid is never short
def test_depth_pays_on_a_short_grid_only(name, tag):
    m = REGISTRY[name]
    v = m.variant(tag)
    short = make_task(m, "H100", "fp16", min(m.shapes, key=lambda s: s["B"] * s["H"]))
    p = {**v.defaults(), "num_warps": 8, **({"BLOCK_N": 128} if "BLOCK_N" in v.defaults() else {})}
    t1, t2 = (simulate(m, v, {**p, "num_stages": n}, short).time_ms for n in (1, 2))
    # 32 programs on 132 SMs: the copies ahead are its bytes in flight (H100: 0.5-0.8x). The paged loops are a chain
    # of trips there (paged_decode_triton.PAGED_WAITS: half the round trips a trip at 2 stages, beside the warps'
    # sums that stay): 1.16-1.57x over their grid (H100 page_tile 4 warps: 580.9 / 425.3 us, 1.37x)
    assert t1 > (1.15 if name == "paged_decode_triton" else 1.3) * t2
    wide = make_task(m, "H100", "fp16", max(m.shapes, key=lambda s: s["B"] * s["H"]))
    t1, t2 = (simulate(m, v, {**v.defaults(), "num_stages": n}, wide).time_ms for n in (1, 2))
    assert abs(t2 / t1 - 1) < 0.05           # the resident grid already covers DRAM's latency


@pytest.mark.parametrize("tag,smem", [("page_tile", 9220), ("multi_page_tile", 34048)])
def test_a_paged_loop_stages_its_table_entries_beside_the_tiles(tag, smem):
    """Triton 3.9 sm_90a, 2 stages, P=16, 4 warps, BLOCK_N 64: page_tile's scalar entry (4 B) and
    multi_page_tile's one entry a key (256 B) ride in shared memory with the K/V tiles they address."""
    m = REGISTRY["paged_decode_triton"]
    v = m.variant(tag)
    task = make_task(m, "H100", "fp16", {"B": 16, "H": 32, "KVH": 32, "S": 4096, "D": 128, "P": 16})
    p = {**v.defaults(), "num_warps": 4, "num_stages": 2}
    assert m.launch(v, p, task).smem_bytes == smem


def test_on_gfx942_the_copies_ahead_take_registers_not_lds():
    """Triton 3.9's AMD pipeliner issues the next trip's loads into VGPRs (80 and 118 at 1 and 2 stages,
    64 x 128 fp16 on 4 warps) and its LDS stays the reduction scratch (1 KB)."""
    m = REGISTRY["flash_decode_triton"]
    v = m.variant("online_softmax")
    task = make_task(m, "MI300X", "fp16", m.shapes[0])
    one, two = (m.launch(v, {"BLOCK_N": 64, "num_warps": 4, "num_stages": n}, task) for n in (1, 2))
    assert one.smem_bytes == two.smem_bytes == 1024
    assert two.regs - one.regs == 38 and two.bytes_per_access == 2 * one.bytes_per_access
