"""paged_decode_triton's tl.dot rungs launch without num_stages, so Triton pipelines them at its default 3: the
launch model's shared memory and the compile spec are that launch's (Triton 3.9 metadata.shared, sm_80..sm_120a,
exact), not a one-stage kernel's."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import modelled_launch
from kernelstrain.tasks import make_task

SHAPE = {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}
# (BLOCK_N, metadata.shared at 3 stages) for D=128, a group of 4, fp16, on every NVIDIA arch compiled
TRITON_SHARED = ((32, 21632), (64, 39168), (128, 74240))


@pytest.mark.parametrize("gpu", ("A100", "H100", "RTX5090"))
@pytest.mark.parametrize("tag", ("gqa_dot", "split_kv"))
@pytest.mark.parametrize("block_n, shared", TRITON_SHARED)
def test_dot_rungs_shared_memory_is_tritons_at_its_default_depth(gpu, tag, block_n, shared):
    m = REGISTRY["paged_decode_triton"]
    v = m.variant(tag)
    task = make_task(m, gpu, "fp16", SHAPE)
    p = {**v.defaults(), "BLOCK_N": block_n}
    assert modelled_launch(m, v, p, task).smem_bytes == shared
    assert "num_stages" not in m.render(v, p, task).split("paged_decode_kernel[")[1].split(")")[0]
    assert m.triton_kernels(v, p, task)[0].num_stages == 3


def test_the_rungs_without_tl_dot_compile_unpipelined():
    m = REGISTRY["paged_decode_triton"]
    task = make_task(m, "H100", "fp16", SHAPE)
    for tag in ("key_per_iteration", "page_tile", "multi_page_tile"):
        v = m.variant(tag)
        assert m.triton_kernels(v, v.defaults(), task)[0].num_stages == 1
