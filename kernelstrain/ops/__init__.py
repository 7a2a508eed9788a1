"""The registry of op modules: explicit imports, one module per (op, impl), by family.

>>> REGISTRY["rmsnorm_cuda"].family
'norms'
>>> len(REGISTRY), len({m.op for m in REGISTRY.values()})
(75, 54)
"""
from __future__ import annotations

from .base import OpModule, Rung



class Registry(dict):
    """Op modules by name. A name not registered may be made on demand by a maker registered
    with `make_with` (kernelstrain.fused.module registers the fused programs' modules,
    `fused_s{seed}_{index}_{impl}`, when it is imported: the registry imports nothing above
    it); iteration, `len` and `in` see the registered modules only; `get` finds both."""

    def __init__(self):
        super().__init__()
        self.makers: list = []

    def make_with(self, maker) -> None:
        """maker(name) -> OpModule | None, asked for names not registered."""
        if maker not in self.makers:
            self.makers.append(maker)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __missing__(self, name: str) -> OpModule:
        for maker in self.makers if isinstance(name, str) else ():
            module = maker(name)
            if module is not None:
                return module
        raise KeyError(name)


REGISTRY: Registry = Registry()


def register(module: OpModule) -> OpModule:
    """Add a module; a duplicate name, a short ladder or a missing piece raises."""
    if module.name in REGISTRY:
        raise ValueError(f"op module {module.name!r} registered twice")
    if len(module.variants) < 4:
        raise ValueError(f"{module.name}: a ladder needs at least 4 variants")
    cls = type(module)
    for piece in ("launch", "render"):     # a Variant that is not a Rung needs the module's own method
        if getattr(cls, piece) is getattr(OpModule, piece):
            bare = [v.tag for v in module.variants if not isinstance(v, Rung)]
            if bare:
                raise ValueError(f"{module.name}: variants {bare} have no {piece} (declare them as Rungs)")
    if cls.signature is OpModule.signature and module.entry is None:
        raise ValueError(f"{module.name}: no entry (set `entry` on its spec)")
    REGISTRY[module.name] = module
    return module


from .attention.cross_attention_triton import CrossAttentionTriton  # noqa: E402
from .attention.flash_attn_bwd_triton import FlashAttnBwdTriton  # noqa: E402
from .attention.flash_decode_triton import FlashDecodeTriton  # noqa: E402
from .attention.flash_prefill_cuda import FlashPrefillCuda  # noqa: E402
from .attention.flash_prefill_triton import FlashPrefillTriton  # noqa: E402
from .attention.mla_decode_triton import MlaDecodeTriton  # noqa: E402
from .attention.paged_decode_cuda import PagedDecodeCuda  # noqa: E402
from .attention.paged_decode_triton import PagedDecodeTriton  # noqa: E402
from .attention.sliding_window_triton import SlidingWindowTriton  # noqa: E402
from .attention.tree_attention_triton import TreeAttentionTriton  # noqa: E402
from .attention.chunked_prefill_cuda import ChunkedPrefillCuda  # noqa: E402
from .attention.chunked_prefill_triton import ChunkedPrefillTriton  # noqa: E402
from .attention.fused_qkv_rope_cuda import FusedQkvRopeCuda  # noqa: E402
from .attention.fused_qkv_rope_triton import FusedQkvRopeTriton  # noqa: E402
from .attention.swa_decode_cuda import SwaDecodeCuda  # noqa: E402
from .attention.swa_decode_triton import SwaDecodeTriton  # noqa: E402
from .norms.add_rmsnorm_cuda import AddRMSNormCuda  # noqa: E402
from .norms.add_rmsnorm_triton import AddRMSNormTriton  # noqa: E402
from .norms.layernorm_bwd_triton import LayerNormBwdTriton  # noqa: E402
from .norms.layernorm_cuda import LayerNormCuda  # noqa: E402
from .norms.layernorm_triton import LayerNormTriton  # noqa: E402
from .norms.rmsnorm_cuda import RMSNormCuda  # noqa: E402
from .norms.rmsnorm_triton import RMSNormTriton  # noqa: E402
from .activations.bias_gelu_cuda import BiasGeluCuda  # noqa: E402
from .activations.dropout_cuda import DropoutCuda  # noqa: E402
from .activations.softmax_cuda import SoftmaxCuda  # noqa: E402
from .activations.softmax_triton import SoftmaxTriton  # noqa: E402
from .activations.swiglu_bwd_triton import SwigluBwdTriton  # noqa: E402
from .activations.swiglu_fwd_cuda import SwigluFwdCuda  # noqa: E402
from .activations.swiglu_fwd_triton import SwigluFwdTriton  # noqa: E402
from .matmul.gemm_fp16_cuda import GemmFp16Cuda  # noqa: E402
from .matmul.gemm_fp16_triton import GemmFp16Triton  # noqa: E402
from .matmul.gemm_fp8_blockwise_cuda import GemmFp8BlockwiseCuda  # noqa: E402
from .matmul.gemm_fp8_cuda import GemmFp8Cuda  # noqa: E402
from .matmul.gemm_int4_cuda import GemmInt4Cuda  # noqa: E402
from .matmul.gemm_int8_cuda import GemmInt8Cuda  # noqa: E402
from .matmul.gemv_cuda import GemvCuda  # noqa: E402
from .matmul.gemm_fp4_cuda import GemmFp4Cuda  # noqa: E402
from .matmul.gemm_fp4_triton import GemmFp4Triton  # noqa: E402
from .matmul.gemm_splitk_cuda import GemmSplitkCuda  # noqa: E402
from .matmul.gemm_splitk_triton import GemmSplitkTriton  # noqa: E402
from .training.adafactor_cuda import AdafactorCuda  # noqa: E402
from .training.adamw_cuda import AdamwCuda  # noqa: E402
from .training.cross_entropy_bwd_triton import CrossEntropyBwdTriton  # noqa: E402
from .training.cross_entropy_fwd_triton import CrossEntropyFwdTriton  # noqa: E402
from .training.embedding_bwd_cuda import EmbeddingBwdCuda  # noqa: E402
from .training.embedding_fwd_cuda import EmbeddingFwdCuda  # noqa: E402
from .training.grad_clip_cuda import GradClipCuda  # noqa: E402
from .training.prefix_scan_cuda import PrefixScanCuda  # noqa: E402
from .training.reduction_cuda import ReductionCuda  # noqa: E402
from .quant.fp8_quant_cuda import Fp8QuantCuda  # noqa: E402
from .quant.fp8_quant_triton import Fp8QuantTriton  # noqa: E402
from .quant.int8_kv_quant_triton import Int8KvQuantTriton  # noqa: E402
from .sampling.top_p_cuda import TopPCuda  # noqa: E402
from .sampling.topk_cuda import TopkCuda  # noqa: E402
from .sampling.min_p_cuda import MinPCuda  # noqa: E402
from .sampling.min_p_triton import MinPTriton  # noqa: E402
from .ssm.causal_conv1d_cuda import CausalConv1dCuda  # noqa: E402
from .ssm.selective_scan_cuda import SelectiveScanCuda  # noqa: E402
from .ssm.selective_scan_triton import SelectiveScanTriton  # noqa: E402
from .ssm.mamba_step_cuda import MambaStepCuda  # noqa: E402
from .ssm.mamba_step_triton import MambaStepTriton  # noqa: E402
from .moe.grouped_gemm_cuda import GroupedGemmCuda  # noqa: E402
from .moe.grouped_gemm_triton import GroupedGemmTriton  # noqa: E402
from .moe.moe_combine_cuda import MoeCombineCuda  # noqa: E402
from .moe.moe_scatter_cuda import MoeScatterCuda  # noqa: E402
from .misc.embedding_gather_cuda import EmbeddingGatherCuda  # noqa: E402
from .misc.kv_append_cuda import KvAppendCuda  # noqa: E402
from .misc.rope_cuda import RopeCuda  # noqa: E402
from .misc.rope_triton import RopeTriton  # noqa: E402
from .misc.transpose_cuda import TransposeCuda  # noqa: E402
from .misc.paged_kv_copy_cuda import PagedKvCopyCuda  # noqa: E402
from .misc.paged_kv_copy_triton import PagedKvCopyTriton  # noqa: E402
from .misc.conv2d_nhwc_cuda import Conv2dNhwcCuda  # noqa: E402
from .misc.conv2d_nhwc_triton import Conv2dNhwcTriton  # noqa: E402

for _cls in (
    CrossAttentionTriton, FlashAttnBwdTriton, FlashDecodeTriton, FlashPrefillCuda, FlashPrefillTriton, MlaDecodeTriton, PagedDecodeCuda, PagedDecodeTriton, SlidingWindowTriton, TreeAttentionTriton,
    ChunkedPrefillCuda, ChunkedPrefillTriton, FusedQkvRopeCuda, FusedQkvRopeTriton, SwaDecodeCuda, SwaDecodeTriton,
    AddRMSNormCuda, AddRMSNormTriton, LayerNormBwdTriton, LayerNormCuda, LayerNormTriton, RMSNormCuda, RMSNormTriton,
    BiasGeluCuda, DropoutCuda, SoftmaxCuda, SoftmaxTriton, SwigluBwdTriton, SwigluFwdCuda, SwigluFwdTriton,
    GemmFp16Cuda, GemmFp16Triton, GemmFp8BlockwiseCuda, GemmFp8Cuda, GemmInt4Cuda, GemmInt8Cuda, GemvCuda, GemmFp4Cuda, GemmFp4Triton, GemmSplitkCuda, GemmSplitkTriton,
    AdafactorCuda, AdamwCuda, CrossEntropyBwdTriton, CrossEntropyFwdTriton, EmbeddingBwdCuda, EmbeddingFwdCuda, GradClipCuda, PrefixScanCuda, ReductionCuda,
    Fp8QuantCuda, Fp8QuantTriton, Int8KvQuantTriton,
    TopPCuda, TopkCuda, MinPCuda, MinPTriton,
    CausalConv1dCuda, SelectiveScanCuda, SelectiveScanTriton, MambaStepCuda, MambaStepTriton,
    GroupedGemmCuda, GroupedGemmTriton, MoeCombineCuda, MoeScatterCuda,
    EmbeddingGatherCuda, KvAppendCuda, RopeCuda, RopeTriton, TransposeCuda, PagedKvCopyCuda, PagedKvCopyTriton, Conv2dNhwcCuda, Conv2dNhwcTriton,
):
    register(_cls())
