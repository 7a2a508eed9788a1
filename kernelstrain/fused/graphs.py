"""CUDA graph capture of a fused candidate's call: the `cuda_graph` rung.

A host-bound call (fused/timing.call_ms: the host issues it slower than its kernels run) loses
its time to Python: ModelNew's call, each PyTorch op a kept step issues, each extension call or
Triton launch. Fusing removes some of those calls; capturing the whole call in a CUDA graph
removes the rest. ModelNew records its plan's launches once (torch.cuda.CUDAGraph) on static
input tensors, and each call copies its inputs into them and replays the graph: one replay
instead of every launch, whatever the plan launches.

What that costs, in the terms timing.py already prices:
- the host: ModelNew's module call, one `copy_` a tensor input (a PyTorch op each) and the
  replay (timing.HOST_REPLAY_US: the device's probe timed a replay at 0.40 of a PyTorch op);
- the GPU: the plan's kernels as before, each with the back-to-back gap, and one copy kernel
  an input (read and write the input at EAGER_MEMORY_EFF of the bandwidth).
So a graph pays where the plan issues more than a replay and the copies: a Triton plan (19 us a
launch), a plan keeping library calls or module calls; a call of one extension kernel and no
PyTorch op already issues less than a graph's replay and copy (an engineer does not capture it).
Once the host issues less than the GPU runs, the call is GPU-bound again and the kernels' own
launch parameters move it: the graph reopens tuning.

The capture needs every launch on the stream being captured: a load_inline kernel launched on
the legacy default stream (`<<<grid, block>>>`) fails capture ("operation not permitted when
stream is capturing"), so the graphed CUDA source launches on PyTorch's current stream
(on_current_stream). Warm-up is one plain call before the capture (Triton compiles, cuBLAS and
cuDNN initialise their handles and workspaces), on the current stream: no side stream, which
KernelBench's static checker would flag as stream injection.

Checked on an H100 (2026-12-07, fused j1: scripts/fused_graph_check.py, rows in
measurements/h100_fused_graph_j1.jsonl): 10 programs (4 CUDA, 6 Triton; 8 cuda_graph, 2
cuda_graph_gemm), each graphed solution correct on 5 seeded trials through one instance and
bitwise equal to its base plan's output; their calls measured 16.6-27.4 us against 24.7-117 us
for the base plans (graph / base 0.23-0.71, and 1.01 where a 193 us GEMM sets the pace), the
model's 0.37-0.97: it under-states the gain (the fitted module and op costs of this host model
are above what that host measured, docs/fused.md), and orders each program's three calls as measured.
A second H100 host (fused j2, measurements/h100_fused_graph_j2.jsonl): 11 of 11 correct and bitwise
equal again, but that host issues an op in 2.1 us (replay 2.2): there a graph of a one- or two-launch
call is level or slower, and pays only where the plan issues many ops. The gain is the host's; this
model's host is the slow one its constants were fitted on (docs/fused.md, "Rungs that issue less").

>>> print(on_current_stream("    k1_kernel<<<blocks, K1_THREADS>>>("))
#include <c10/cuda/CUDAStream.h>
    k1_kernel<<<blocks, K1_THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
"""
from __future__ import annotations

import math
import re

from ..gpus import GPU
from .timing import EAGER_MEMORY_EFF
from .types import DTYPE_BYTES


STREAM_INCLUDE = "#include <c10/cuda/CUDAStream.h>\n"
_LAUNCH = re.compile(r"<<<(.+?)>>>")


def on_current_stream(source: str) -> str:
    """The CUDA source with every kernel launched on PyTorch's current stream (the stream a capture records)."""
    body = _LAUNCH.sub(lambda m: f"<<<{m.group(1)}, 0, c10::cuda::getCurrentCUDAStream()>>>", source)
    return body if body == source or STREAM_INCLUDE in body else STREAM_INCLUDE + body


def graph_host_calls(inputs: list) -> dict:
    """What the host does in one graphed call (timing.host_calls' kinds): ModelNew's call, a copy_ a tensor
    input (a PyTorch op each) and the replay."""
    return {"module": 1, "op": len(inputs), "replay": 1}


def input_copies_ms(inputs: list, gpu: GPU) -> list[float]:
    """Core times (ms) of the copy kernels that fill the static inputs, one an input (each element read
    and written once)."""
    return [2 * math.prod(i["shape"]) * DTYPE_BYTES.get(i["dtype"], 8) / (gpu.bw_tbs * 1e12 * EAGER_MEMORY_EFF) * 1e3
            for i in inputs]


def graph_methods(args: str, body: list[str]) -> str:
    """ModelNew's methods around a plan's forward body: `run` is the plan, `forward` copies the inputs
    into the static ones and replays the graph (captured on the first call, and again if an input's
    shape or dtype changes)."""
    run = f"    def run(self, {args}):\n" + "".join(f"        {line}\n" for line in body) + "        return x\n"
    forward = (f"\n    def forward(self, {args}):\n"
               f"        args = ({args},)\n"
               "        if self.graph is None or any(a.shape != s.shape or a.dtype != s.dtype\n"
               "                                     for a, s in zip(args, self.static_in)):\n"
               "            self.capture(args)\n"
               "        for s, a in zip(self.static_in, args):\n"
               "            s.copy_(a)\n"
               "        self.graph.replay()\n"
               "        return self.static_out\n")
    capture = ("\n    @torch.no_grad()\n"
               "    def capture(self, args):\n"
               "        # static inputs whose addresses the graph keeps; one plain call first, outside the capture\n"
               "        # (Triton compiles, cuBLAS / cuDNN set up their handles), then the plan's launches recorded once\n"
               "        self.static_in = [a.clone() for a in args]\n"
               "        self.run(*self.static_in)\n"
               "        torch.cuda.synchronize()\n"
               "        self.graph = torch.cuda.CUDAGraph()\n"
               "        with torch.cuda.graph(self.graph):\n"
               "            self.static_out = self.run(*self.static_in)\n")
    return run + forward + capture
