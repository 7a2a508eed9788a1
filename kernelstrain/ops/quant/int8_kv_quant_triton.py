"""Int8 KV-cache write in Triton: quantize the new tokens' K and V to int8 with one fp32 scale
per (token, head) and scatter them into their cache slots.

Ladder: one program per (token, head) and a launch per tensor -> K and V fused in one launch ->
one program per token over an [H, Dh] tile -> TOKENS tokens per program (contiguous
[TOKENS*H, Dh] tiles) -> persistent programs striding over token tiles.
"""
from ..base import (Cost, KernelSpec, Launch, OpModule, Param, Rung, Task, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, TorchRef)
from ..contract import Arg, Entry, Scalar

WARPS = Param("num_warps", (1, 2, 4, 8, 16), 4)
TOKENS = Param("TOKENS", (1, 2, 4, 8, 16), 2)
NO_SCALE = {"y": "x"}                      # missing_scale: the tile is rounded unscaled

ENTRY = Entry("int8_kv_quant", (
    Arg("key", "in", ("N", "H", "Dh")), Arg("value", "in", ("N", "H", "Dh")), Arg("slot_mapping", "in", ("N",), "int64"),
    Arg("k_cache", "inout", ("S", "H", "Dh"), "int8", tol="int8q"),     # codes compared with +-1 allowed
    Arg("v_cache", "inout", ("S", "H", "Dh"), "int8", tol="int8q"),
    Arg("k_scale", "inout", ("S", "H"), "fp32", tol="fp32"), Arg("v_scale", "inout", ("S", "H"), "fp32", tol="fp32"),
    Scalar("N"), Scalar("H"), Scalar("Dh")))


def launch_of(kind: str):
    """head (a program per (token, head) and tensor, two launches), fused (K and V together),
    token (a program per token), tile (TOKENS tokens) or persistent (tiles, a few programs per SM)."""
    def launch(p, task):
        n, h, d, elt = task["N"], task["H"], task["Dh"], DTYPE_BYTES[task.dtype]
        threads = p["num_warps"] * task.gpu.warp
        if kind in ("head", "fused"):
            grid, elems = n * h, d
        elif kind == "token":
            grid, elems = n, h * d
        else:
            grid, elems = cdiv(n, p["TOKENS"]), p["TOKENS"] * h * d
            if kind == "persistent":
                grid = min(grid, task.gpu.sms * p["programs_per_sm"])
        per_thread = max(1, elems // threads)
        tensors = 1 if kind == "head" else 2
        useful = min(1.0, elems / threads)
        if "TOKENS" in p:
            useful *= min(1.0, n / p["TOKENS"])
        # reductions stage one partial per warp (and row group) in shared memory
        smem = 16 if elems == d else 16 * p["num_warps"] * (1 if kind == "token" else 2)
        regs = 20 + per_thread * (1 + tensors) // 2       # fp32 tile of K, V's loads hoisted above K's math
        spill = 1.0 + max(0, regs - 255) / 128
        return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(255, regs), traffic=spill,
                      bytes_per_access=min(16, per_thread * elt), lane_util=useful,
                      launches=2 if kind == "head" else 1, unrolled=per_thread)
    return launch


def check_adapter(d, model, x):
    """gpu_check: the caches are compared in place as int8 codes (+-1 allowed), the scales as fp32."""
    names = ("k_cache", "v_cache", "k_scale", "v_scale")
    return list(x), lambda ret, ref: [(n, x[3 + i], ref[i], "int8q" if i < 2 else "fp32") for i, n in enumerate(names)]


def check_prepare(d, inputs):
    import torch
    inputs[3].copy_(torch.randint_like(inputs[3], -127, 128))   # never zeros: unwritten slots show
    inputs[4].copy_(torch.randint_like(inputs[4], -127, 128))
    inputs[5].copy_(torch.rand_like(inputs[5]))
    inputs[6].copy_(torch.rand_like(inputs[6]))
    inputs[2][3::37] = -1                                          # padding tokens (skipped)


def quant(axis: int = 0, y: str | None = None) -> str:
    """Lines that quantize a tile `x` (fp32) along `axis` to `q`, `s` (a helper's body);
    `y` the scaled tile (missing_scale: "x")."""
    y = y or f"tl.div_rn(x, s{'' if axis == 0 else '[:, None]'})"
    return f"""
@triton.jit
def quantize_int8(x):
    # symmetric int8: one scale per row, round half away from zero (tl.floor/ceil are exact on every target);
    # IEEE divisions (div_rn: Triton's fp32 `/` is approximate, x * (1 / s) rounds twice) so that every
    # code matches torch's x / s bit for bit
    s = tl.maximum(tl.div_rn(tl.max(tl.abs(x), axis={axis}), 127.0), 1e-8)
    y = {y}
    q = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
    return tl.minimum(tl.maximum(q, -127.0), 127.0).to(tl.int8), s
"""


def program(parts):
    """A rung's render: the kernel(s) from `parts(p, task, **slots) -> (kernel, launch)` and the
    wrapper, which updates the caches in place and returns them."""
    def render(p, task, **slots):
        kernel, launch = parts(p, task, **slots)
        return f"""{TRITON_PRELUDE}{kernel}

{ENTRY.py_def(task)}:
    N, H, Dh = key.shape
    key, value = key.contiguous(), value.contiguous()
    {launch}
    return k_cache, v_cache, k_scale, v_scale
"""
    return render


def program_per_head_parts(p, task, dmask="d < Dh", y=None):
    return quant(0, y) + f"""

@triton.jit
def int8_kv_quant_kernel(x_ptr, slot_ptr, cache_ptr, scale_ptr, H, Dh: tl.constexpr):
    # one program per (token, head) of one tensor: Dh elements, one scale
    tok, head = tl.program_id(0) // H, tl.program_id(0) % H
    slot = tl.load(slot_ptr + tok)
    if slot >= 0:  # -1 marks padding tokens
        d = tl.arange(0, Dh)
        x = tl.load(x_ptr + (tok * H + head).to(tl.int64) * Dh + d).to(tl.float32)
        q, s = quantize_int8(x)
        tl.store(cache_ptr + (slot * H + head) * Dh + d, q, mask={dmask})
        tl.store(scale_ptr + slot * H + head, s)
""", (f"for x, cache, sc in ((key, k_cache, k_scale), (value, v_cache, v_scale)):\n"
      f"        int8_kv_quant_kernel[(N * H,)](x, slot_mapping, cache, sc, H, Dh=Dh, num_warps={p['num_warps']})")


def fused_kv_parts(p, task, dmask="d < Dh"):
    return quant(0) + f"""

@triton.jit
def int8_kv_quant_kernel(k_ptr, v_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, N, H: tl.constexpr,
                         Dh: tl.constexpr):
    # one program per (token, head) does K and V: one launch, the slot is loaded once
    tok, head = tl.program_id(0) // H, tl.program_id(0) % H
    slot = tl.load(slot_ptr + tok)
    if slot >= 0:
        d = tl.arange(0, Dh)
        src = (tok * H + head).to(tl.int64) * Dh + d
        dst = (slot * H + head) * Dh + d
        qk, sk = quantize_int8(tl.load(k_ptr + src).to(tl.float32))
        qv, sv = quantize_int8(tl.load(v_ptr + src).to(tl.float32))
        tl.store(kc_ptr + dst, qk, mask={dmask})
        tl.store(vc_ptr + dst, qv, mask={dmask})
        tl.store(ks_ptr + slot * H + head, sk)
        tl.store(vs_ptr + slot * H + head, sv)
""", launch_line("(N * H,)", p)


def launch_line(grid: str, p, extra: str = "") -> str:
    return (f"int8_kv_quant_kernel[{grid}](key, value, slot_mapping, k_cache, v_cache, k_scale, v_scale, N, "
                f"H=H, Dh=Dh{extra}, num_warps={p['num_warps']})")


def token_per_program_parts(p, task, y=None):
    return quant(1, y) + """

@triton.jit
def int8_kv_quant_kernel(k_ptr, v_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, N, H: tl.constexpr,
                         Dh: tl.constexpr):
    # one program per token: the whole [H, Dh] tile is contiguous, so loads are 16-byte vectors
    tok = tl.program_id(0)
    slot = tl.load(slot_ptr + tok)
    if slot >= 0:
        h = tl.arange(0, H)
        d = tl.arange(0, Dh)
        src = tok.to(tl.int64) * H * Dh + h[:, None] * Dh + d[None, :]
        dst = slot * H * Dh + h[:, None] * Dh + d[None, :]
        qk, sk = quantize_int8(tl.load(k_ptr + src).to(tl.float32))
        qv, sv = quantize_int8(tl.load(v_ptr + src).to(tl.float32))
        tl.store(kc_ptr + dst, qk)
        tl.store(vc_ptr + dst, qv)
        tl.store(ks_ptr + slot * H + h, sk)
        tl.store(vs_ptr + slot * H + h, sv)
""", launch_line("(N,)", p)


def tile_body(tile: str, first: str = "{tile} * TOKENS") -> str:
    first = first.format(tile=tile)
    return f"""r = tl.arange(0, TOKENS * H)          # row r = (token - first) * H + head
d = tl.arange(0, Dh)
tok = {first} + r // H
slot = tl.load(slot_ptr + tok, mask=tok < N, other=-1)
live = (tok < N) & (slot >= 0)
src = tok[:, None].to(tl.int64) * H * Dh + (r % H)[:, None] * Dh + d[None, :]
dst = slot[:, None] * H * Dh + (r % H)[:, None] * Dh + d[None, :]
qk, sk = quantize_int8(tl.load(k_ptr + src, mask=(tok < N)[:, None], other=0.0).to(tl.float32))
qv, sv = quantize_int8(tl.load(v_ptr + src, mask=(tok < N)[:, None], other=0.0).to(tl.float32))
tl.store(kc_ptr + dst, qk, mask=live[:, None])
tl.store(vc_ptr + dst, qv, mask=live[:, None])
tl.store(ks_ptr + slot * H + r % H, sk, mask=live)
tl.store(vs_ptr + slot * H + r % H, sv, mask=live)"""

TILE_SIG = """
@triton.jit
def int8_kv_quant_kernel(k_ptr, v_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, N, H: tl.constexpr,
                         Dh: tl.constexpr, TOKENS: tl.constexpr):
"""


def multi_token_tile_parts(p, task, first="{tile} * TOKENS", y=None):
    body = tile_body("tl.program_id(0)", first).replace("\n", "\n    ")
    return quant(1, y) + f"""{TILE_SIG}    # TOKENS consecutive tokens are one contiguous [TOKENS*H, Dh] slab of K (and of V)
    {body}
""", launch_line(f"(triton.cdiv(N, {p['TOKENS']}),)", p, f", TOKENS={p['TOKENS']}")


def persistent_tokens_parts(p, task, last="tl.cdiv(N, TOKENS)"):
    body = tile_body("tile").replace("\n", "\n        ")
    grid = (f"(min(triton.cdiv(N, {p['TOKENS']}), {p['programs_per_sm']} * "
                "torch.cuda.get_device_properties(key.device).multi_processor_count),)")
    return quant(1) + f"""{TILE_SIG}    # a few programs per SM walk the token tiles: no wave of tiny programs for large N
    for tile in range(tl.program_id(0), {last}, tl.num_programs(0)):
        {body}
""", launch_line(grid, p, f", TOKENS={p['TOKENS']}")


def head_consts(p, task) -> dict:
    return {"H": task["H"], "Dh": task["Dh"]}


def tile_consts(p, task) -> dict:
    return {**head_consts(p, task), "TOKENS": p["TOKENS"]}


class Int8KvQuantTriton(OpModule):
    op, impl, family = "int8_kv_quant", "triton", "quant"
    title = "int8 KV-cache quantize-and-write"
    desc = ("For each new token n with slot = slot_mapping[n] >= 0 and each kv head h: s = max(max|x[n, h, :]| "
            "/ 127, 1e-8), cache[slot, h, :] = clamp(round_half_away(x[n, h, :] / s), -127, 127) as int8 and "
            "scale[slot, h] = s, for x = key (k_cache, k_scale) and x = value (v_cache, v_scale). Slots of -1 "
            "(padding) are skipped. Every division is IEEE (the reference divides by a tensor: PyTorch's CUDA "
            "division by a Python number multiplies by the reciprocal).")
    dims = {"N": "new tokens", "H": "kv heads", "Dh": "head dim", "S": "cache slots"}
    shapes = ({"N": 1, "H": 8, "Dh": 128, "S": 65536}, {"N": 64, "H": 8, "Dh": 128, "S": 131072},
              {"N": 256, "H": 32, "Dh": 128, "S": 131072}, {"N": 2048, "H": 4, "Dh": 256, "S": 65536},
              {"N": 4096, "H": 8, "Dh": 128, "S": 262144}, {"N": 8192, "H": 32, "Dh": 128, "S": 131072},
              {"N": 16384, "H": 8, "Dh": 128, "S": 262144})
    vendors = ("nvidia", "amd")
    entry = ENTRY
    inputs = ("key", "value", "slot_mapping", "k_cache", "v_cache", "k_scale", "v_scale")
    check_shape = {"N": 2048, "H": 4, "Dh": 256, "S": 65536}
    check_adapter, check_prepare = staticmethod(check_adapter), staticmethod(check_prepare)
    variants = (
        Rung("program_per_head", "one program per (token, head), separate launches for K and V",
             (WARPS,), memory_eff=0.4, launch=launch_of("head"), render=program(program_per_head_parts),
             consts=lambda p, task: {"Dh": task["Dh"]},
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"dmask": "d < Dh - 1"}}),
        Rung("fused_kv", "one program per (token, head) quantizes both K and V: one launch, one slot load",
             (WARPS,), memory_eff=0.5, launch=launch_of("fused"), render=program(fused_kv_parts), consts=head_consts,
             bugs={"off_by_one": {"dmask": "d < Dh - 1"}}),
        Rung("token_per_program", "one program per token: [H, Dh] tile, per-head absmax with tl.max(axis=1)",
             (WARPS,), memory_eff=0.82, launch=launch_of("token"), render=program(token_per_program_parts),
             consts=head_consts, bugs={"missing_scale": NO_SCALE}),
        Rung("multi_token_tile", "TOKENS tokens per program as one contiguous [TOKENS*H, Dh] tile",
             (TOKENS, WARPS), memory_eff=0.88, launch=launch_of("tile"), render=program(multi_token_tile_parts),
             consts=tile_consts, bugs={"off_by_one": {"first": "{tile} * TOKENS + 1"}, "missing_scale": NO_SCALE}),
        Rung("persistent_tokens", "persistent programs (a few per SM) striding over token tiles",
             (TOKENS, WARPS, Param("programs_per_sm", (1, 2, 4), 4)), memory_eff=0.91, launch=launch_of("persistent"),
             render=program(persistent_tokens_parts), consts=tile_consts,
             bugs={"off_by_one": {"last": "tl.cdiv(N, TOKENS) - 1"}}),
    )

    def cost(self, task: Task) -> Cost:
        n, h, d, e = task["N"], task["H"], task["Dh"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * 4 * n * h * d, bytes=2 * n * h * d * (e + 1) + 2 * n * h * 4 + 8 * n)

    torch_ref = TorchRef(
        body=("valid = slot_mapping >= 0\n"
              "        slots = slot_mapping[valid]\n"
              "        for x, cache, sc in ((key, k_cache, k_scale), (value, v_cache, v_scale)):\n"
              "            x32 = x.float()\n"
              "            amax = x32.abs().amax(-1)\n"
              "            s = (amax / torch.full_like(amax, 127.0)).clamp(min=1e-8)  # IEEE: see desc\n"
              "            y = x32 / s[..., None]\n"
              "            q = (torch.sign(y) * torch.floor(y.abs() + 0.5)).clamp(-127, 127).to(torch.int8)\n"
              "            cache[slots] = q[valid]\n"
              "            sc[slots] = s[valid]\n"
              "        return k_cache, v_cache, k_scale, v_scale"),
        inputs=("[torch.randn(N, H, Dh, dtype=DTYPE, device='cuda'), torch.randn(N, H, Dh, dtype=DTYPE, device='cuda'),\n"
                "            torch.randperm(S, device='cuda')[:N],\n"
                "            torch.zeros(S, H, Dh, dtype=torch.int8, device='cuda'),\n"
                "            torch.zeros(S, H, Dh, dtype=torch.int8, device='cuda'),\n"
                "            torch.zeros(S, H, dtype=torch.float32, device='cuda'),\n"
                "            torch.zeros(S, H, dtype=torch.float32, device='cuda')]"))

    def triton_kernels(self, variant, params: dict, task: Task) -> list:
        x, c = triton_ptr(task.dtype, task), variant.consts(params, task)
        if "H" not in c:                                # one tensor per launch
            sig = {"x_ptr": x, "slot_ptr": "*i64", "cache_ptr": "*i8", "scale_ptr": "*fp32", "H": "i32",
                   "Dh": "constexpr"}
            return [KernelSpec("int8_kv_quant_kernel", sig, c, num_warps=params["num_warps"])]
        sig = {"k_ptr": x, "v_ptr": x, "slot_ptr": "*i64", "kc_ptr": "*i8", "vc_ptr": "*i8", "ks_ptr": "*fp32",
               "vs_ptr": "*fp32", "N": "i32", **{k: "constexpr" for k in c}}
        return [KernelSpec("int8_kv_quant_kernel", sig, c, num_warps=params["num_warps"])]
