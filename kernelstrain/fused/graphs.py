"""CUDA graph capture of a fused candidate's call: the `cuda_graph` rung.

A host-bound call (fused/timing.call_ms: the host issues it slower than its kernels run) loses
its time to Python: ModelNew's call, each PyTorch op a kept step issues, each extension call or
Triton launch. Fusing removes some of those calls; capturing the whole call in a CUDA graph
removes the rest. ModelNew records its plan's launches once (torch.cuda.CUDAGraph) on static
input tensors, and each call copies its inputs into them and replays the graph: one replay
instead of every launch, whatever the plan launches.

What that costs, in the terms timing.py already prices:
- the host: ModelNew's module call, one `copy_` a tensor input (a PyTorch op each) and the
  replay (one call into C++ that launches: priced as a PyTorch op, HOST_DISPATCH_US);
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

Off the menus until a device run checks it (KERNELSTRAIN_DEVICE_UNCHECKED=1 offers it): the
capture path is new code no device has run (/work/dev/fused jobs: scripts/fused_graph_check.py).

>>> print(on_current_stream("    k1_kernel<<<blocks, K1_THREADS>>>("))
#include <c10/cuda/CUDAStream.h>
    k1_kernel<<<blocks, K1_THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
"""
from __future__ import annotations

import math
import os
import re

from ..gpus import GPU
from .timing import EAGER_MEMORY_EFF
from .types import DTYPE_BYTES



def offered() -> bool:
    """Whether the graph rungs are on the menus: only with KERNELSTRAIN_DEVICE_UNCHECKED=1 until a device run
    checks them (read when a module's ladder is built)."""
    return os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1"

STREAM_INCLUDE = "#include <c10/cuda/CUDAStream.h>\n"
_LAUNCH = re.compile(r"<<<(.+?)>>>")


def on_current_stream(source: str) -> str:
    """The CUDA source with every kernel launched on PyTorch's current stream (the stream a capture records)."""
    body = _LAUNCH.sub(lambda m: f"<<<{m.group(1)}, 0, c10::cuda::getCurrentCUDAStream()>>>", source)
    return body if body == source or STREAM_INCLUDE in body else STREAM_INCLUDE + body


def graph_host_calls(inputs: list) -> dict:
    """What the host does in one graphed call (timing.host_calls' kinds): ModelNew's call, a copy_ a
    tensor input and the replay."""
    return {"module": 1, "op": len(inputs) + 1}


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
