"""The op-module contract: what every (op, impl) pair declares and renders.

An op module is one kernel to write, in one language. It declares a ladder of
structural variants (naive -> expert), each variant's tunable parameters and the arch
features it needs, a cost (FLOPs, minimum DRAM bytes) per shape, a launch model
(grid, threads, shared memory, registers ...) per candidate, and `render()` which
returns the complete candidate source. The simulator (sim.py) turns a launch model into
time; the engine (engine.py) walks the ladder.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..gpus import GPU

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5}
# CUDA C++ storage type of each dtype (HIP spells the 16-bit ones the same through its
# headers). fp8 is e4m3 on NVIDIA; on MI300X the fnuz flavour.
C_TYPE = {"fp32": "float", "fp16": "half", "bf16": "__nv_bfloat16", "fp8": "__nv_fp8_e4m3",
          "int8": "int8_t"}
HIP_C_TYPE = {**C_TYPE, "bf16": "__hip_bfloat16", "fp8": "__hip_fp8_e4m3_fnuz"}
TRITON_DTYPE = {"fp32": "tl.float32", "fp16": "tl.float16", "bf16": "tl.bfloat16",
                "fp8": "tl.float8e4nv", "int8": "tl.int8"}
TORCH_DTYPE = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16",
               "fp8": "torch.float8_e4m3fn", "int8": "torch.int8"}
# Triton signature strings for pointers of each dtype (verify.py compiles with these).
TRITON_PTR = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16", "fp8": "*fp8e4nv", "int8": "*i8"}

# Risky transformations a variant may carry (render(..., bug=NAME) writes the bug into
# the code). Values describe the bug for feedback and docs.
BUGS = {
    "no_bounds_check": "dropped the tail bounds check",
    "missing_barrier": "removed a __syncthreads()/barrier between shared-memory write and read",
    "half_accumulator": "accumulates in the storage precision instead of fp32",
    "bad_combine_index": "indexes the wrong partial in the split combine",
    "wrong_init": "initialises the running max/sum with the wrong identity",
    "off_by_one": "loop or mask bound off by one",
    "missing_scale": "drops a scale factor",
    "racy_update": "plain store where an atomic update is needed",
}


@dataclass(frozen=True)
class Cost:
    """Minimum work of a task: FLOPs and DRAM bytes (each input read once, output written once).

    >>> Cost(10, 100) + Cost(5, 20)
    Cost(flops=15, bytes=120)
    """
    flops: float
    bytes: float

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.flops + other.flops, self.bytes + other.bytes)


@dataclass(frozen=True)
class Param:
    """A tunable parameter: its name, the values a sweep may try, the default."""
    name: str
    values: tuple
    default: object

    def __post_init__(self):
        if self.default not in self.values:
            raise ValueError(f"param {self.name}: default {self.default!r} not in {self.values!r}")


@dataclass(frozen=True)
class Variant:
    """One rung of a ladder: a structure of the kernel, named by the technique it uses."""
    tag: str                          # snake_case technique name; the code visibly uses it
    title: str                        # one line for prompts and docs
    params: tuple = ()                # Param, ...
    needs: frozenset = frozenset()    # arch features, see gpus.FEATURE_MIN_TARGET
    path: str = "fp32"                # datapath the FLOPs run on: fp32 | fp16 | fp8 | int8 | fp4
    compute_eff: float = 0.5          # best fraction of the path's peak this structure reaches
    memory_eff: float = 0.9           # best fraction of DRAM bandwidth this structure reaches
    bugs: tuple = ()                  # names from BUGS that render() can inject here
    smem: str = "none"                # none | static | dynamic: how shared memory is declared
    faults: tuple = ()                # names from bugs that crash at run time instead of giving numbers

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"variant {self.tag} has no param {name!r}")

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}


@dataclass(frozen=True)
class Launch:
    """What the simulator needs to know about one candidate's launch.

    grid/threads describe the main (heaviest) kernel; `launches` counts every kernel the
    candidate launches (a split-K combine is a second launch).
    """
    grid: int                    # blocks / programs of the main kernel
    threads: int                 # threads per block (Triton: num_warps * warp)
    smem_bytes: int = 0          # shared memory per block (static + dynamic)
    regs: int = 32               # registers per thread
    bytes_per_access: int = 4    # bytes one thread moves per load instruction (vector width)
    traffic: float = 1.0         # DRAM bytes moved / minimum bytes (re-reads, spills, partials)
    compute_scale: float = 1.0   # param-dependent compute efficiency (tile shape, pipelining)
    tile_quant: float = 1.0      # useful / padded work of the tiling
    lane_util: float = 1.0       # fraction of launched lanes doing useful work
    launches: int = 1
    serial_atomics: int = 0      # atomic updates of one address: the L2 applies them one at a time


@dataclass(frozen=True)
class Task:
    """A kernel to write: module, GPU, dtype and shape (dims in the module's order)."""
    module: str
    gpu: GPU
    dtype: str
    shape: tuple                  # ((dim, value), ...)

    @property
    def dims(self) -> dict:
        return dict(self.shape)

    def __getitem__(self, dim: str) -> int:
        return self.dims[dim]

    @property
    def is_hip(self) -> bool:
        return self.gpu.vendor == "amd"

    @property
    def key(self) -> str:
        """Stable combo id: module|gpu|dtype|d1=v1,d2=v2."""
        return f"{self.module}|{self.gpu.name}|{self.dtype}|" + ",".join(f"{k}={v}" for k, v in self.shape)


class OpModule:
    """Base class of every op module. Subclasses set the class attributes and override
    cost(), launch(), render() and reference()."""
    op: str = ""
    impl: str = ""                    # cuda | triton
    family: str = ""
    title: str = ""                   # "RMSNorm forward"
    desc: str = ""                    # one paragraph: what the kernel computes
    dims: dict = {}                   # dim name -> meaning
    shapes: tuple = ()                # menu of shapes: ({dim: value}, ...)
    dtypes: tuple = ("fp16", "bf16")
    vendors: tuple = ("nvidia",)      # nvidia and/or amd (CUDA modules on amd render HIP)
    variants: tuple = ()              # Variant ladder, naive first
    baseline: str = ""                # tag of the rung an engineer would start from; "" = the first

    @property
    def name(self) -> str:
        return f"{self.op}_{self.impl}"

    def supports(self, gpu: GPU, dtype: str) -> bool:
        """Whether a (gpu, dtype) pair is a task for this module (baseline must run)."""
        if gpu.vendor not in self.vendors:
            return False
        if dtype == "bf16" and not gpu.supports("bf16"):
            return False
        if dtype == "fp8" and not gpu.supports("fp8"):
            return False
        return not (self.baseline_variant().needs - gpu.features)

    def baseline_variant(self) -> Variant:
        """The episode's starting point: `baseline` when set, else the first rung."""
        return self.variant(self.baseline) if self.baseline else self.variants[0]

    def variant(self, tag: str) -> Variant:
        for v in self.variants:
            if v.tag == tag:
                return v
        raise KeyError(f"{self.name} has no variant {tag!r}")

    # -- to override -------------------------------------------------------------
    def cost(self, task: Task) -> Cost:
        raise NotImplementedError

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        raise NotImplementedError

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        raise NotImplementedError

    def reference(self, task: Task) -> str:
        """PyTorch reference in KernelBench form: Model, get_inputs, get_init_inputs."""
        raise NotImplementedError

    def signature(self, task: Task) -> str:
        """The entry point the candidate must provide, one line."""
        raise NotImplementedError

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        """Triton modules: [KernelSpec, ...] describing each @triton.jit kernel in the
        render, so verify.py can compile it without a GPU."""
        return []

    def compile_specs(self, variant: Variant, params: dict, task: Task) -> list:
        """triton_kernels() with the launch value of every integer argument named after a
        shape dim filled in, so a compile specializes like the launch (see KernelSpec.ints)."""
        specs = []
        for s in self.triton_kernels(variant, params, task):
            dims = {k: v for k, v in task.shape if s.signature.get(k) in ("i32", "i64")}
            specs.append(replace(s, ints={**dims, **s.ints}))
        return specs


@dataclass(frozen=True)
class KernelSpec:
    """How to compile one @triton.jit kernel of a rendered Triton candidate."""
    name: str                     # function name in the source
    signature: dict               # arg -> "*fp16" | "i32" | "fp32" | "constexpr"
    constexprs: dict = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    # launch values of integer args (strides, split lengths): Triton's launcher turns a 1 into a
    # constant and marks multiples of 16, and both change vectorization and pipelining
    ints: dict = field(default_factory=dict)


# -- shared helpers for renders ----------------------------------------------------

def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def triton_stage_buffers(task: Task, stages: int, rows: int) -> int:
    """Operand buffers Triton (3.9) allocates for a loop pipelined `num_stages` deep, as its
    compiler reports them: every stage when the dot runs on wgmma (sm_90, tiles of 64+ rows),
    one fewer on the mma.sync path (sm_8x, narrower tiles on sm_90) and on gfx942.

    >>> from kernelstrain.gpus import GPUS
    >>> [triton_stage_buffers(Task(None, GPUS[g], "fp16", ()), 4, 128) for g in ("H100", "A100", "MI300X")]
    [4, 3, 3]
    """
    wgmma = "wgmma" in task.gpu.features and rows >= 64
    return max(1, stages if wgmma else stages - 1)


_HIP_NAMES = ("Stream_t", "MemsetAsync", "MemcpyAsync", "MallocAsync", "FreeAsync", "GetDevice", "DeviceGetAttribute",
              "LaunchCooperativeKernel", "OccupancyMaxActiveBlocksPerMultiprocessor",
              "FuncAttributeMaxDynamicSharedMemorySize", "Error_t", "Success", "GetLastError")
HIP_RUNTIME_ALIASES = tuple(f"#define cuda{n} hip{n}" for n in _HIP_NAMES) + (
    "#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount",
    # HIP takes the kernel as const void*, CUDA's C++ API as the function itself
    "#define cudaFuncSetAttribute(f, attr, v) hipFuncSetAttribute((const void*)(f), attr, v)",)


def cuda_prelude(task: Task, extra_includes: tuple = ()) -> str:
    """Includes, the scalar type and warp-reduction helpers for CUDA, or HIP on AMD.

    The helpers are the same names on both so a kernel body reads the same:
    `scalar_t`, `to_float()`, `from_float()`, `warp_sum()`, `warp_max()`, `WARP_SIZE`.
    """
    dtype = task.dtype
    if task.is_hip:
        ctype = HIP_C_TYPE.get(dtype, "float")
        head = ["#include <hip/hip_runtime.h>", "#include <hip/hip_fp16.h>", "#include <hip/hip_bf16.h>",
                "// CUDA runtime names of the host wrapper, mapped to HIP", *HIP_RUNTIME_ALIASES]
        shfl = "__shfl_xor(v, o)"
        warp = 64
    else:
        ctype = C_TYPE.get(dtype, "float")
        head = ["#include <cuda_runtime.h>", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>"]
        if dtype == "fp8":
            head.append("#include <cuda_fp8.h>")
        shfl = "__shfl_xor_sync(0xffffffffu, v, o)"
        warp = 32
    head += ["#include <stdint.h>", *extra_includes]
    return "\n".join(head) + f"""

#define WARP_SIZE {warp}
typedef {ctype} scalar_t;

__device__ __forceinline__ float to_float(scalar_t v) {{ return static_cast<float>(v); }}
__device__ __forceinline__ scalar_t from_float(float v) {{ return static_cast<scalar_t>(v); }}

__device__ __forceinline__ float warp_sum(float v) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += {shfl};
    return v;
}}

__device__ __forceinline__ float warp_max(float v) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v = fmaxf(v, {shfl});
    return v;
}}
"""


TRITON_PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"


def triton_dtype(dtype: str, task: Task | None = None) -> str:
    """Triton element type; fp8 on MI300X is the fnuz flavour."""
    if dtype == "fp8" and task is not None and task.is_hip:
        return "tl.float8e4b8"
    return TRITON_DTYPE[dtype]


def triton_ptr(dtype: str, task: Task | None = None) -> str:
    if dtype == "fp8" and task is not None and task.is_hip:
        return "*fp8e4b8"
    return TRITON_PTR[dtype]


def occupancy_regs(threads: int, regs: int, gpu: GPU) -> int:
    """Blocks per SM allowed by the register file (allocation granularity ignored)."""
    return max(0, gpu.regs_per_sm // max(1, threads * regs))


def kernelbench_program(task: Task, title: str, args: str, body: str, init: str = "pass",
                        inputs: str = "[]", init_inputs: str = "[]") -> str:
    """A PyTorch reference in KernelBench form for one task.

    Shape dims become module constants and DTYPE the task's torch dtype, so `body`,
    `init` and `inputs` may use them by name (indent continuation lines by 8 spaces).
    """
    consts = "\n".join(f"{k} = {v}" for k, v in task.shape)
    return f'''import torch
import torch.nn as nn

{consts}
DTYPE = {TORCH_DTYPE.get(task.dtype, "torch.float16")}


class Model(nn.Module):
    """{title} ({task.dtype})."""

    def __init__(self):
        super().__init__()
        {init}

    def forward(self, {args}):
        {body}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return {init_inputs}
'''
