"""What fp8_quant_cuda and fp8_quant_triton share: the op description (dims, shapes, dtypes,
cost, PyTorch reference) in `Fp8QuantSpec`. The descriptions differ in how q is returned
(raw bytes vs the fp8 dtype), so `desc` and the reference's returned q stay per impl.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program


class Fp8QuantSpec(OpModule):
    op, family = "fp8_quant", "quant"
    title = "dynamic per-token FP8 quantization"
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 32, "D": 8192}, {"T": 512, "D": 5120}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 14336}, {"T": 16384, "D": 8192})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    reference_q = "q"                 # what the reference returns for q: the fp8 tensor or a view of it

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=4 * t * d, bytes=t * d * (e + 1) + 4 * t)

    def reference(self, task: Task) -> str:
        fmax, fp8 = ("240.0", "torch.float8_e4m3fnuz") if task.is_hip else ("448.0", "torch.float8_e4m3fn")
        return kernelbench_program(
            task, self.title, args="x",
            body=("x32 = x.float()\n"
                  "        scale = (x32.abs().amax(-1, keepdim=True) / self.fp8_max).clamp(min=1.0 / (self.fp8_max * 512))\n"
                  f"        q = (x32 / scale).clamp(-self.fp8_max, self.fp8_max).to({fp8})\n"
                  f"        return {self.reference_q}, scale.squeeze(-1)"),
            init=f"self.fp8_max = {fmax}", inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda') * 3]")
