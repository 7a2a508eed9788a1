"""The host side of a fused call, measured one kind of call at a time (fused/timing.py's HOST_* constants):
each timed as the device check times a candidate (median of 7 batches of back-to-back calls, CUDA events)
on tensors of a few elements, so that the GPU waits on the host and the time a call is the host's.

    python3 scripts/fused_host_probe.py build       # the probe's load_inline extension (CPU; minutes of nvcc)
    python3 scripts/fused_host_probe.py --out host.json

Kinds (us a call, the loop's own cost subtracted: a call of a plain Python function):
  module    an nn.Module's __call__ whose forward returns its input
  op        torch.relu on a CUDA tensor (one PyTorch op from Python, its launch included)
  library   F.linear with a bias (cuBLAS) less an op
  cuda      a load_inline function allocating its output and launching one kernel
  triton    a Triton wrapper as the fused solutions write it (torch.empty_like, then kernel[grid](...))
  compiled_linear_relu  torch.compile of nn.Linear -> relu (one library call, one Inductor kernel): the
            model's torch_compile_ms counts module + op + library + triton (timing.compiled_ms)
`build` also compiles that module once, so that the measurement finds Inductor's and Triton's caches warm.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BATCHES, CALLS = 7, 200
CUDA_SRC = r"""
__global__ void copy_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
torch::Tensor probe_copy(torch::Tensor x) {
    auto y = torch::empty_like(x);
    copy_kernel<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


def extension():
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="fused_host_probe", cpp_sources="torch::Tensor probe_copy(torch::Tensor x);",
                       cuda_sources=CUDA_SRC, functions=["probe_copy"], extra_cuda_cflags=["-O3"], verbose=False)


def compiled_module():
    import torch

    class LinearRelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.linear(x))
    model = torch.compile(LinearRelu().cuda())
    x = torch.randn(4, 8, device="cuda")
    with torch.no_grad():
        model(x)
    return model, x


def per_call_us(fn) -> float:
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(BATCHES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return sorted(times)[BATCHES // 2]


def measure() -> dict:
    import torch
    import torch.nn.functional as F
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    def triton_copy(x):
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, num_warps=4)
        return y

    class Identity(torch.nn.Module):
        def forward(self, x):
            return x

    x = torch.randn(8, device="cuda")
    w, b = torch.randn(8, 8, device="cuda"), torch.randn(8, device="cuda")
    ext, identity = extension(), Identity()
    compiled, x2 = compiled_module()
    with torch.no_grad():
        loop = per_call_us(lambda: None)
        raw = {"loop": loop, "module": per_call_us(lambda: identity(x)), "op": per_call_us(lambda: torch.relu(x)),
               "linear": per_call_us(lambda: F.linear(x, w, b)), "cuda": per_call_us(lambda: ext.probe_copy(x)),
               "triton": per_call_us(lambda: triton_copy(x)), "compiled_linear_relu": per_call_us(lambda: compiled(x2))}
    out = {k: round(v - loop, 2) for k, v in raw.items() if k not in ("loop", "linear")}
    out["library"] = round(raw["linear"] - raw["op"], 2)
    return {"us": out, "raw_us": {k: round(v, 2) for k, v in raw.items()}, "torch": torch.__version__,
            "triton": triton.__version__, "device": torch.cuda.get_device_name()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", nargs="?", choices=("build",))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "build":
        extension()
        compiled_module()
        return 0
    result = measure()
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
