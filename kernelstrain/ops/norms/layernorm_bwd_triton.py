"""LayerNorm backward in Triton: dx per row, plus dgamma/dbeta reduced over all rows.

Ladder: every row atomically adds into the same D accumulators (T-way contention) ->
rows share GROUP partial rows behind spin locks, a second kernel sums the groups ->
lock-free per-program partials over ROWS_PER_PROGRAM rows -> persistent programs (one
partial row per program) -> persistent with the next row's dy/x prefetched under the
current row's reductions.
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, TRITON_PRELUDE, KernelSpec,
                    cdiv, kernelbench_program, triton_ptr)

NUM_WARPS = Param("num_warps", (4, 8, 16), 8)


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


class LayerNormBwdTriton(OpModule):
    op, impl, family = "layernorm_bwd", "triton", "norms"
    title = "LayerNorm backward"
    desc = ("Given dy, x, weight and the saved per-row mean and rstd (fp32): dx = rstd * (w*dy - mean(w*dy) "
            "- xhat * mean(w*dy*xhat)) with xhat = (x - mean) * rstd; dweight = sum_t dy*xhat, dbias = sum_t dy.")
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 2048, "D": 2048}, {"T": 4096, "D": 4096}, {"T": 8192, "D": 5120},
              {"T": 16384, "D": 8192}, {"T": 32768, "D": 1024}, {"T": 1024, "D": 8192})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("atomic_dgamma", "one program per row; dW/dB via tl.atomic_add on D fp32 accumulators",
                (NUM_WARPS,), memory_eff=0.6, bugs=("racy_update", "missing_scale")),
        Variant("locked_group_buffers", "rows share GROUP partial rows guarded by spin locks; second kernel sums them",
                (Param("GROUP", (16, 32, 64, 128), 32), NUM_WARPS), memory_eff=0.75,
                bugs=("racy_update", "missing_scale")),
        Variant("partial_buffers", "lock-free: each program owns ROWS_PER_PROGRAM rows and one partial row",
                (Param("ROWS_PER_PROGRAM", (8, 16, 32, 64), 16), NUM_WARPS), memory_eff=0.85,
                bugs=("bad_combine_index", "missing_scale")),
        Variant("persistent", "grid = #SMs x k programs striding over rows; partials = one row per program",
                (NUM_WARPS, Param("programs_per_sm", (1, 2, 4), 1)), memory_eff=0.88,
                bugs=("off_by_one", "missing_scale")),
        Variant("persistent_prefetch", "persistent, with the next row's dy and x prefetched under this row's reductions",
                (NUM_WARPS, Param("programs_per_sm", (1, 2, 4), 1)),
                memory_eff=0.92, bugs=("off_by_one", "bad_combine_index")),
    )

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        # read dy, x, weight, mean, rstd; write dx, dweight, dbias
        return Cost(flops=12 * t * d, bytes=3 * t * d * e + 3 * d * e + 8 * t)

    def _programs(self, variant: Variant, params: dict, task: Task) -> int:
        t = task["T"]
        if variant.tag == "partial_buffers":
            return cdiv(t, params["ROWS_PER_PROGRAM"])
        if variant.tag.startswith("persistent"):
            return min(t, task.gpu.sms * params["programs_per_sm"])
        return t

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, gpu = task["T"], task["D"], task.gpu
        threads = params["num_warps"] * gpu.warp
        block_d = next_pow2(d)
        per = max(1, block_d // threads)                 # elements of a row each thread holds
        min_bytes = self.cost(task).bytes
        grid = self._programs(variant, params, task)
        regs = 24 + 3 * per                              # dy, x, w as fp32
        util = min(1.0, d / block_d) * min(1.0, block_d / threads) * 0.85
        if variant.tag == "atomic_dgamma":
            # 2*T*D fp32 atomics on only 2*D addresses: each address serialises T updates in L2
            extra = 4.0 * 8 * t * d / min_bytes
        elif variant.tag == "locked_group_buffers":
            # read-modify-write of a partial row per row (L2-resident), plus waits on GROUP locks
            extra = 16 * t * d / min_bytes * (0.25 + 8 / params["GROUP"])
        else:
            regs += 2 * per                              # dW, dB accumulated in registers
            extra = 2 * 8 * grid * d / min_bytes         # partials written, then read by the reduce kernel
        if variant.tag == "persistent_prefetch":
            regs += per                                  # next row's dy and x in storage precision
            util /= 0.85                                 # loads in flight during the reductions
        cap = min(255, gpu.regs_per_sm // threads)
        spill = max(0, regs - cap) / 64
        return Launch(grid=grid, threads=threads, smem_bytes=4 * params["num_warps"], regs=min(regs, cap),
                      bytes_per_access=min(16, per * DTYPE_BYTES[task.dtype]), traffic=1.0 + extra + spill,
                      lane_util=util, launches=1 if variant.tag == "atomic_dgamma" else 2)

    def signature(self, task: Task) -> str:
        return ("def layernorm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, "
                "rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (dx, dweight, dbias)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="dy, x, mean, rstd",
            body="x32, dy32, w = x.float(), dy.float(), self.weight.float()\n"
                 "        xhat = (x32 - mean[:, None]) * rstd[:, None]\n        wdy = w * dy32\n"
                 "        dx = (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True) - wdy.mean(-1, keepdim=True)) * rstd[:, None]\n"
                 "        return dx.to(x.dtype), (dy32 * xhat).sum(0).to(x.dtype), dy32.sum(0).to(x.dtype)",
            init="self.weight = nn.Parameter(1 + 0.1 * torch.randn(D).to(DTYPE))",
            inputs="(lambda x: [torch.randn(T, D, dtype=DTYPE, device='cuda'), x, x.float().mean(-1),\n"
                   "            torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)])(torch.randn(T, D, dtype=DTYPE, device='cuda'))")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"dy_ptr": ptr, "x_ptr": ptr, "w_ptr": ptr, "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "dx_ptr": ptr}
        consts = self._constexprs(variant, params, task)
        part = "" if variant.tag == "atomic_dgamma" else "_part"
        sig.update({f"dw{part}_ptr": "*fp32", f"db{part}_ptr": "*fp32"})
        if variant.tag == "locked_group_buffers":
            sig["lock_ptr"] = "*i32"
        sig.update({"T": "i32", "D": "i32", **{k: "constexpr" for k in consts}})
        specs = [KernelSpec("layernorm_bwd_kernel", sig, consts, num_warps=params["num_warps"], num_stages=1)]
        if variant.tag != "atomic_dgamma":
            red = {"dw_part_ptr": "*fp32", "db_part_ptr": "*fp32", "dw_ptr": ptr, "db_ptr": ptr, "P": "i32", "D": "i32"}
            specs.append(KernelSpec("dwdb_reduce_kernel", {**red, "BLOCK_P": "constexpr", "BLOCK_N": "constexpr"},
                                    {"BLOCK_P": 32, "BLOCK_N": 128}, num_warps=4, num_stages=1))
        return specs

    def _constexprs(self, variant, params, task) -> dict:
        extra = {k: params[k] for k in ("GROUP", "ROWS_PER_PROGRAM") if k in params}
        return {**extra, "BLOCK_D": next_pow2(task["D"])}

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        kw = "".join(f"{k}={v}, " for k, v in self._constexprs(variant, params, task).items())
        tag, nw = variant.tag, params["num_warps"]
        jits = [self._row_backward(bug), getattr(self, "_" + tag)(bug)]
        if tag == "atomic_dgamma":
            body = ("    dw = torch.zeros(D, dtype=torch.float32, device=x.device)\n"
                    "    db = torch.zeros(D, dtype=torch.float32, device=x.device)\n"
                    f"    layernorm_bwd_kernel[(T,)](dy, x, weight, mean, rstd, dx, dw, db, T, D, {kw}num_warps={nw})\n"
                    "    return dx, dw.to(x.dtype), db.to(x.dtype)\n")
        else:
            jits.append(self._reduce(None if tag == "persistent_prefetch" and bug == "off_by_one" else bug))
            locked = tag == "locked_group_buffers"
            programs = {"locked_group_buffers": str(params.get("GROUP")),
                        "partial_buffers": f"triton.cdiv(T, {params.get('ROWS_PER_PROGRAM')})"}.get(
                tag, f"min(T, torch.cuda.get_device_properties(x.device).multi_processor_count * {params.get('programs_per_sm')})")
            alloc = "torch.zeros" if locked else "torch.empty"   # lock-guarded partials accumulate from zero
            body = (f"    P = {programs}  # partial rows\n"
                    f"    dw_part = {alloc}((P, D), dtype=torch.float32, device=x.device)\n"
                    f"    db_part = {alloc}((P, D), dtype=torch.float32, device=x.device)\n"
                    + ("    locks = torch.zeros(P, dtype=torch.int32, device=x.device)\n" if locked else "")
                    + f"    layernorm_bwd_kernel[({'T' if locked else 'P'},)](dy, x, weight, mean, rstd, dx, dw_part, db_part, "
                    f"{'locks, ' if locked else ''}T, D, {kw}num_warps={nw})\n"
                    "    dw, db = torch.empty_like(weight), torch.empty_like(weight)\n"
                    "    dwdb_reduce_kernel[(triton.cdiv(D, 128),)](dw_part, db_part, dw, db, P, D, BLOCK_P=32, BLOCK_N=128, "
                    "num_warps=4)\n    return dx, dw, db\n")
        kernels = "\n\n\n".join("@triton.jit\n" + j.strip("\n") for j in jits)
        return (f"{TRITON_PRELUDE}\n\n{kernels}\n\n\ndef layernorm_bwd(dy, x, weight, mean, rstd):\n"
                f"    T, D = x.shape\n    dx = torch.empty_like(x)\n{body}")

    @staticmethod
    def _row_backward(bug):
        scale = "" if bug == "missing_scale" else " * rstd"
        return f"""
def row_backward(dy, x, w, mean, rstd, mask, D):
    # dx = rstd * (w*dy - mean(w*dy) - xhat * mean(w*dy*xhat)); returns dx and this row's dW term.
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = w * dy
    c1 = tl.sum(xhat * wdy, axis=0) / D
    c2 = tl.sum(wdy, axis=0) / D
    dx = (wdy - (xhat * c1 + c2)){scale}
    return dx, dy * xhat
"""

    _LOAD_ROW = """        offs = row.to(tl.int64) * D + cols
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dx, dw_row = row_backward(dy, x, w, tl.load(mean_ptr + row), tl.load(rstd_ptr + row), mask, D)
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
"""
    _HEAD = """    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
"""

    def _atomic_dgamma(self, bug):
        if bug == "racy_update":
            upd = """    tl.store(dw_ptr + cols, tl.load(dw_ptr + cols, mask=mask) + dw_row, mask=mask)
    tl.store(db_ptr + cols, tl.load(db_ptr + cols, mask=mask) + dy, mask=mask)"""
        else:
            upd = """    tl.atomic_add(dw_ptr + cols, dw_row, mask=mask)
    tl.atomic_add(db_ptr + cols, dy, mask=mask)"""
        load = "\n".join(line[4:] for line in self._LOAD_ROW.splitlines())
        return f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # One program per row. Every row adds into the same 2*D fp32 accumulators, so
    # each address sees T atomic updates serialised in L2.
    row = tl.program_id(0)
{self._HEAD}{load}
{upd}
"""

    def _locked_group_buffers(self, bug):
        load = "\n".join(line[4:] for line in self._LOAD_ROW.splitlines())
        acquire = "" if bug == "racy_update" else "    while tl.atomic_cas(lock_ptr + g, 0, 1) == 1:\n        pass\n"
        release = "" if bug == "racy_update" else "    tl.atomic_xchg(lock_ptr + g, 0)\n"
        barrier = "" if bug == "racy_update" else \
            "    tl.debug_barrier()  # every warp's store must land before the lock is released\n"
        return f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, lock_ptr,
                         T, D, GROUP: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per row; row r accumulates into partial row r % GROUP under a spin
    # lock, so only T / GROUP programs contend for each lock.
    row = tl.program_id(0)
{self._HEAD}{load}
    g = row % GROUP
    part = g * D + cols
{acquire}    tl.store(dw_part_ptr + part, tl.load(dw_part_ptr + part, mask=mask) + dw_row, mask=mask)
    tl.store(db_part_ptr + part, tl.load(db_part_ptr + part, mask=mask) + dy, mask=mask)
{barrier}{release}"""

    def _partial_buffers(self, bug):
        return f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         ROWS_PER_PROGRAM: tl.constexpr, BLOCK_D: tl.constexpr):
    # Program p owns rows [p * ROWS_PER_PROGRAM, ...): dW/dB accumulate in registers
    # and land in partial row p, no locks, no atomics.
    pid = tl.program_id(0)
{self._HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for row in range(pid * ROWS_PER_PROGRAM, tl.minimum(pid * ROWS_PER_PROGRAM + ROWS_PER_PROGRAM, T)):
{self._LOAD_ROW}        dw_acc += dw_row
        db_acc += dy
    tl.store(dw_part_ptr + pid * D + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + pid * D + cols, db_acc, mask=mask)
"""

    def _persistent(self, bug):
        return f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # Persistent: #SMs x k programs stride over the rows, so the partial buffer is
    # only (programs x D) and the weight is loaded once per program.
    pid = tl.program_id(0)
{self._HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for row in range(pid, T, tl.num_programs(0)):
{self._LOAD_ROW}        dw_acc += dw_row
        db_acc += dy
    tl.store(dw_part_ptr + pid * D + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + pid * D + cols, db_acc, mask=mask)
"""

    def _persistent_prefetch(self, bug):
        stop = "T - 1" if bug == "off_by_one" else "T"
        return f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # Persistent, and the next row's dy and x are loaded before this row's two
    # reductions, so DRAM stays busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
{self._HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    first = mask & (pid < T)
    dy_next = tl.load(dy_ptr + pid.to(tl.int64) * D + cols, mask=first, other=0.0)
    x_next = tl.load(x_ptr + pid.to(tl.int64) * D + cols, mask=first, other=0.0)
    for row in range(pid, {stop}, step):
        offs = row.to(tl.int64) * D + cols
        dy = dy_next.to(tl.float32)
        x = x_next.to(tl.float32)
        ahead = mask & (row + step < T)
        dy_next = tl.load(dy_ptr + offs + step * D, mask=ahead, other=0.0)
        x_next = tl.load(x_ptr + offs + step * D, mask=ahead, other=0.0)
        dx, dw_row = row_backward(dy, x, w, tl.load(mean_ptr + row), tl.load(rstd_ptr + row), mask, D)
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dw_row
        db_acc += dy
    tl.store(dw_part_ptr + pid * D + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + pid * D + cols, db_acc, mask=mask)
"""

    @staticmethod
    def _reduce(bug):
        live = "P - 1" if bug == "off_by_one" else "P"
        offs = "parts[:, None] + cols[None, :] * P" if bug == "bad_combine_index" else "parts[:, None] * D + cols[None, :]"
        return f"""
def dwdb_reduce_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, P, D, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # Kernel 2: each program sums the P partial rows of a BLOCK_N column tile,
    # BLOCK_P rows at a time (coalesced along D).
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < D
    dw = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        parts = p0 + tl.arange(0, BLOCK_P)
        m = (parts < {live})[:, None] & col_ok[None, :]
        offs = {offs}
        dw += tl.load(dw_part_ptr + offs, mask=m, other=0.0)
        db += tl.load(db_part_ptr + offs, mask=m, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_ok)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_ok)
"""
