"""What fp8_quant_cuda and fp8_quant_triton share: the op description (dims, shapes, dtypes,
cost, PyTorch reference, check shape) in `Fp8QuantSpec`, and the entry points. The two impls
return q differently (raw uint8 codes from CUDA, the fp8 dtype from Triton), so `desc`, the
reference's returned q and the entry's q dtype stay per impl: ENTRY (CUDA) and TRITON_ENTRY.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

# q is compared as fp8 values (one e4m3 step allowed: fp8q), the scales as fp32
_ARGS = (Arg("x", "in", ("T", "D")), Arg("q", "out", ("T", "D"), "uint8", tol="fp8q", view="fp8"),
         Arg("scales", "out", ("T",), "fp32", tol="fp32"), Scalar("T"), Scalar("D"))
ENTRY = Entry("fp8_quant", _ARGS)
TRITON_ENTRY = Entry("fp8_quant", (_ARGS[0], Arg("q", "out", ("T", "D"), "fp8", tol="fp8q"), *_ARGS[2:]))


def fp8_max(task) -> float:
    """Largest finite e4m3 value of the task's fp8 flavour (448 e4m3fn, 240 e4m3fnuz)."""
    return float(task.dialect.fp8_max.rstrip("f"))


class Fp8QuantSpec(OpModule):
    op, family = "fp8_quant", "quant"
    title = "dynamic per-token FP8 quantization"
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 32, "D": 8192}, {"T": 512, "D": 5120}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 14336}, {"T": 16384, "D": 8192})
    vendors = ("nvidia", "amd")
    reference_q = "q"                 # what the reference returns for q: the fp8 tensor or a view of it
    inputs = ("x",)
    check_shape = {"T": 4096, "D": 4096}

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=4 * t * d, bytes=t * d * (e + 1) + 4 * t)

    def reference(self, task: Task) -> str:
        fmax, fp8 = repr(fp8_max(task)), task.dialect.fp8_torch
        return kernelbench_program(
            task, self.title, args="x",
            # the divisor is a tensor: PyTorch's CUDA division by a Python number multiplies by its
            # fp32 reciprocal (one more rounding, scales 1 ulp off IEEE amax / FP8_MAX), its CPU one divides
            body=("x32 = x.float()\n"
                  "        amax = x32.abs().amax(-1, keepdim=True)\n"
                  "        scale = (amax / torch.full_like(amax, self.fp8_max)).clamp(min=1.0 / (self.fp8_max * 512))\n"
                  f"        q = (x32 / scale).clamp(-self.fp8_max, self.fp8_max).to({fp8})\n"
                  f"        return {self.reference_q}, scale.squeeze(-1)"),
            init=f"self.fp8_max = {fmax}", inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda') * 3]")
