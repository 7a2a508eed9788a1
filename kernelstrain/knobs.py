"""Generic launch knobs a profile may add to every rung: real compiler controls written into
the candidate's code and modelled by the simulator, for modules whose own parameters are few.

- `min_blocks` (CUDA): `__launch_bounds__(THREADS, N)`: ptxas must fit N blocks per SM, so it
  caps the registers per thread; values that do not fit spill to local memory.
- `main_unroll` (CUDA): `#pragma unroll N` on the kernel's main loop: more independent loads
  in flight and less loop overhead, for more registers.
- `bound` (CUDA, a slip, never tuned): `__launch_bounds__(N)` written as a number, the block
  size of the best, in a candidate that launches bigger blocks: the launch fails ("too many
  resources requested for launch") until the bound says THREADS again.
- `optin` (CUDA, a slip, never tuned): a rewrite onto dynamic shared memory whose host code
  lacks cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize, ...): past 48 KB per block the
  launch fails ("invalid argument") until the opt-in is written.

A knob's value 0 leaves the code as the module renders it, so a rung with every knob at 0 is
the module's own candidate. A knob is offered only where its text has a place in the code.

Looked for and not knobs (2026-12-06, the rungs' renders at defaults on the H100): `const __restrict__` (223 of
226 CUDA rungs write it already), the thread-block size (a parameter of every CUDA rung), `__launch_bounds__`
(197 of 226 have it; min_blocks rides on it), Triton's num_warps (a parameter of 150 of 154 rungs),
num_stages and loop_unroll (the modules' own, ops/stream_stages.py and ops/unroll.py), and
`tl.multiple_of` / `tl.max_contiguous` on a row's chunk offsets: Triton already specialises arguments divisible
by 16, and softmax online_softmax and rmsnorm chunked_two_pass build the same PTX with the hints as without.

>>> KNOBS["main_unroll"].values
(0, 2, 4, 8)
>>> print(apply_code("__global__ void __launch_bounds__(THREADS) k(int n) {\\n    for (int i = 0; i < n; ++i) {}\\n}",
...                  {"min_blocks": 2, "main_unroll": 4}))
__global__ void __launch_bounds__(THREADS, 2) k(int n) {
#pragma unroll 4
    for (int i = 0; i < n; ++i) {}
}
"""
from __future__ import annotations

import math
import re

from . import knobs_triton
from .memo import candidate_cache, same_rung
from .ops.base import Launch, Param, Variant
from .records import replaced

OFF = 0
KNOBS = {
    "min_blocks": Param("min_blocks", (0, 1, 2, 3, 4), OFF),
    "main_unroll": Param("main_unroll", (0, 2, 4, 8), OFF),
    "bound": Param("bound", (0, 32, 64, 128, 256, 512, 1024), OFF),
    "optin": Param("optin", (0, 1), OFF),
    **knobs_triton.KNOBS,
}
IMPLS = {"min_blocks": "cuda", "main_unroll": "cuda", "bound": "cuda", "optin": "cuda",
         **{name: "triton" for name in knobs_triton.KNOBS}}
SLIPS = ("bound", "optin")      # knobs only a slip sets: sweeps and grids leave them at 0
# a rung's own parameter that does a knob's work on a loop the module names (ops/unroll.py): the
# generic knob is not offered beside it (two pragmas would compete for one loop)
SUPERSEDED = {"main_unroll": "pragma_unroll"}
OPTIN_FREE = 0xC000             # dynamic + static shared memory a block gets without the opt-in

_BOUNDS = re.compile(r"__launch_bounds__\(\s*([A-Za-z_0-9*() ]+?)\s*\)")
_FOR = re.compile(r"^([ \t]*)for \(", re.M)
_OPTIN = re.compile(r"^[ \t]*cudaFuncSetAttribute\([^\n]*MaxDynamicSharedMemorySize[^\n]*\n", re.M)


def _main_loop(code: str) -> int | None:
    """Offset of the first `for (` line in the first __global__ function that no pragma governs."""
    start = code.find("__global__")
    if start < 0:
        return None
    for m in _FOR.finditer(code, start):
        before = code[:m.start()].rstrip().rsplit("\n", 1)[-1].strip()
        if not before.startswith("#pragma"):
            return m.start()
    return None


# a loop that only fills arrays with constants (`for (...) hist[i] = 0u;`): nothing for an unroll to keep in flight
_FILL = re.compile(r"\s*(?:\{\s*)?(?:\w+\[[^\]\n]*\]\s*=\s*-?[\w.]+\s*;\s*)+\}?\s*")
# an array element's assignment (`a[i] = ...`, not `==`), and a __shared__ declaration (`__shared__ float a[N], b[N];`)
_STORE = re.compile(r"(\w+)\s*\[[^\]\n]*\]\s*=(?!=)")
_SHARED = re.compile(r"__shared__[^;]*;")
# a block-wide barrier (or a wait on an async copy's barrier): no load of the next iteration issues before it
_BARRIER = re.compile(r"__syncthreads\(|\bbar\.sync\b|cp_async_wait|cp\.async\.wait|mbar(?:rier)?_?wait|\.sync\(\)")


def _closing(code: str, at: int, open_: str, close: str) -> int:
    """Offset just past the bracket that closes the first `open_` at or after `at`."""
    depth, i = 0, code.index(open_, at)
    while True:
        depth += {open_: 1, close: -1}.get(code[i], 0)
        i += 1
        if depth == 0:
            return i


def main_loop_kind(code: str) -> str | None:
    """What the loop main_unroll governs (_main_loop) does, from its body: 'fill' (it only stores constants
    into arrays: an initialisation, a shared histogram's zero-fill), 'barrier' (it waits at a block barrier
    every iteration: a GEMM's K-tile loop), 'stage' (it only stores into the block's __shared__ arrays: a table
    of ids, slots or cos/sin staged before the barrier that precedes the kernel's stream), 'stream' (anything
    else); None without such a loop.

    >>> main_loop_kind("__global__ void k() {\\n    for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;\\n}")
    'fill'
    >>> main_loop_kind("__global__ void k() {\\n    for (int kt = 0; kt < KT; ++kt) { load(kt); __syncthreads(); mma(); }\\n}")
    'barrier'
    >>> main_loop_kind("__global__ void k() {\\n    for (int i = threadIdx.x; i < n; i += THREADS) { s += x[i]; }\\n}")
    'stream'
    >>> main_loop_kind("__global__ void k() {\\n    __shared__ float c[64], d[64];\\n"
    ...                "    for (int i = threadIdx.x; i < 64; i += THREADS) { c[i] = x[i]; d[i] = x[64 + i]; }\\n}")
    'stage'
    """
    at = _main_loop(code)
    if at is None:
        return None
    body = _closing(code, at, "(", ")")
    start = body + len(code[body:]) - len(code[body:].lstrip())
    text = code[body:_closing(code, start, "{", "}") if code[start] == "{" else code.index(";", start) + 1]
    if _FILL.fullmatch(text):
        return "fill"
    if _BARRIER.search(text):
        return "barrier"
    stores = _STORE.findall(text)
    return "stage" if stores and set(stores) <= _shared_arrays(code) else "stream"


def _shared_arrays(code: str) -> set:
    """Names of the arrays the code declares __shared__."""
    return {name for decl in _SHARED.findall(code) for name in re.findall(r"(\w+)\s*\[", decl)}


# a producer waiting for its consumers to free a slot of a full / empty mbarrier ring: a warp-specialized kernel
_RING = re.compile(r"mbar(?:rier)?_?wait\(\s*&empty\[")


def warp_specialized(code: str) -> bool:
    """Whether the kernel splits its warps into a producer and consumers on an mbarrier ring (CUTLASS's sm90
    warp-specialized mainloop: gemm_*_cuda wgmma_tma*, grouped_gemm_cuda / conv2d_nhwc_cuda wgmma_ws ...).

    main_unroll is not offered on one: its loops belong to the roles (the producer's copy loop, the consumers' wgmma
    loop; CUTLASS keeps both rolled, CUTLASS_PRAGMA_NO_UNROLL), so no loop is "the kernel's main loop", and the first
    loop no pragma governs -- where the knob's pragma lands -- is the ring's barrier setup (STAGES mbarrier inits, a
    constant trip count nvcc unrolls whole anyway: the pragma changes nothing, where the model credited loads in
    flight), the producer's staging loop (conv2d_nhwc_cuda: untimed, priced as registers alone) or a table of row ids
    (grouped_gemm_cuda: priced as nothing); on a split-K rung, the reduce kernel's loop over the splits. A knob the
    model cannot price is not room: an engineer's step on it measures noise.

    >>> warp_specialized("if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1) & 1);")
    True
    >>> warp_specialized("mbar_wait(&full[s], (kt / STAGES) & 1);")
    False
    """
    return _RING.search(code) is not None


def _places(code: str) -> dict:
    bounds = _BOUNDS.search(code) is not None
    return {"min_blocks": bounds, "main_unroll": _main_loop(code) is not None and not warp_specialized(code),
            "bound": bounds,
            "optin": _OPTIN.search(code) is not None, **knobs_triton.places(code)}


def bound_expression(code: str) -> str | None:
    """The block size a single kernel's __launch_bounds__ names (a macro, not a number): the
    one place the `bound` slip can write a stale number; None elsewhere."""
    found = _BOUNDS.findall(code)
    return found[0] if len(found) == 1 and not found[0].strip().isdigit() else None


def over_bound(params: dict, threads: int) -> bool:
    """A block bigger than the `bound` slip's __launch_bounds__ number: the launch fails."""
    return OFF < params.get("bound", OFF) < threads


def has_optin(code: str) -> bool:
    return _OPTIN.search(code) is not None


def without_optin(params: dict, smem_bytes: int) -> bool:
    """The `optin` slip on a block past 48 KB of shared memory: the launch fails."""
    return bool(params.get("optin", OFF)) and smem_bytes > OPTIN_FREE


def untuned(variant: Variant) -> Variant:
    """The rung with its slip knobs fixed at 0 (what grids and sweeps range over)."""
    return replaced(variant, params=tuple(Param(p.name, (OFF,), OFF) if p.name in SLIPS else p for p in variant.params))


def own(params: dict) -> dict:
    """The module's own parameters (knobs removed)."""
    return {k: v for k, v in params.items() if k not in KNOBS}


def default(name: str):
    """A knob's value in a candidate that does not name it (None for anything else)."""
    return KNOBS[name].default if name in KNOBS else None


def settings(params: dict) -> dict:
    return {k: v for k, v in params.items() if k in KNOBS}


def extend(variant: Variant, impl: str, code: str, names: tuple, gpu=None) -> Variant:
    """The rung with the knobs of `names` that have a place in its code (`code`: its render for a
    task on `gpu`; the Triton knobs are NVIDIA's: measured on the H100 only, knobs_triton)."""
    places = _places(code)
    own_names = {p.name for p in variant.params}
    amd = gpu is not None and gpu.vendor != "nvidia"     # measured on the H100 only
    extra = tuple(KNOBS[n] for n in names if IMPLS[n] == impl and places[n] and not (amd and n in knobs_triton.KNOBS)
                  and n not in own_names and SUPERSEDED.get(n) not in own_names)
    if not extra:
        return variant
    # one object for each rung and knobs: every episode of a task (and validate's rebuild) asks the candidate
    # caches of the same rung, and the caches know it as the rung it extends (memo.same_rung)
    key = (id(variant), extra)
    found = _EXTENDED.get(key)
    if found is None:
        found = _EXTENDED[key] = (variant, same_rung(replaced(variant, params=variant.params + extra), variant))
    return found[1]


_EXTENDED: dict = {}        # (id of a rung, knob Params added) -> (the rung, kept alive: its id is its own; the extended rung)


def param(variant: Variant, name: str) -> Param:
    """A rung's parameter, knobs included."""
    return KNOBS[name] if name in KNOBS and all(p.name != name for p in variant.params) else variant.param(name)


def apply_code(code: str, params: dict) -> str:
    """Write the knobs' settings into a candidate's code."""
    blocks, unroll, bound = params.get("min_blocks", OFF), params.get("main_unroll", OFF), params.get("bound", OFF)
    if blocks or bound:
        code = _BOUNDS.sub(lambda m: f"__launch_bounds__({bound or m.group(1)}{f', {blocks}' if blocks else ''})",
                           code, count=1)
    if params.get("optin", OFF):
        code = _OPTIN.sub("", code)
    if unroll:
        at = _main_loop(code)
        if at is not None:
            indent = re.match(r"[ \t]*", code[at:]).group(0)
            code = f"{code[:at]}#pragma unroll {unroll}\n{indent}{code[at + len(indent):]}"
    return knobs_triton.apply_code(code, params)


def render(module, variant: Variant, params: dict, task, bug: str | None = None) -> str:
    return apply_code(module.render(variant, own(params), task, bug), params)


_LOOP_KINDS: dict = {}


def _loop_kind(module, variant: Variant, task) -> str | None:
    """main_loop_kind of the rung's code at its defaults (its parameters move no loop), once a rung and task."""
    key = (module.name, variant.tag, task.dtype, task.gpu.name, task.shape)
    if key not in _LOOP_KINDS:
        _LOOP_KINDS[key] = main_loop_kind(module.render(variant, own(variant.defaults()), task))
    return _LOOP_KINDS[key]


_REREADS: dict = {}


def _rereads(module, variant: Variant, task) -> bool:
    """knobs_triton.rereads of the rung's code at its defaults, once a rung and task."""
    key = (module.name, variant.tag, task.dtype, task.gpu.name, task.shape)
    if key not in _REREADS:
        _REREADS[key] = knobs_triton.rereads(module.render(variant, own(variant.defaults()), task))
    return _REREADS[key]


@candidate_cache
def module_launch(module, variant: Variant, params: dict, task) -> Launch:
    """The module's own launch model of a candidate's own parameters: a grid's configs that
    differ only in the knobs' settings (20 of them a config where a profile adds min_blocks and
    main_unroll) share it."""
    return module.launch(variant, params, task)


@candidate_cache
def launch(module, variant: Variant, params: dict, task) -> Launch:
    """The module's launch model with the knobs' effect on registers, spills and ILP."""
    return with_knobs(module, variant, params, task, module_launch(module, variant, own(params), task))


def plain_launch(module, variant: Variant, params: dict, task) -> Launch:
    """launch's answer, kept nowhere and its module launch neither (the held-out solutions' search asks each
    config once: holdout_search)."""
    return with_knobs(module, variant, params, task, module.launch(variant, own(params), task))


def with_knobs(module, variant: Variant, params: dict, task, out: Launch) -> Launch:
    """`out`, the module's launch of the candidate's own parameters, with its knobs' effect (launch)."""
    gpu = task.gpu
    unroll = params.get("main_unroll", OFF)
    # what the pragma's loop does decides what it gains (H100, seed 30303 gpu-check, 63 candidates with the knob):
    # - on a zero-fill nothing: topk_cuda B=32 V=32000 main_unroll 8 on its histogram's zero-fill ran at its
    #   H200 time without it (cdf_pick 52.0 vs 51.7-51.8 us, warp_ballot_scan 48.4 vs 44.4-48.2,
    #   vectorized_float4 24.0 vs 23.5-23.6), where the loads-in-flight credit put it 1.14-1.75x faster;
    # - on a loop that waits at a barrier every iteration (a GEMM's K tiles, a radix digit) no loads of the
    #   next iteration issue ahead of it and one branch per K tile is nothing: only the registers remain.
    #   With the credit the 24 such rows ran sim/measured geomean 0.82 (fused_qkv_rope_cuda cp_async/mma_sync 8:
    #   0.81-0.83, topk_cuda histogram_refine 8: 0.65); without it 0.91 (0.88-0.91; 1.22).
    # - on a staging loop (it only fills the block's __shared__ tables before the barrier ahead of the kernel's
    #   stream: rope_cuda token_block_smem's cos/sin, moe_combine_cuda's slots and weights, mamba_step_cuda's B / C,
    #   grouped_gemm_cuda's row ids) the pragma unrolls a loop of one or two trips a thread and leaves the streaming
    #   loop as nvcc unrolls it: rope_cuda token_block_smem's rotation loop has the same SASS at main_unroll 0 and 8
    #   (four groups of LDG LDG LDS LDS STG STG: in place on q / k, a group's loads wait for the previous group's
    #   stores), and the H100 ran them alike: bf16 T=4096 H=32 D=128 84.59 / 84.52 us (64 threads), 83.68 / 83.56
    #   (256), T=512 H=64 64.88 / 64.88, 29.39 / 29.42 (measurements/h100_simB_b1.json), 84.94 / 85.01 (s61717),
    #   where the credit put main_unroll 8 0.65-0.86x of 0. Nor do registers move (nvcc 13.0 sm_90a ptxas at
    #   main_unroll 0 / 2 / 8: rope_cuda token_block_smem 32 / 32 / 32, mamba_step_cuda smem_staged_channels 32 / 32 /
    #   32, moe_combine_cuda column_split_ilp 36 / 32 / 32, multi_token_ilp 56 / 64 / 56): the knob changes nothing.
    kind = _loop_kind(module, variant, task) if unroll else None
    if kind in ("fill", "stage"):
        unroll = OFF
    if unroll:
        doublings = math.log2(unroll)
        out = replaced(out, regs=out.regs + 8 * int(doublings))
        if kind == "stream":
            out = replaced(out, bytes_per_access=out.bytes_per_access * (1 + 0.35 * doublings),   # loads in flight
                          compute_scale=out.compute_scale * (1 + 0.03 * doublings))       # loop overhead
    evict = params.get("evict", OFF)
    if evict and gpu.vendor == "nvidia" and _rereads(module, variant, task):     # the H100's figures: knobs_triton
        row = module.cost(task).bytes * knobs_triton.read_share(module.name, variant.tag) / max(1, out.grid)
        load = knobs_triton.l1_load(out, gpu, row)
        out = replaced(out, traffic=out.traffic * knobs_triton.rung_traffic(module.name, variant.tag, evict, load))
    if "min_blocks" in params:
        # the knob is offered where the code has __launch_bounds__(THREADS[, N]): ptxas must fit
        # N blocks (at least one) of THREADS, so a register demand over the file spills rather
        # than failing the launch; it allocates registers in units of 8 per thread. N blocks of
        # THREADS past the SM's thread limit cannot be resident whatever the registers: ptxas warns
        # ".minnctapersm will be ignored" and allocates as without it (nvcc 13, sm_90a: add_rmsnorm_cuda
        # at 1024 threads with N=3 keeps 31 registers, no spill; the H100 ran it 355.8 us against
        # 355.7 without the knob, where the cap to 16 registers modelled a 1.34x spill)
        blocks = max(1, params["min_blocks"])
        if blocks * out.threads > gpu.max_threads_per_sm:
            return out
        out = _capped(out, min(255, gpu.regs_per_sm // (blocks * max(out.threads, gpu.warp)) // 8 * 8))
    return out


def _capped(out: Launch, cap: int) -> Launch:
    """The launch with ptxas's registers a thread capped at `cap`: what the demand holds past it spills."""
    if 16 <= cap < out.regs:      # below 16 ptxas cannot meet the bound and ignores it
        spilled = out.regs / cap - 1.0
        out = replaced(out, regs=cap, traffic=out.traffic * (1 + 0.4 * spilled),
                      compute_scale=out.compute_scale / (1 + 1.2 * spilled))
    return out
