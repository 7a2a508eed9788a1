"""The op-module contract: what every (op, impl) pair declares and renders.

An op module is one kernel to write, in one language. It declares a ladder of
structural variants (naive -> expert), each variant's tunable parameters and the arch
features it needs, a cost (FLOPs, minimum DRAM bytes) per shape, a launch model
(grid, threads, shared memory, registers ...) per candidate, and `render()` which
returns the complete candidate source. The simulator (sim.py) turns a launch model into
time; the engine (engine.py) walks the ladder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from ..gpus import GPU
from ..memo import _RUNGS
from ..records import replaced
from .contract import Entry
from .dialect import Dialect, dialect_of, prelude

def unchecked(*values) -> tuple:
    """`values` where KERNELSTRAIN_DEVICE_UNCHECKED=1 (device plans, a refit), else none: parameter values whose
    code runs correct but whose time no device has confirmed, kept off the menus."""
    return values if os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1" else ()


DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5}
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
    # fused programs (kernelstrain/fused): offered only where they break the program's output
    "missing_tail": "drops the scalar tail after the vector loop",
    "broadcast_index": "indexes a per-channel parameter by the flat index, not the element's channel",
    "no_max_subtraction": "exponentiates without subtracting the row max",
    "wrong_reduce_dim": "reduces along the wrong dimension",
    "tf32_dot": "multiplies fp32 tiles in TF32 (tl.dot's default input precision)",
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
    faults: tuple = ()                # bugs that crash at run time rather than give wrong numbers
    dtypes: tuple = ()                # storage dtypes the structure is offered for; () = all the module's
    bug_dtypes: tuple = ()            # ((bug, dtypes), ...): a bug injected only for those dtypes
    bug_params: tuple = ()            # ((bug, param, least), ...): a bug injected only where params[param] >= least
    fit_as: str = ""                  # a measured rung of the module whose calibration this one borrows until it is
                                      # measured itself: the same kernel on another grid (persistent, split-K)
    bug_tasks: tuple = ()             # ((bug, breaks), ...): a bug injected only where breaks(task, params) is true
    fault_tasks: tuple = ()           # ((bug, crashes), ...): a fault of `faults` only where crashes(task, params)

    def offered(self, dtype: str) -> bool:
        """Whether an engineer would use this structure for `dtype` data (16-bit atomics, for
        one, cannot meet bf16's precision where repeated indices accumulate)."""
        return not self.dtypes or dtype in self.dtypes

    def bugs_for(self, dtype: str, params: dict | None = None) -> tuple:
        """The bugs injected for `dtype` data: those of bug_dtypes only where they are wrong at every
        shape (a 16-bit accumulator of per-tile fp32 dot products stays within 1e-2 in fp16), and
        with `params` given, those of bug_params only where the parameters make them wrong (a
        combine that reads its partials in the wrong order is still right with one split).

        >>> r = Rung("demo", "demo rung", launch=lambda p, t: None, render=lambda p, t, acc="f32": acc,
        ...          bugs={"half_accumulator": {"acc": "f16"}}, bug_dtypes=(("half_accumulator", ("bf16",)),),
        ...          bug_params=(("half_accumulator", "splits", 2),))
        >>> r.bugs_for("fp16"), r.bugs_for("bf16"), r.bugs_for("bf16", {"splits": 1})
        ((), ('half_accumulator',), ())
        """
        only = dict(self.bug_dtypes)
        least = {bug: (name, n) for bug, name, n in self.bug_params}
        return tuple(b for b in self.bugs if (b not in only or dtype in only[b])
                     and (params is None or b not in least or params.get(least[b][0], 0) >= least[b][1]))

    def breaks_at(self, bug: str, task, params: dict) -> bool:
        """Whether `bug` is wrong at `task`'s shape and GPU with `params` (bug_tasks): a missing barrier whose
        racing reads all fall in one warp, or a sampler bug that picks the right token on a row
        half the time, is offered only where it cannot pass.

        >>> r = Rung("demo", "demo rung", launch=lambda p, t: None, render=lambda p, t, sync="": sync,
        ...          bugs={"missing_barrier": {"sync": ""}}, bug_tasks=(("missing_barrier", lambda t, p: t > p["warp"]),))
        >>> r.breaks_at("missing_barrier", 32, {"warp": 32}), r.breaks_at("missing_barrier", 64, {"warp": 32})
        (False, True)
        """
        return all(breaks(task, params) for b, breaks in self.bug_tasks if b == bug)

    def faults_at(self, bug: str, task, params: dict) -> bool:
        """Whether `bug` crashes at `task` with `params` rather than give wrong numbers: one of `faults`, where its
        fault_tasks say so (an over-read faults where nothing is mapped past the tensor it leaves).

        >>> r = Rung("demo", "demo rung", launch=lambda p, t: None, render=lambda p, t, cmp="<": cmp,
        ...          bugs={"off_by_one": {"cmp": "<="}}, faults=("off_by_one",), fault_tasks=(("off_by_one", lambda t, p: t > 8),))
        >>> r.faults_at("off_by_one", 4, {}), r.faults_at("off_by_one", 16, {})
        (False, True)
        """
        return bug in self.faults and all(crashes(task, params) for b, crashes in self.fault_tasks if b == bug)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"variant {self.tag} has no param {name!r}")

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}


@dataclass(frozen=True)
class Rung(Variant):
    """A rung declared once: the Variant (technique, params, needs, efficiencies) with its
    launch model `launch(params, task) -> Launch`, its render `render(params, task, **slots)
    -> str` and its bugs. `bugs` is given as a dict: bug name -> the slots it overrides
    ({"init": "1.f"}: a substitution into the render), or a function code -> code where the
    bug is not a substitution. A missing piece raises here, at import.

    >>> r = Rung("demo", "demo rung", launch=lambda p, t: None,
    ...          render=lambda p, t, init="0.f": f"float acc = {init};", bugs={"wrong_init": {"init": "1.f"}})
    >>> r.bugs, r.source({}, None), r.source({}, None, "wrong_init")
    (('wrong_init',), 'float acc = 0.f;', 'float acc = 1.f;')
    """
    launch: Callable = field(default=None, compare=False, repr=False)
    render: Callable = field(default=None, compare=False, repr=False)
    edits: tuple = field(default=(), compare=False, repr=False)   # ((bug, slots | fn), ...) from bugs
    # Triton rungs: the constexpr values of the rung's kernel, consts(params, task) -> dict
    consts: Callable = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if isinstance(self.bugs, dict):
            object.__setattr__(self, "edits", tuple(self.bugs.items()))
            object.__setattr__(self, "bugs", tuple(self.bugs))
        if self.launch is None or self.render is None:
            raise ValueError(f"rung {self.tag}: needs launch= and render=")
        unknown = [b for b in self.bugs if b not in BUGS]
        if unknown:
            raise ValueError(f"rung {self.tag}: unknown bugs {unknown}")
        unedited = [b for b in self.bugs if b not in dict(self.edits)]
        if unedited:
            raise ValueError(f"rung {self.tag}: bugs {unedited} have no edit (pass bugs as a dict)")
        if set(self.faults) - set(self.bugs):
            raise ValueError(f"rung {self.tag}: faults {self.faults} not among its bugs")

    def source(self, params: dict, task, bug: str | None = None) -> str:
        """The rung's code for these params, with `bug` written in."""
        if bug is None:
            return self.render(params, task)
        if bug not in self.bugs:
            raise KeyError(f"rung {self.tag} has no bug {bug!r}")
        edit = dict(self.edits)[bug]
        return edit(self.render(params, task)) if callable(edit) else self.render(params, task, **edit)


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
    rounds: int = 1              # rows / tiles each CTA of a persistent loop takes one after another
    serial_trips: float = 0.0    # DRAM round trips each program waits for in turn (an unpipelined K loop): sim.chain_floor_s
    narrow: float = 1.0          # the memory side's slowdown from one-element loads at misaligned rows (sim.narrowed)
    unrolled: int = 0            # Triton: values of a register tile one thread holds (0: no such tile)
    # seconds of instruction issue the roofline's FLOPs do not count (every thread of a block repeating a merge of
    # the warps' partials): a floor beside the roofline terms, uncalibrated (sim.floor_s)
    issue_s: float = 0.0
    # seconds of a later kernel that runs after the main one (a second pass over a small reduced tensor, a
    # conversion launch), added to the calibrated time as they are (sim.time_ms)
    later_s: float = 0.0
    # the rate of the MMA instruction the kernel issues, a share of the datapath's peak (mma.sync on sm_90: 0.5 of
    # wgmma's): a ceiling on the calibrated compute efficiency, that share of the fit's compute cap over the padded
    # tiles' work (sim.compute_ceiling), not a factor on the whole loop
    mma_rate: float = 1.0
    # the stages a pipelined streaming loop really gets (stream_stages.staged: 1 where it loads no trip ahead -- one
    # trip a program, rows cp.async cannot copy, a thread's share under its smallest copy -- where Triton builds the
    # same code as at num_stages=1; else 1 + the trips it loads ahead); 0: no such loop, the parameter read as written.
    # The fit's num_stages term reads this (sim.stepped_params), so identical compiled code gets identical times
    loop_stages: int = 0


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
        for name, value in self.shape:      # no dict built a lookup: launch models ask ~a million a run
            if name == dim:
                return value
        raise KeyError(dim)

    @property
    def is_hip(self) -> bool:
        return self.gpu.vendor == "amd"

    @property
    def dialect(self) -> Dialect:
        """The C++ dialect of a CUDA-language candidate for this task's GPU."""
        return dialect_of(self.gpu)

    @property
    def key(self) -> str:
        """Stable combo id: module|gpu|dtype|d1=v1,d2=v2."""
        return f"{self.module}|{self.gpu.name}|{self.dtype}|" + ",".join(f"{k}={v}" for k, v in self.shape)


@dataclass(frozen=True)
class TorchRef:
    """The text of an op's PyTorch reference (see kernelbench_program): forward's body, the
    Model's __init__ body, get_inputs' and get_init_inputs' lists. Task dims and DTYPE are
    names in that program, so one TorchRef serves every task of the op."""
    body: str
    init: str = "pass"
    inputs: str = "[]"
    init_inputs: str = "[]"


class OpModule:
    """Base class of every op module. Subclasses set the class attributes and override
    cost(), launch(), render() and reference() (or set torch_ref)."""
    op: str = ""
    impl: str = ""                    # cuda | triton
    family: str = ""
    title: str = ""                   # "RMSNorm forward"
    desc: str = ""                    # one paragraph: what the kernel computes
    dims: dict = {}                   # dim name -> meaning
    shapes: tuple = ()                # menu of shapes: ({dim: value}, ...)
    dtypes: tuple = ("fp16", "bf16")
    vendors: tuple = ("nvidia",)      # nvidia and/or amd (CUDA modules on amd render HIP)
    variants: tuple = ()              # Variant (or Rung) ladder, naive first
    captures: tuple = ()              # tags of rungs that replay another rung's call (a CUDA graph): written
    #                                   after the kernels they capture work, never an engineer's first leap
    baseline: str = ""                # tag of the rung an engineer would start from; "" = the first
    # the op's contract, set on its spec (shared by the CUDA and Triton modules)
    entry: Entry | None = None        # the entry point: arguments, roles, shapes, dtypes
    inputs: tuple = ()                # names of the reference's get_inputs(), in order
    check_shape: dict | None = None   # the shape scripts/gpu_check.py runs on a real GPU
    tolerance: str | None = None      # gpu_check tolerance class; None: by dtype
    torch_ref: TorchRef | None = None  # the PyTorch reference's parts; its forward takes `inputs`

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

    # -- to override (a module of Rungs with an entry overrides only cost and reference) --
    def cost(self, task: Task) -> Cost:
        raise NotImplementedError

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        if isinstance(variant, Rung):
            return variant.launch(params, task)
        raise NotImplementedError

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        if isinstance(variant, Rung):
            return _rendered(self, variant, params, task, bug)
        raise NotImplementedError

    def assemble(self, body: str, variant: Variant, params: dict, task: Task) -> str:
        """The whole candidate around a rung's source: CUDA modules put the dialect's prelude
        first; Triton modules override this to add imports, constants and the wrapper."""
        return f"{prelude(task)}\n{body}" if self.impl == "cuda" else body

    def reference(self, task: Task) -> str:
        """PyTorch reference in KernelBench form: Model, get_inputs, get_init_inputs."""
        if self.torch_ref is None:
            raise NotImplementedError
        ref = self.torch_ref
        return kernelbench_program(task, self.title, ", ".join(self.inputs), ref.body, ref.init, ref.inputs,
                                   ref.init_inputs)

    def signature(self, task: Task) -> str:
        """The entry point the candidate must provide, one line."""
        if self.entry is None:
            raise NotImplementedError
        return self.entry.prototype(task) if self.impl == "cuda" else self.entry.py_signature(task)

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
            specs.append(replaced(s, ints={**dims, **s.ints}))
        return specs


_RENDERS: dict = {}     # (module, rung, params, bug, task) by identity and value -> (module, rung, gpu, code)
RENDERS_MAX = 1 << 9    # an episode's renders asked again (a few hundred distinct ones an episode)


def _rendered(module: OpModule, variant: Rung, params: dict, task: Task, bug: str | None) -> str:
    """module.assemble(variant.source(...)): the candidate's code, kept for the last RENDERS_MAX asked.
    An episode renders the same candidate several times: each rung at its defaults for its knob places
    (knobs.extend), the loop the unroll knob acts on (knobs._loop_kind) and the step's code (Episode.code);
    the history lines' task_constants render the rungs and their parameters' values again (~35% of an
    episode's renders were repeats). The key holds the identities of the module, the rung and the task's
    GPU record (kept alive in the entry, so never another object's) and the params' items, the bug and the
    task's dtype and shape by value; a render is a pure function of them (tests/test_speed_engine.py
    compares it with the plain one). An unhashable parameter value is rendered, not kept. A rung that
    knobs.extend made is known as the rung it extends (memo.same_rung): it renders the same code for the
    same own parameters (tests/test_speed_validate.py, registry-wide), so validate's row checks
    (rerender.render_code, on the module's rung) find the renders of the engine's rebuild of the episode."""
    try:
        key = (id(module), _RUNGS.get(id(variant), id(variant)), tuple(params.items()), bug, id(task.gpu), task.module,
               task.dtype, task.shape)
        found = _RENDERS.get(key)
    except TypeError:
        return module.assemble(variant.source(params, task, bug), variant, params, task)
    if found is not None:
        return found[3]
    code = module.assemble(variant.source(params, task, bug), variant, params, task)
    if len(_RENDERS) >= RENDERS_MAX:
        _RENDERS.clear()        # (an episode's working set refills it; no order kept to evict by)
    _RENDERS[key] = (module, variant, task.gpu, code)
    return code


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


def triton_wgmma(task: Task, rows: int, warps: int = 4) -> bool:
    """Whether Triton (3.9) lowers a tl.dot to wgmma: sm_90, tiles of `triton_full_stage_rows`+ rows, and a
    warpgroup's 4 warps at least. Under 4 warps it is mma.sync (TTGIR #ttg.nvidia_mma versionMajor 2, PTX
    mma.sync.aligned) whatever the tile: gemm_splitk_triton pipelined_split_k 64 x 128 x 128 at 5 stages, fp16,
    compiled for sm_90a on the CPU (scripts/sim_triton_ptx.py): 2 warps 256 mma.sync, metadata.shared
    196,608 B (four buffers); 4 warps 8 wgmma.mma_async, 245,760 B (five)."""
    full = task.gpu.triton_full_stage_rows
    return bool(full) and rows >= full and warps >= 4


def triton_stage_buffers(task: Task, stages: int, rows: int, warps: int = 4) -> int:
    """Operand buffers Triton (3.9) allocates for a loop pipelined `num_stages` deep, as its
    compiler reports them: every stage when the dot runs on wgmma (triton_wgmma), one fewer on
    the mma.sync path (sm_8x, narrower tiles or fewer than 4 warps on sm_90) and on gfx942.

    >>> from kernelstrain.gpus import GPUS
    >>> [triton_stage_buffers(Task(None, GPUS[g], "fp16", ()), 4, 128) for g in ("H100", "A100", "MI300X")]
    [4, 3, 3]
    >>> triton_stage_buffers(Task(None, GPUS["H100"], "fp16", ()), 5, 64, warps=2)
    4
    """
    return max(1, stages if triton_wgmma(task, rows, warps) else stages - 1)


TRITON_PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"
# Triton's num_stages where a launch names none, on NVIDIA (CUDAOptions.num_stages, Triton 3.6 and 3.9): a tl.dot
# loop of such a launch is software-pipelined that deep, its shared memory multi-buffered
TRITON_DEFAULT_STAGES = 3


def launch_stages(params: dict, task: Task) -> int:
    """The pipeline depth a Triton rung's launch runs at: its own num_stages, else Triton's default on NVIDIA;
    1 on AMD, whose default (2 in Triton 3.9's HIP backend) the models were not measured at."""
    if "num_stages" in params:
        return params["num_stages"]
    return TRITON_DEFAULT_STAGES if task.gpu.vendor == "nvidia" else 1


def triton_dtype(dtype: str, task: Task | None = None) -> str:
    """Triton element type; fp8 on MI300X is the fnuz flavour."""
    if dtype == "fp8" and task is not None:
        return task.dialect.fp8_triton
    return TRITON_DTYPE[dtype]


def triton_ptr(dtype: str, task: Task | None = None) -> str:
    if dtype == "fp8" and task is not None:
        return task.dialect.fp8_triton_ptr
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
