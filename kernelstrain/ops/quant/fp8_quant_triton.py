"""Dynamic per-token FP8 (e4m3) quantization in Triton: scale[t] = max|x[t, :]| / FP8_MAX,
q[t, :] = fp8(x[t, :] / scale[t]).

Ladder: two kernels (tl.atomic_max absmax, then quantize) -> one program per token looping
over the row twice -> whole row held in registers (one DRAM read) -> native fp8 cast
(tl.float8e4nv, sm_89+; tl.float8e4b8 on MI300X) with several rows per program ->
persistent programs striding over row tiles. Rungs without fp8 convert in software and
store raw uint8 codes, which compiles on any target.
"""
import textwrap

from ..base import (KernelSpec, Launch, Param, Task, Variant, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_dtype,
                    triton_ptr)
from .fp8_quant_spec import Fp8QuantSpec

WARPS = Param("num_warps", (2, 4, 8, 16), 4)
ROWS = Param("ROWS", (1, 2, 4, 8), 1)


def _pow2(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


class Fp8QuantTriton(Fp8QuantSpec):
    impl = "triton"
    desc = ("Per-token (per-row) dynamic FP8 e4m3 quantization of activations: scale[t] = "
            "max(max|x[t, :]| / FP8_MAX, 1 / (FP8_MAX * 512)), q = satfinite_e4m3(x / scale), round to "
            "nearest even. FP8_MAX = 448 (float8_e4m3fn) on NVIDIA, 240 (float8_e4m3fnuz) on MI300X. "
            "Returns q [T, D] in the fp8 dtype and scales fp32 [T].")
    variants = (
        Variant("two_kernel_atomic", "absmax kernel folding block maxima with tl.atomic_max, then a quantize kernel",
                (Param("BLOCK", (512, 1024, 2048, 4096), 1024), WARPS), compute_eff=0.08, memory_eff=0.6,
                bugs=("racy_update", "missing_scale")),
        Variant("fused_row_loop", "one program per token, BLOCK-wide loop: absmax pass then convert pass",
                (Param("BLOCK", (512, 1024, 2048, 4096), 1024), WARPS), compute_eff=0.08, memory_eff=0.78,
                bugs=("off_by_one", "missing_scale")),
        Variant("row_in_registers", "whole row loaded once into registers (BLOCK_D = next pow2 of D)",
                (WARPS,), compute_eff=0.08, memory_eff=0.88, bugs=("off_by_one",)),
        Variant("fp8_native_cast", "register-resident rows, native .to(float8) conversion, ROWS tokens per program",
                (WARPS, ROWS), needs=frozenset({"fp8"}), compute_eff=0.45, memory_eff=0.9,
                bugs=("missing_scale", "off_by_one")),
        Variant("persistent_rows", "native fp8 cast in persistent programs (a few per SM) striding over row tiles",
                (WARPS, ROWS, Param("programs_per_sm", (1, 2, 4), 4)), needs=frozenset({"fp8"}),
                compute_eff=0.45, memory_eff=0.92, bugs=("off_by_one", "missing_scale")),
    )

    def _shape(self, variant: Variant, params: dict, task: Task):
        """(programs, elements per program per tile, tiles per program)."""
        t, d = task["T"], task["D"]
        if variant.tag in ("two_kernel_atomic",):
            return t * cdiv(d, params["BLOCK"]), params["BLOCK"], 1
        if variant.tag == "fused_row_loop":
            return t, params["BLOCK"], 1
        rows = params.get("ROWS", 1)
        tiles = cdiv(t, rows)
        if variant.tag == "persistent_rows":
            progs = min(tiles, task.gpu.sms * params["programs_per_sm"])
            return progs, rows * _pow2(d), cdiv(tiles, progs)
        return tiles, rows * _pow2(d), 1

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        warps = params["num_warps"]
        threads = warps * task.gpu.warp
        grid, elems, _ = self._shape(variant, params, task)
        per_thread = cdiv(elems, threads)
        smem = warps * 4 * (params.get("ROWS", 1) if variant.tag not in ("two_kernel_atomic", "fused_row_loop") else 1)
        if variant.tag == "two_kernel_atomic":
            return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=24 + per_thread // 2,
                          bytes_per_access=min(16, per_thread * elt), traffic=(2 * elt + 1) / (elt + 1),
                          lane_util=min(1.0, d / params["BLOCK"]), launches=2)
        if variant.tag == "fused_row_loop":
            return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=24 + per_thread // 2,
                          bytes_per_access=min(16, per_thread * elt), traffic=1.2,
                          lane_util=min(1.0, d / params["BLOCK"]))
        regs = 24 + per_thread // 2 + per_thread // 4
        rows = params.get("ROWS", 1)
        return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(regs, 255),
                      bytes_per_access=min(16, per_thread * elt), traffic=1.0 + max(0, regs - 255) / 96,
                      lane_util=min(1.0, d / _pow2(d)) * min(1.0, t / rows))

    def signature(self, task: Task) -> str:
        return "def fp8_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]  # (q [T, D] fp8, scales [T] fp32)"

    def _native(self, variant: Variant) -> bool:
        return "fp8" in variant.needs

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        x, warps = triton_ptr(task.dtype, task), params["num_warps"]
        q = triton_ptr("fp8", task) if self._native(variant) else "*u8"
        if variant.tag == "two_kernel_atomic":
            c = {"BLOCK": params["BLOCK"]}
            return [KernelSpec("fp8_absmax_kernel", {"x_ptr": x, "scale_ptr": "*fp32", "D": "i32", "BLOCK": "constexpr"},
                               c, num_warps=warps),
                    KernelSpec("fp8_quant_kernel", {"x_ptr": x, "q_ptr": q, "scale_ptr": "*fp32", "D": "i32",
                                                    "BLOCK": "constexpr"}, c, num_warps=warps)]
        sig = {"x_ptr": x, "q_ptr": q, "scale_ptr": "*fp32", "T": "i32", "D": "i32"}
        if variant.tag == "fused_row_loop":
            return [KernelSpec("fp8_quant_kernel", {**sig, "BLOCK": "constexpr"}, {"BLOCK": params["BLOCK"]}, warps)]
        c = {"BLOCK_D": _pow2(task["D"]), "ROWS": params.get("ROWS", 1)}
        return [KernelSpec("fp8_quant_kernel", {**sig, "BLOCK_D": "constexpr", "ROWS": "constexpr"}, c, warps)]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        fmax, bias = (240.0, 8) if task.is_hip else (448.0, 7)
        head = f"""{TRITON_PRELUDE}
FP8_MAX = tl.constexpr({fmax!r})
MIN_SCALE = tl.constexpr({1 / (fmax * 512)!r})  # 1 / (FP8_MAX * 512)
"""
        native = self._native(variant)
        sw = "" if native else self._software_cvt(task, bias, fmax)
        kernel, launch = getattr(self, "_" + variant.tag)(params, task, bug)
        out = "torch.float8_e4m3fnuz" if task.is_hip else "torch.float8_e4m3fn"
        qarg = "q" if native else "q.view(torch.uint8)"
        return f"""{head}{sw}{kernel}

def fp8_quant(x: torch.Tensor):
    T, D = x.shape
    x = x.contiguous()
    q = torch.empty((T, D), dtype={out}, device=x.device)
    scales = torch.{'zeros' if variant.tag == 'two_kernel_atomic' else 'empty'}((T,), dtype=torch.float32, device=x.device)
    {launch.replace('QARG', qarg)}
    return q, scales
"""

    def _software_cvt(self, task: Task, bias: int, fmax: float) -> str:
        code = "tl.where(mag == 0, 0, sign | mag)" if task.is_hip else "sign | mag"  # fnuz: 0x80 is NaN, no -0
        return f"""

@triton.jit
def fp8_bits(v):
    # float -> e4m3 code in software (no fp8 cvt needed): saturate, keep 3 mantissa bits, ties to even
    sign = (v.to(tl.uint32, bitcast=True) >> 24) & 0x80
    a = tl.minimum(tl.abs(v), {fmax!r})
    s = a * {2.0 ** (bias + 2)!r}                    # subnormal steps of 2^-{bias + 2}; 8 steps = min normal code
    n = s.to(tl.int32)
    frac = s - n.to(tl.float32)
    n = n + ((frac > 0.5) | ((frac == 0.5) & ((n & 1) == 1))).to(tl.int32)
    u = a.to(tl.uint32, bitcast=True)
    u = u + 0x7FFFF + ((u >> 20) & 1)
    mag = (((u >> 23) - {127 - bias}) << 3) | ((u >> 20) & 7)
    mag = tl.where(a < {2.0 ** (1 - bias)!r}, n.to(tl.uint32), mag)
    return ({code}).to(tl.uint8)
"""

    def _convert(self, expr: str, task: Task, native: bool) -> str:
        if native:
            return f"tl.clamp({expr}, -FP8_MAX, FP8_MAX).to({triton_dtype('fp8', task)})"
        return f"fp8_bits({expr})"

    def _two_kernel_atomic(self, p, task, bug):
        fold = ("tl.store(scale_ptr + row, s)  # plain store: last block wins" if bug == "racy_update"
                else "tl.atomic_max(scale_ptr + row, s)  # scales start at 0, the identity of max|x|")
        val = "x" if bug == "missing_scale" else "x / s"
        grid = f"(T, triton.cdiv(D, {p['BLOCK']}))"
        kernel = f"""

@triton.jit
def fp8_absmax_kernel(x_ptr, scale_ptr, D, BLOCK: tl.constexpr):
    # one program per (token, BLOCK slice); slices of a row meet in a float atomic max
    row, blk = tl.program_id(0), tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * D + offs, mask=offs < D, other=0.0).to(tl.float32)
    s = tl.maximum(tl.max(tl.abs(x), axis=0) / FP8_MAX, MIN_SCALE)
    {fold}


@triton.jit
def fp8_quant_kernel(x_ptr, q_ptr, scale_ptr, D, BLOCK: tl.constexpr):
    # second pass re-reads x once the row scale is final
    row, blk = tl.program_id(0), tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < D
    x = tl.load(x_ptr + row.to(tl.int64) * D + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(scale_ptr + row)
    tl.store(q_ptr + row.to(tl.int64) * D + offs, {self._convert(val, task, False)}, mask=mask)
"""
        launch = (f"fp8_absmax_kernel[{grid}](x, scales, D, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})\n"
                  f"    fp8_quant_kernel[{grid}](x, QARG, scales, D, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})")
        return kernel, launch

    def _fused_row_loop(self, p, task, bug):
        qmask = "offs < D - 1" if bug == "off_by_one" else "offs < D"
        inv = "1.0" if bug == "missing_scale" else "1.0 / scale"
        kernel = f"""

@triton.jit
def fp8_quant_kernel(x_ptr, q_ptr, scale_ptr, T, D, BLOCK: tl.constexpr):
    # one program per token: absmax over BLOCK-wide slices, then a second (L2-hit) pass converts
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * D
    q_row = q_ptr + row.to(tl.int64) * D
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, D, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < D, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0) / FP8_MAX, MIN_SCALE)
    tl.store(scale_ptr + row, scale)
    inv = {inv}
    for start in range(0, D, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < D, other=0.0).to(tl.float32)
        tl.store(q_row + offs, {self._convert("x * inv", task, False)}, mask={qmask})
"""
        return kernel, (f"fp8_quant_kernel[(T,)](x, QARG, scales, T, D, BLOCK={p['BLOCK']}, "
                        f"num_warps={p['num_warps']})")

    def _rows_kernel(self, p, task, bug, native: bool, persistent: bool):
        rmask = "rows < T - 1" if bug == "off_by_one" else "rows < T"
        scaled = "x" if bug == "missing_scale" else "x * (1.0 / scale)[:, None]"
        body = f"""mask = (rows[:, None] < T) & (cols[None, :] < D)
offs = rows[:, None].to(tl.int64) * D + cols[None, :]
x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
scale = tl.maximum(tl.max(tl.abs(x), axis=1) / FP8_MAX, MIN_SCALE)
tl.store(scale_ptr + rows, scale, mask=rows < T)
y = {scaled}
tl.store(q_ptr + offs, {self._convert("y", task, native)}, mask=mask & ({rmask})[:, None])"""
        if persistent:
            body = ("""# persistent: a few programs per SM walk the row tiles (no tail wave of tiny programs)
for tile in range(tl.program_id(0), tl.cdiv(T, ROWS), tl.num_programs(0)):
    rows = tile * ROWS + tl.arange(0, ROWS)
""" + textwrap.indent(body, "    "))
        else:
            body = "rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)\n" + body
        kernel = f"""

@triton.jit
def fp8_quant_kernel(x_ptr, q_ptr, scale_ptr, T, D, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    # ROWS whole tokens live in registers: x is read from DRAM exactly once
    cols = tl.arange(0, BLOCK_D)
{textwrap.indent(body, "    ")}
"""
        rows = p.get("ROWS", 1)
        if persistent:
            grid = (f"(min(triton.cdiv(T, {rows}), {p['programs_per_sm']} * "
                    "torch.cuda.get_device_properties(x.device).multi_processor_count),)")
        else:
            grid = f"(triton.cdiv(T, {rows}),)"
        return kernel, (f"fp8_quant_kernel[{grid}](x, QARG, scales, T, D, BLOCK_D=triton.next_power_of_2(D), "
                        f"ROWS={rows}, num_warps={p['num_warps']})")

    def _row_in_registers(self, p, task, bug):
        return self._rows_kernel(p, task, bug, native=False, persistent=False)

    def _fp8_native_cast(self, p, task, bug):
        return self._rows_kernel(p, task, bug, native=True, persistent=False)

    def _persistent_rows(self, p, task, bug):
        return self._rows_kernel(p, task, bug, native=True, persistent=True)
