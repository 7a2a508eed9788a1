"""gemm_fp4's shape rules are read by `--shape` (kernelstrain sim): G is 16 (nvfp4) or 32 (mxfp4), K and N are
multiples of 128 as the op's description says. Before, `sim --shape M=1024,N=2048,K=4096,G=15` died with an
internal KeyError: 15 and odd K / N were timed (simB's alignment audit, session 14)."""
import pytest

from kernelstrain.errors import UsageError
from kernelstrain.ops import REGISTRY
from kernelstrain.shapes import parse_shape

FP4 = ("gemm_fp4_cuda", "gemm_fp4_triton")


@pytest.mark.parametrize("name", FP4)
@pytest.mark.parametrize("text, says", [("M=1024,N=2048,K=4096,G=15", "G=15: must be one of 16, 32"),
                                        ("M=1024,N=2048,K=4095,G=16", "K=4095: gemm_fp4_"),
                                        ("M=1024,N=2047,K=4096,G=32", "N=2047: gemm_fp4_")])
def test_bad_fp4_shapes_are_usage_errors(name, text, says):
    with pytest.raises(UsageError, match=says):
        parse_shape(text, REGISTRY[name])


@pytest.mark.parametrize("name", FP4)
def test_every_menu_shape_parses(name):
    m = REGISTRY[name]
    for shape in m.shapes:
        assert parse_shape(",".join(f"{k}={v}" for k, v in shape.items()), m) == shape
