"""Triton rungs whose launch names no num_stages run at Triton's default 3 on NVIDIA (base.launch_stages): the
launch model's shared memory and the compile spec are that launch's (Triton 3.9 metadata.shared), not a one-stage
kernel's. An audit of every Triton rung's default launch on sm_90a (compiled at its spec's depth and at 3) found
two modules whose shared memory differs: paged_decode_triton's and flash_prefill_triton's tl.dot rungs."""
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


# (gpu, D, BLOCK_M, BLOCK_N, warps, metadata.shared at 3 stages): online_softmax, Triton 3.9
FLASH_SHARED = (("H100", 128, 128, 64, 4, 131072), ("H100", 64, 64, 64, 4, 57344), ("H100", 128, 128, 32, 8, 81920),
                ("A100", 128, 128, 64, 4, 98304), ("A10", 128, 128, 64, 4, 98304), ("RTX5090", 64, 128, 32, 8, 32768))


@pytest.mark.parametrize("gpu, d, bm, bn, warps, shared", FLASH_SHARED)
@pytest.mark.parametrize("tag", ("online_softmax", "causal_block_skip"))
def test_flash_prefill_fused_rungs_shared_memory_is_tritons_at_its_default_depth(gpu, d, bm, bn, warps, shared, tag):
    m = REGISTRY["flash_prefill_triton"]
    v = m.variant(tag)
    task = make_task(m, gpu, "fp16", {"B": 1, "H": 32, "S": 512, "D": d})
    p = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}
    assert modelled_launch(m, v, p, task).smem_bytes == shared
    assert all(k.num_stages == 3 for k in m.triton_kernels(v, p, task))


def test_amd_keeps_the_depth_it_was_measured_at():
    for name, tag in (("flash_prefill_triton", "online_softmax"), ("paged_decode_triton", "gqa_dot")):
        m = REGISTRY[name]
        v = m.variant(tag)
        task = make_task(m, "MI300X", "fp16", m.shapes[0])
        assert m.triton_kernels(v, v.defaults(), task)[0].num_stages == 1


@pytest.mark.parametrize("gpu, shared", (("H100", 131072), ("A100", 98304), ("A10", 98304)))
def test_materialized_scores_pv_kernel_is_pipelined_at_the_default_depth(gpu, shared):
    m = REGISTRY["flash_prefill_triton"]
    v = m.variant("materialized_scores")
    task = make_task(m, gpu, "fp16", {"B": 1, "H": 32, "S": 512, "D": 128})
    p = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4}
    assert modelled_launch(m, v, p, task).smem_bytes == shared      # the PV kernel's: the scores kernel's is 65,536
