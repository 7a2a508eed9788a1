"""Room to tune on the thinnest CUDA modules (issue 26 item 2): parameters a real kernel of the op
has (outputs a thread, tokens a block ...), each written into the candidate's code and modelled in
its launch the way the hardware moves, and far enough apart somewhere on the module's menu that a
step between them is measurable (more than the benchmark's 1-3% noise)."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _task(name, shape, gpu="H100", dtype="bf16"):
    m = REGISTRY[name]
    return m, make_task(m, gpu, dtype, shape)


def _spread(m, v, name, gpu="H100", dtype="bf16") -> float:
    """The largest ratio, over the module's menu of shapes, of the slowest to the fastest value of
    parameter `name` (the rung's other parameters at their defaults)."""
    ratios = []
    for shape in m.shapes:
        task = make_task(m, gpu, dtype, shape)
        times = [r.time_ms for r in (simulate(m, v, {**v.defaults(), name: x}, task) for x in v.param(name).values) if r.ok]
        ratios.append(max(times) / min(times))
    return max(ratios)


@pytest.mark.parametrize("module, tag, name", [
    ("causal_conv1d_cuda", "smem_halo_tile", "items"),
    ("rope_cuda", "vectorized_uint4", "items"),
    ("paged_kv_copy_cuda", "vectorized_uint4", "items"),
])
def test_each_new_parameter_moves_the_time_past_the_noise(module, tag, name):
    m = REGISTRY[module]
    assert _spread(m, m.variant(tag), name) > 1.08


def test_conv1d_smem_tile_takes_outputs_a_thread():
    m, task = _task("causal_conv1d_cuda", {"B": 8, "D": 5120, "L": 2048})
    v = m.variant("smem_halo_tile")
    assert v.defaults() == {"threads": 256, "items": 1}
    code = m.render(v, {"threads": 256, "items": 4}, task)
    assert "#define ITEMS 4" in code and "__shared__ float s[TILE + 3];" in code
    one, four = (m.launch(v, {"threads": 256, "items": i}, task) for i in (1, 4))
    # a tile 4x as long: a quarter of the CTAs, 4 independent 2-byte loads in flight a thread
    assert four.grid * 4 == one.grid and four.bytes_per_access == 4 * one.bytes_per_access
    assert four.smem_bytes == 4 * (1024 + 3) and four.regs > one.regs
    # the scalar-load tile is short of bytes in flight: more outputs a thread is faster, monotonically
    times = [simulate(m, v, {"threads": 256, "items": i}, task).time_ms for i in v.param("items").values]
    assert times == sorted(times, reverse=True)
    # a tile past the row's end (L = 256 under 256 threads) issues no more loads: no value beyond one gains
    # there (the H200: 104/115/118/137 us for items 1/2/4/8), nor 8 where 4 covers the row (L = 1024: 66.6/72.5)
    for shape, covering in (({"B": 64, "D": 1536, "L": 256}, 1), ({"B": 16, "D": 2048, "L": 1024}, 4)):
        _, short = _task("causal_conv1d_cuda", shape)
        at = {i: simulate(m, v, {"threads": 256, "items": i}, short).time_ms for i in v.param("items").values}
        assert all(at[i] >= at[covering] for i in at if i > covering)
    # every bug is still written at every value
    for bug in v.bugs:
        assert m.render(v, {"threads": 256, "items": 8}, task, bug) != m.render(v, {"threads": 256, "items": 8}, task)


def test_rope_uint4_rung_loads_items_a_pass_before_storing():
    m, task = _task("rope_cuda", {"T": 64, "H": 32, "D": 128})
    v = m.variant("vectorized_uint4")
    assert v.defaults() == {"threads": 256, "items": 1}
    code = m.render(v, {"threads": 256, "items": 4}, task)
    # every load of a pass is written before the first store (in-place q / k: the compiler may not hoist them)
    assert "#define ITEMS 4" in code and code.index("a[j] = ") < code.index("xh[j][")
    one, four = (m.launch(v, {"threads": 256, "items": i}, task) for i in (1, 4))
    assert four.bytes_per_access == 4 * one.bytes_per_access and four.regs > one.regs and four.grid == one.grid
    # 64 tokens: a block a token leaves the GPU short of bytes in flight, so loading 4 items a pass pays
    assert simulate(m, v, {"threads": 256, "items": 4}, task).time_ms < 0.9 * simulate(m, v, v.defaults(), task).time_ms
    bug = v.bugs[0]
    assert m.render(v, {"threads": 256, "items": 4}, task, bug) != code


def test_paged_kv_copy_uint4_blocks_load_items_before_storing():
    m, task = _task("paged_kv_copy_cuda", {"NB": 1024, "M": 32, "P": 16, "H": 8, "D": 128})
    v = m.variant("vectorized_uint4")
    assert v.defaults() == {"threads": 128, "items": 1}
    code = m.render(v, {"threads": 128, "items": 4}, task)
    # source and destination are blocks of one cache array: the loads are written ahead of the stores
    assert "#define ITEMS 4" in code and code.index("v[j] = from[") < code.index("to[c0 + j * THREADS] = v[j]")
    one, four = (m.launch(v, {"threads": 128, "items": i}, task) for i in (1, 4))
    assert four.bytes_per_access == 4 * one.bytes_per_access and four.grid == one.grid == 64
    # 32 block pairs (a decode step's copy-on-write) leave 64 blocks for the GPU: more in flight pays
    times = [simulate(m, v, {"threads": 128, "items": i}, task).time_ms for i in (1, 2, 4)]
    assert times == sorted(times, reverse=True) and times[0] > 1.5 * times[2]
    assert m.render(v, {"threads": 128, "items": 4}, task, "off_by_one") != code


def test_the_device_check_plans_every_new_value_and_a_bug_of_each_rung():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "room_device_check.py"
    spec = importlib.util.spec_from_file_location("room_device_check", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    planned = script.cases("H100")
    assert [c["idx"] for c in planned] == list(range(len(planned)))            # the runner's key
    for module, tag, name, _ in script.NEW:
        rows = [c for c in planned if (c["module"], c["variant"]) == (module, tag)]
        assert {c["params"][name] for c in rows} == set(REGISTRY[module].variant(tag).param(name).values)
        assert any(c["bug"] and c["label"] == "wrong_result" for c in rows)
