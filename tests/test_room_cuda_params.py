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
    ("softmax_cuda", "register_cached", "threads"), ("softmax_cuda", "register_cached", "rows_per_block"),
    ("paged_decode_cuda", "split_kv", "partition"), ("paged_decode_cuda", "gqa_cp_async", "partition"),
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


def test_paged_decode_splits_finer_where_the_batch_leaves_the_gpu_idle():
    m = REGISTRY["paged_decode_cuda"]
    v = m.variant("gqa_cp_async")
    assert v.param("partition").values == (64, 128, 256, 512, 1024) and v.defaults()["partition"] == 512
    _, one = _task("paged_decode_cuda", {"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16})
    _, many = _task("paged_decode_cuda", {"B": 64, "H": 64, "KVH": 8, "S": 4096, "D": 128, "P": 16})
    # one sequence of 8 KV heads: 64 CTAs at 512 tokens a split, 512 at 64
    assert m.launch(v, {**v.defaults(), "partition": 64}, one).grid == 8 * m.launch(v, v.defaults(), one).grid == 512

    def best(task):
        return min(v.param("partition").values,
                   key=lambda x: simulate(m, v, {**v.defaults(), "threads": 256, "partition": x}, task).time_ms)
    # a lone sequence wants the finest split; 64 sequences already fill the GPU and pay for the partials
    assert best(one) == 64 and best(many) >= 256
    assert all(m.render(v, {**v.defaults(), "partition": 64}, one, bug) != m.render(v, {**v.defaults(), "partition": 64}, one)
               for bug in v.bugs)


def test_the_device_check_plans_every_new_value_and_a_bug_of_each_rung():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "room_device_check.py"
    spec = importlib.util.spec_from_file_location("room_device_check", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    planned = script.cases("H100")
    assert [c["idx"] for c in planned] == list(range(len(planned)))            # the runner's key
    for module, tag, name, *_ in script.NEW:
        rows = [c for c in planned if (c["module"], c["variant"]) == (module, tag)]
        assert {c["params"][name] for c in rows} == set(REGISTRY[module].variant(tag).param(name).values)
        assert any(c["bug"] and c["label"] == "wrong_result" for c in rows)


def test_softmax_register_cached_reads_each_row_from_dram_once():
    from kernelstrain import knobs
    from kernelstrain.sim import writable
    m, task = _task("softmax_cuda", {"R": 4096, "C": 32000})
    v, online = m.variant("register_cached"), m.variant("vectorized_online")
    assert v.defaults() == {"threads": 256, "rows_per_block": 1}
    code = m.render(v, v.defaults(), task)
    # 4000 uint4 chunks a row over 256 threads: 16 cached a thread, one load site, three passes on the cache
    assert "#define CHUNKS_PER_THREAD 16" in code and code.count("xv[") == 1 and code.count("cache[j].h[k]") == 3
    assert m.launch(v, v.defaults(), task).traffic == 1.0 and m.launch(online, online.defaults(), task).traffic == 1.5
    # its loops are unrolled whole over the cache: the generic main_unroll knob has no loop to take
    assert knobs.extend(v, "cuda", code, ("main_unroll", "min_blocks")).params[-1].name == "min_blocks"

    def best(variant, t):
        return min(simulate(m, variant, p, t).time_ms for p in _grid(variant)
                   if simulate(m, variant, p, t).ok and writable(m, variant, p, t))
    # a row that fits the registers: one DRAM read instead of two pays by more than the noise
    assert best(v, task) < 0.8 * best(online, task)
    # a 600 KB LM-head row (fp32, C = 151936) is larger than an SM's register file: the cache spills and the
    # split rung stays the fastest; a thread holding 1,187 chunks is not written at all
    _, lm_head = _task("softmax_cuda", {"R": 256, "C": 151936}, dtype="fp32")
    assert m.launch(v, v.defaults(), lm_head).traffic > 1.5
    assert best(v, lm_head) > best(m.variant("split_row_online"), lm_head)
    assert not writable(m, v, {"threads": 32, "rows_per_block": 1}, lm_head)
    # every bug is written at every block size
    for p in ({"threads": 32, "rows_per_block": 8}, {"threads": 1024, "rows_per_block": 1}):
        assert all(m.render(v, p, task, bug) != m.render(v, p, task) for bug in v.bugs)


def _grid(variant):
    from kernelstrain.tasks import param_grid
    return list(param_grid(variant))
