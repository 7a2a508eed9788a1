"""Room on the Triton rungs that launched at a fixed num_warps (issue 26 item 2): num_warps is the
launch option every Triton kernel's autotune configs list. Each value is written into the
candidate's launch line and its compile spec, moves the launch model (threads, accumulator
registers a thread), and the rung's default candidate is the one it rendered before."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

RUNGS = (
    ("gemm_fp16_triton", "tl_dot_blocked"), ("gemm_fp16_triton", "grouped_swizzle"),
    ("grouped_gemm_triton", "expert_grid_dot"),
    ("gemm_splitk_triton", "tl_dot_tiles"), ("gemm_splitk_triton", "split_k_reduce"),
    ("gemm_splitk_triton", "split_k_atomic"),
    ("gemm_fp4_triton", "fused_dequant_dot"), ("gemm_fp4_triton", "dequant_then_dot"),
    ("gemm_fp4_triton", "dot_scaled"),
    ("rope_triton", "persistent"), ("selective_scan_triton", "chunked_assoc_scan"),
)


@pytest.mark.parametrize("name,tag", RUNGS)
def test_num_warps_is_in_the_code_and_the_model(name, tag):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    warps = v.param("num_warps")
    assert warps.default == 4 and len(warps.values) >= 2
    base = v.defaults()
    # the default candidate renders as the rung did without the parameter (Triton's default launch)
    assert m.render(v, base, task) == m.render(v, {k: x for k, x in base.items() if k != "num_warps"}, task)
    codes = set()
    for w in warps.values:
        p = {**base, "num_warps": w}
        code = m.render(v, p, task)
        assert f"num_warps={w}" in code
        codes.add(code)
        assert any(k.num_warps == w for k in m.triton_kernels(v, p, task))
        launch = m.launch(v, p, task)
        assert launch.threads == w * task.gpu.warp
    assert len(codes) == len(warps.values)


@pytest.mark.parametrize("name,tag", [("gemm_fp16_triton", "tl_dot_blocked"), ("gemm_splitk_triton", "split_k_reduce")])
def test_eight_warps_halve_the_accumulator_a_thread_holds(name, tag):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    p = {**v.defaults(), "BLOCK_M": max(v.param("BLOCK_M").values), "BLOCK_N": max(v.param("BLOCK_N").values)}
    four, eight = (m.launch(v, {**p, "num_warps": w}, task) for w in (4, 8))
    assert eight.threads == 2 * four.threads and eight.regs < four.regs


@pytest.mark.parametrize("tag", ["gqa_dot", "split_kv"])
def test_swa_decode_stages_are_in_the_launch_and_its_shared_memory(tag):
    """swa_decode's tl.dot rungs load contiguous K/V tiles, which Triton multi-buffers num_stages deep;
    the launch line names the depth (3: the launch's default these rungs ran at) and the model's shared
    memory is Triton 3.9's metadata.shared at 16 rows x 64 keys x D=128 (sm_80 and sm_90 alike)."""
    from kernelstrain.sim import simulate
    m = REGISTRY["swa_decode_triton"]
    v = m.variant(tag)
    assert v.param("num_stages").default == 3
    shape = {"B": 1, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128}
    task = make_task(m, "H100", "fp16", shape)
    figures = {1: 22528, 2: 38912, 3: 71680}
    for stages, smem in figures.items():
        p = {**v.defaults(), "BLOCK_N": 64, "num_stages": stages}
        assert f"num_stages={stages})" in m.render(v, p, task)
        assert m.triton_kernels(v, p, task)[0].num_stages == stages
        assert m.launch(v, p, task).smem_bytes == smem
    deep = {**v.defaults(), "BLOCK_N": 128, "num_stages": 3}
    assert simulate(m, v, deep, task).ok                                           # 136 KB: an H100 block holds it
    assert simulate(m, v, deep, make_task(m, "A10", "fp16", shape)).error_class == "smem"   # an A10 block: 99 KB
    one, three = (simulate(m, v, {**v.defaults(), "num_stages": s}, task).time_ms for s in (1, 3))
    assert one > three                     # one sequence: each tile's loads wait on the last tile's softmax
