"""Fused residual add + RMSNorm in Triton: residual += x; y = residual * rsqrt(mean(residual^2) + eps) * w.

Ladder: an add kernel then an RMSNorm kernel (two launches; the residual crosses DRAM
three times) -> one fused program per row streaming chunks (store the residual, re-read
it for the output) -> the whole summed row in registers (no re-read) -> persistent
programs with the weight hoisted and the next row's x/residual prefetched.
"""
from dataclasses import replace

from ..base import Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, KernelSpec, triton_ptr
from .. import stream_stages
from ..unroll import LOOP_UNROLL, chunk_regs, chunk_trips, launch_of, render_of
from ._norms import PERSISTENT_GRID, chunk_launch, next_pow2, row_in_registers_launch
from .add_rmsnorm_spec import ENTRY, AddRMSNormSpec

CHUNK = (Param("BLOCK", (256, 512, 1024, 2048), 1024), Param("num_warps", (2, 4, 8), 4), LOOP_UNROLL)
NO_SCALE = {"scale": ""}               # missing_scale drops the weight multiply
ADD_FIRST = "    residual_add_kernel[(triton.cdiv(T * D, 1024),)](x, residual, T * D, BLOCK=1024, num_warps=4)\n"


# -- two_kernels, fused_chunked: BLOCK-wide chunks -----------------------------------------
def two_kernels_src(p, task, stop="D", scale=" * w"):
    return f"""
def residual_add_kernel(x_ptr, r_ptr, n, BLOCK: tl.constexpr):
    # Kernel 1: residual += x over the flattened tensor.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(r_ptr + offs, h.to(r_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_rmsnorm_kernel(r_ptr, w_ptr, y_ptr, T, D, eps, BLOCK: tl.constexpr):
    # Kernel 2: RMSNorm of the updated residual, streamed from DRAM twice.
    row = tl.program_id(0).to(tl.int64)
    r_row = r_ptr + row * D
    y_row = y_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, {stop}, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        h = tl.load(r_row + cols, mask=cols < D, other=0.0).to(tl.float32)
        acc += h * h
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / D + eps)
    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < D
        h = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (h * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


def fused_chunked_src(p, task, stop="D", scale=" * w"):
    return f"""
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, T, D, eps, BLOCK: tl.constexpr):
    # One program per row. Pass 1 adds, stores the residual and accumulates the
    # sum of squares; pass 2 re-reads the residual (each lane reads back exactly
    # the elements it stored: same layout) and writes y.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * D
    r_row = r_ptr + row * D
    y_row = y_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < D
        h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        h = h.to(r_ptr.dtype.element_ty)
        tl.store(r_row + cols, h, mask=mask)
        acc += h.to(tl.float32) * h.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / D + eps)
    for off in range(0, {stop}, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < D
        h = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (h * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


# -- whole_row_registers, persistent: the summed row lives in registers --------------------
def row_launch(p, task):
    d, elt, nw = task["D"], DTYPE_BYTES[task.dtype], p["num_warps"]
    threads, block_d = nw * task.gpu.warp, next_pow2(d)
    per = max(1, block_d // threads)                  # elements each thread holds
    # fp32 summed row (+ hoisted weight and the prefetched x/residual of the next row when persistent)
    regs = 10 + int(7.5 * per) if "programs_per_sm" in p else 10 + 3 * per
    util = min(1.0, d / block_d) * min(1.0, block_d / threads)
    launch = row_in_registers_launch(p, task, task["T"], regs, threads, 4 * nw, per, elt, util)
    # the estimate above (fp32 copies) sets the spill, which ptxas meets at about twice it (_norms.triton_spill);
    # what the residency sees is what ptxas allocates (sm_90a, scripts/simS_regs.py, bf16 D=5120 / 4096): the one-row
    # rung 32 / 50-64 / 116 / 209 registers at 16 / 32 / 64 / 128 values a thread (the estimate: 58 / 106 / 202 / 255),
    # the persistent one 74 / 126 / 254 (estimate 130 / 250 / 255). At 64 values on 4 warps the estimate left 2
    # programs an SM, ptxas 4: H100/H200 rows (stored, fitted on) put 1 -> 4 warps at -0.41 in log time where the model
    # said -0.84, and 2 -> 8 warps at -0.10 where it said 0
    held = 10 + int((3.9 if "programs_per_sm" in p else 1.6) * per)
    return replace(launch, regs=min(launch.regs, held))


def whole_row_registers_src(p, task, bound="D", scale=" * w"):
    return f"""
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # BLOCK_D = next_pow2(D): x and residual are read once, the summed row is
    # stored once and kept in registers for the reduction and the output.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < {bound}
    offs = row * D + cols
    h = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = h.to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + offs, h, mask=mask)
    h = h.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(h * h, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (h * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


def persistent_src(p, task, stop="T", scale=" * w"):
    return f"""
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # Persistent: #SMs x PROGRAMS_PER_SM programs stride over the rows. The weight
    # is loaded once per program; the next row's x and residual are loaded before
    # this row's reduction so DRAM stays busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    first = mask & (pid < T)
    x_next = tl.load(x_ptr + pid.to(tl.int64) * D + cols, mask=first, other=0.0)
    r_next = tl.load(r_ptr + pid.to(tl.int64) * D + cols, mask=first, other=0.0)
    for row in range(pid, {stop}, step):
        offs = row.to(tl.int64) * D + cols
        h = (x_next.to(tl.float32) + r_next.to(tl.float32)).to(r_ptr.dtype.element_ty)
        nxt = row + step
        ahead = mask & (nxt < T)
        x_next = tl.load(x_ptr + nxt.to(tl.int64) * D + cols, mask=ahead, other=0.0)
        r_next = tl.load(r_ptr + nxt.to(tl.int64) * D + cols, mask=ahead, other=0.0)
        tl.store(r_ptr + offs, h, mask=mask)
        h = h.to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(y_ptr + offs, (h * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


def consts(p, task) -> dict:
    return {"BLOCK": p["BLOCK"]} if "BLOCK" in p else {"BLOCK_D": next_pow2(task["D"])}


class AddRMSNormTriton(AddRMSNormSpec):
    impl = "triton"
    variants = (
        Rung("two_kernels", "elementwise add kernel, then a chunked RMSNorm kernel re-reading the residual twice",
             CHUNK + (stream_stages.STREAM_STAGES,), memory_eff=0.8,
             launch=stream_stages.launch_of(launch_of(chunk_launch("T", "D", 2, 1.5, launches=2), chunk_trips("D"), chunk_regs),
                                           chunk_trips("D"), loads=2, row="D"),
             render=stream_stages.render_of(render_of(two_kernels_src)), consts=consts,
             bugs={"off_by_one": {"stop": "D - BLOCK"}, "missing_scale": NO_SCALE}),
        Rung("fused_chunked", "one program per row: add + store residual + sum of squares, then re-read for y",
             CHUNK, memory_eff=0.84, launch=launch_of(chunk_launch("T", "D", 2, 1.25), chunk_trips("D"), chunk_regs),
             # no num_stages: pass 2 re-reads the residual pass 1 stored; cp.async copies staged ahead
             # are not ordered after a thread's own stores without a fence, so it is not offered unchecked
             render=render_of(fused_chunked_src), consts=consts,
             bugs={"off_by_one": {"stop": "D - BLOCK"}, "missing_scale": NO_SCALE}),
        Rung("whole_row_registers", "BLOCK_D = next_pow2(D): summed row stays in registers, residual never re-read",
             (Param("num_warps", (1, 2, 4, 8, 16), 4),), memory_eff=0.9, launch=row_launch,
             render=whole_row_registers_src, consts=consts,
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"bound": "D - 1"}}),
        Rung("persistent", "grid of #SMs x k programs striding over rows, weight hoisted, next row prefetched",
             (Param("num_warps", (2, 4, 8, 16), 16), Param("programs_per_sm", (1, 2, 4), 1)), memory_eff=0.93,
             launch=row_launch, render=persistent_src, consts=consts,
             bugs={"off_by_one": {"stop": "T - 1"}, "missing_scale": NO_SCALE}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        consts = variant.consts(params, task)
        specs = []
        if variant.tag == "two_kernels":
            specs.append(KernelSpec("residual_add_kernel", {"x_ptr": ptr, "r_ptr": ptr, "n": "i32", "BLOCK": "constexpr"},
                                    {"BLOCK": 1024}, num_warps=4, num_stages=1))
            sig = {"r_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr}
        else:
            sig = {"x_ptr": ptr, "r_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr}
        sig.update({"T": "i32", "D": "i32", "eps": "fp32", **{k: "constexpr" for k in consts}})
        return specs + [KernelSpec("add_rmsnorm_kernel", sig, consts, num_warps=params["num_warps"], num_stages=1)]

    def assemble(self, kernel, variant, params, task) -> str:
        kw = "".join(f"{k}={v}, " for k, v in variant.consts(params, task).items())
        args, head, pre, grid = "x, residual, weight, y", "", "", "T"
        if "programs_per_sm" in params:
            grid, head = PERSISTENT_GRID, f"PROGRAMS_PER_SM = {params['programs_per_sm']}\n\n\n"
        elif variant.tag == "two_kernels":        # the add runs first, over the flattened tensor
            args, pre = "residual, weight, y", ADD_FIRST
        return f"""{TRITON_PRELUDE}
{head}@triton.jit
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    T, D = x.shape
    y = torch.empty_like(x)
{pre}    add_rmsnorm_kernel[({grid},)]({args}, T, D, eps, {kw}num_warps={params['num_warps']})
    return y, residual
"""
