"""Dynamic per-token FP8 (e4m3) quantization in Triton: scale[t] = max|x[t, :]| / FP8_MAX,
q[t, :] = fp8(x[t, :] / scale[t]).

Ladder: two kernels (tl.atomic_max absmax, then quantize) -> one program per token looping
over the row twice -> whole row held in registers (one DRAM read) -> native fp8 cast
(tl.float8e4nv, sm_89+; tl.float8e4b8 on MI300X) with several rows per program ->
persistent programs striding over row tiles. Rungs without fp8 convert in software and
store raw uint8 codes, which compiles on any target. Every division is IEEE (tl.div_rn: Triton's fp32
`/` is approximate and x * (1 / s) rounds twice), so q matches torch's x / scale code for code.
"""
import textwrap

from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_dtype, triton_ptr, unchecked
from .. import stream_stages, unroll
from ..norms._norms import row_in_flight
from .fp8_quant_spec import TRITON_ENTRY, Fp8QuantSpec, fp8_max

WARPS = Param("num_warps", (2, 4, 8, 16), 4)
ROWS = Param("ROWS", (1, 2, 4, 8), 1)
BLOCK = Param("BLOCK", (512, 1024, 2048, 4096), 1024)
SPILL_KNEE = 12     # the spill traffic's knee, in excess units (launch_of's comment)
ATOMIC_FOLD = "tl.atomic_max(scale_ptr + row, s)  # scales start at 0, the identity of max|x|"


def _pow2(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


def launch_of(kind: str):
    """atomic (programs per (token, slice), two launches), loop (a program per token, two
    passes), rows (ROWS whole rows in registers) or persistent (rows, a few programs per SM)."""
    def launch(p, task):
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        warps = p["num_warps"]
        threads = warps * task.gpu.warp
        rows = p.get("ROWS", 1)
        if kind in ("atomic", "loop"):
            grid = t * cdiv(d, p["BLOCK"]) if kind == "atomic" else t
            per_thread = cdiv(p["BLOCK"], threads)
            return Launch(grid=grid, threads=threads, smem_bytes=warps * 4, regs=24 + per_thread // 2,
                          bytes_per_access=min(16, per_thread * elt),
                          traffic=(2 * elt + 1) / (elt + 1) if kind == "atomic" else 1.2,
                          lane_util=min(1.0, d / p["BLOCK"]), launches=2 if kind == "atomic" else 1)
        grid = tiles = cdiv(t, rows)
        if kind == "persistent":
            grid = min(tiles, task.gpu.sms * p["programs_per_sm"])
        per_thread = cdiv(rows * _pow2(d), threads)
        # a register a value of the [ROWS, BLOCK_D] tile (its fp32 copy), as ptxas counts them for sm_90a
        # (scripts/simS_regs.py, fp16 T=4096 D=4096 and bf16 T=512 D=5120): 8 values a thread 28, 16 32,
        # 32 50, 64 86, 128 153, 256 255 with 712 bytes of spill stores; the estimate it replaces
        # (24 + 3/4 of a register a value) said 216 at 256 values, no spill
        regs = 22 + per_thread
        # past the register file the row spills and every pass (amax, then scale) reloads it from local
        # memory: H200, 512 elements a thread ran 8.9-12.7x the best of their episodes (T=512 D=5120: ROWS 8
        # num_warps 4, ROWS 4 num_warps 2; h200_gpucheck_s5151/s9191/s1717/pgrid); 256 a thread (now spilling)
        # 1.2-6.3x, median ~3x (s5151, s6262, pgrid, grid5, s8484); once each use reloads, more excess adds
        # less (1024 a thread: 8.2x, s1717 D=8192): the traffic factor 1 + e * 12 / (e + 12) of the excess e
        # (registers past 255 / 16) gives 2.3x, 8.3x and 11.1x at 256, 512 and 1024 values a thread
        excess = max(0, regs - 255) / 16
        # the [ROWS, D] tile's loads all issue before the amax waits on them (as the norms' whole rows): H200 T=512
        # D=5120 fp8_native_cast ROWS 8 on 8 warps (64 programs) 6.9 us, ROWS 4 on 4 warps 5.8, ROWS 1 on 4 warps
        # 4.7-5.1 (gpu-check s5151/s6262/s9191), where 16 bytes a thread in flight modelled ROWS 8 2.5x ROWS 1
        return Launch(grid=grid, threads=threads, smem_bytes=warps * 4 * rows, regs=min(regs, 255),
                      bytes_per_access=row_in_flight(per_thread, elt), traffic=1.0 + excess * SPILL_KNEE / (excess + SPILL_KNEE),
                      lane_util=min(1.0, d / _pow2(d)) * min(1.0, t / rows), rounds=cdiv(tiles, grid),
                      unrolled=per_thread)
    return launch


def check_adapter(d, model, x):
    """gpu_check: q is compared as fp8 values, scales as fp32."""
    return list(x), lambda ret, ref: [("q", ret[0], ref[0], "fp8q"), ("scales", ret[1], ref[1], "fp32")]


def software_cvt(task) -> str:
    bias, fmax = task.dialect.fp8_bias, fp8_max(task)
    code = "sign | mag" if task.dialect.fp8_neg_zero else "tl.where(mag == 0, 0, sign | mag)"  # fnuz: 0x80 is NaN, no -0
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


def convert(expr: str, task, native: bool) -> str:
    if native:
        return f"tl.clamp({expr}, -FP8_MAX, FP8_MAX).to({triton_dtype('fp8', task)})"
    return f"fp8_bits({expr})"


def two_kernel_atomic_parts(p, task, fold=ATOMIC_FOLD, val="tl.div_rn(x, s)"):
    grid = f"(T, triton.cdiv(D, {p['BLOCK']}))"
    kernel = f"""

@triton.jit
def fp8_absmax_kernel(x_ptr, scale_ptr, D, BLOCK: tl.constexpr):
    # one program per (token, BLOCK slice); slices of a row meet in a float atomic max
    row, blk = tl.program_id(0), tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * D + offs, mask=offs < D, other=0.0).to(tl.float32)
    s = tl.maximum(tl.div_rn(tl.max(tl.abs(x), axis=0), FP8_MAX), MIN_SCALE)
    {fold}


@triton.jit
def fp8_quant_kernel(x_ptr, q_ptr, scale_ptr, D, BLOCK: tl.constexpr):
    # second pass re-reads x once the row scale is final
    row, blk = tl.program_id(0), tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < D
    x = tl.load(x_ptr + row.to(tl.int64) * D + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(scale_ptr + row)
    tl.store(q_ptr + row.to(tl.int64) * D + offs, {convert(val, task, False)}, mask=mask)
"""
    launch = (f"fp8_absmax_kernel[{grid}](x, scales, D, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})\n"
                  f"    fp8_quant_kernel[{grid}](x, QARG, scales, D, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})")
    return kernel, launch


def fused_row_loop_parts(p, task, qmask="offs < D", val="tl.div_rn(x, scale)"):
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
    scale = tl.maximum(tl.div_rn(tl.max(amax, axis=0), FP8_MAX), MIN_SCALE)
    tl.store(scale_ptr + row, scale)
    for start in range(0, D, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < D, other=0.0).to(tl.float32)
        tl.store(q_row + offs, {convert(val, task, False)}, mask={qmask})
"""
    return kernel, (f"fp8_quant_kernel[(T,)](x, QARG, scales, T, D, BLOCK={p['BLOCK']}, "
                        f"num_warps={p['num_warps']})")


def rows_kernel(p, task, native: bool, persistent: bool, rmask="rows < T", scaled="tl.div_rn(x, scale[:, None])"):
    body = f"""mask = (rows[:, None] < T) & (cols[None, :] < D)
offs = rows[:, None].to(tl.int64) * D + cols[None, :]
x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
scale = tl.maximum(tl.div_rn(tl.max(tl.abs(x), axis=1), FP8_MAX), MIN_SCALE)
tl.store(scale_ptr + rows, scale, mask=rows < T)
y = {scaled}
tl.store(q_ptr + offs, {convert("y", task, native)}, mask=mask & ({rmask})[:, None])"""
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


def rows_parts(native: bool, persistent: bool):
    return lambda p, task, **slots: rows_kernel(p, task, native, persistent, **slots)


def program(parts, native: bool = False, zeros: bool = False):
    """A rung's render: FP8 constants, the software converter unless the rung casts natively,
    the kernel(s) from `parts(p, task, **slots) -> (kernel, launch)` and the wrapper."""
    def render(p, task, **slots):
        fmax = fp8_max(task)
        head = f"""{TRITON_PRELUDE}
FP8_MAX = tl.constexpr({fmax!r})
MIN_SCALE = tl.constexpr({1 / (fmax * 512)!r})  # 1 / (FP8_MAX * 512)
"""
        sw = "" if native else software_cvt(task)
        kernel, launch = parts(p, task, **slots)
        qarg = "q" if native else "q.view(torch.uint8)"
        return f"""{head}{sw}{kernel}

{TRITON_ENTRY.py_def(task)}:
    T, D = x.shape
    x = x.contiguous()
    q = torch.empty((T, D), dtype={task.dialect.fp8_torch}, device=x.device)
    scales = torch.{'zeros' if zeros else 'empty'}((T,), dtype=torch.float32, device=x.device)
    {launch.replace('QARG', qarg)}
    return q, scales
"""
    return render


ROWS_OFF_BY_ONE = {"rmask": "rows < T - 1"}
ROWS_NO_SCALE = {"scaled": "x"}


def rows_consts(p, task) -> dict:
    return {"BLOCK_D": _pow2(task["D"]), "ROWS": p.get("ROWS", 1)}


class Fp8QuantTriton(Fp8QuantSpec):
    impl = "triton"
    desc = ("Per-token (per-row) dynamic FP8 e4m3 quantization of activations: scale[t] = "
            "max(max|x[t, :]| / FP8_MAX, 1 / (FP8_MAX * 512)), q = satfinite_e4m3(x / scale), round to "
            "nearest even. FP8_MAX = 448 (float8_e4m3fn) on NVIDIA, 240 (float8_e4m3fnuz) on MI300X. "
            "Returns q [T, D] in the fp8 dtype and scales fp32 [T].")
    entry = TRITON_ENTRY
    check_adapter = staticmethod(check_adapter)
    variants = (
        Rung("two_kernel_atomic", "absmax kernel folding block maxima with tl.atomic_max, then a quantize kernel",
             (BLOCK, WARPS), compute_eff=0.08, memory_eff=0.6, launch=launch_of("atomic"),
             render=program(two_kernel_atomic_parts, zeros=True), consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"racy_update": {"fold": "tl.store(scale_ptr + row, s)  # plain store: last block wins"},
                   "missing_scale": {"val": "x"}}),
        Rung("fused_row_loop", "one program per token, BLOCK-wide loop: absmax pass then convert pass",
             (BLOCK, WARPS, unroll.LOOP_UNROLL, stream_stages.STREAM_STAGES), compute_eff=0.08, memory_eff=0.78,
             launch=stream_stages.launch_of(unroll.launch_of(launch_of("loop"), unroll.chunk_trips("D"), unroll.chunk_regs),
                                           unroll.chunk_trips("D"), loads=1, row="D"),
             render=stream_stages.render_of(unroll.render_of(program(fused_row_loop_parts))), consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"off_by_one": {"qmask": "offs < D - 1"}, "missing_scale": {"val": "x"}}),
        Rung("row_in_registers", "whole row loaded once into registers (BLOCK_D = next pow2 of D)",
             (WARPS,), compute_eff=0.08, memory_eff=0.88, launch=launch_of("rows"),
             render=program(rows_parts(False, False)), consts=rows_consts,
             bugs={"off_by_one": ROWS_OFF_BY_ONE}),
        Rung("fp8_native_cast", "register-resident rows, native .to(float8) conversion, ROWS tokens per program",
             (WARPS, ROWS), needs=frozenset({"fp8"}), compute_eff=0.45, memory_eff=0.9, launch=launch_of("rows"),
             render=program(rows_parts(True, False), native=True), consts=rows_consts,
             bugs={"missing_scale": ROWS_NO_SCALE, "off_by_one": ROWS_OFF_BY_ONE}),
        # 8 programs an SM (roomT): checked on the H100 with its bugs (h100_roomS_order.json): T=4096 D=4096 on 16 warps
        # 25.3 us against 4's 28.8, T=16384 D=8192 165.4 / 166.0 (16 warps), 153.1 / 147.5 (4 warps); again (roomT/j3,
        # 2026-12-07): 25.0 / 28.7 and, on 4 warps, 152.2 / 146.8. 16 (roomT, scripts/roomT_interpret.py: 8's outputs
        # exactly, bugs failing) is off the menus: its modelled 7% over 8 is the fitted programs_per_sm exponent carried
        # one doubling past the values it was fitted on (the same 0.93x at T=512, where 8 and 16 launch the same 512
        # programs), not the launch. The H100 ran it correct, bugs failing, level with 8 (roomT/j4: T=512 D=5120
        # 11.6 / 11.6 us, T=32 D=8192 4.9 / 4.8; modelled 9.3 / 10.0, 3.9 / 4.1)
        Rung("persistent_rows", "native fp8 cast in persistent programs (a few per SM) striding over row tiles",
             (WARPS, ROWS, Param("programs_per_sm", (1, 2, 4, 8, *unchecked(16)), 4)), needs=frozenset({"fp8"}),
             compute_eff=0.45, memory_eff=0.92, launch=launch_of("persistent"),
             render=program(rows_parts(True, True), native=True), consts=rows_consts,
             bugs={"off_by_one": ROWS_OFF_BY_ONE, "missing_scale": ROWS_NO_SCALE}),
    )

    def triton_kernels(self, variant, params: dict, task) -> list:
        x, warps, c = triton_ptr(task.dtype, task), params["num_warps"], variant.consts(params, task)
        q = triton_ptr("fp8", task) if "fp8" in variant.needs else "*u8"
        if variant.tag == "two_kernel_atomic":
            return [KernelSpec("fp8_absmax_kernel", {"x_ptr": x, "scale_ptr": "*fp32", "D": "i32", "BLOCK": "constexpr"},
                               c, num_warps=warps),
                    KernelSpec("fp8_quant_kernel", {"x_ptr": x, "q_ptr": q, "scale_ptr": "*fp32", "D": "i32",
                                                    "BLOCK": "constexpr"}, c, num_warps=warps)]
        sig = {"x_ptr": x, "q_ptr": q, "scale_ptr": "*fp32", "T": "i32", "D": "i32"}
        return [KernelSpec("fp8_quant_kernel", {**sig, **{k: "constexpr" for k in c}}, c, warps)]
