"""main_unroll is not offered on a warp-specialized kernel (knobs.warp_specialized; issue 26 Build 2, item 2c): its
pragma would land on the mbarrier ring's setup loop, the producer's staging loop or a row-id table, never on a loop
an engineer unrolls, and no device job timed it there. On 3e4e6c8 the knob was offered on all of them and the model
credited the setup loop with loads in flight (gemm_fp16_cuda wgmma_tma: unroll 8 priced 6-12% slower from registers;
fused_qkv_rope_cuda T=2048 HID=5120: 8% faster)."""
import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

WS = [("gemm_fp16_cuda", "wgmma_tma"), ("gemm_fp16_cuda", "wgmma_tma_persistent"), ("gemm_fp16_cuda", "wgmma_split_k"),
      ("gemm_fp8_cuda", "wgmma_tma"), ("gemm_int8_cuda", "wgmma_tma_persistent"), ("gemm_int4_cuda", "dequant_then_wgmma"),
      ("fused_qkv_rope_cuda", "wgmma_tma"), ("conv2d_nhwc_cuda", "wgmma_ws"), ("grouped_gemm_cuda", "wgmma_ws"),
      ("flash_prefill_cuda", "warp_specialized"), ("chunked_prefill_cuda", "warp_specialized_pingpong")]


def _extended(module: str, tag: str, gpu: str = "H100"):
    m = REGISTRY[module]
    v = m.variant(tag)
    task = make_task(m, gpu, "bf16" if "bf16" in m.dtypes else m.dtypes[0], m.shapes[0])
    code = m.render(v, v.defaults(), task)
    return code, knobs.extend(v, "cuda", code, ("min_blocks", "main_unroll"), task.gpu)


@pytest.mark.parametrize("module, tag", WS)
def test_no_main_unroll_on_a_warp_specialized_rung(module, tag):
    code, v = _extended(module, tag)
    assert knobs.warp_specialized(code)
    assert knobs._main_loop(code) is not None          # a loop the pragma would have landed on is there
    assert "main_unroll" not in [p.name for p in v.params]


@pytest.mark.parametrize("module, tag", [("gemm_fp16_cuda", "cp_async_pipeline"), ("flash_prefill_cuda", "wgmma_warpgroup"),
                                         ("conv2d_nhwc_cuda", "cp_async_pipeline")])
def test_main_unroll_stays_on_the_rungs_below(module, tag):
    """The same modules' single-role rungs (every warp loads and multiplies) keep the knob on their K-tile loop."""
    code, v = _extended(module, tag)
    assert not knobs.warp_specialized(code)
    assert "main_unroll" in [p.name for p in v.params]
