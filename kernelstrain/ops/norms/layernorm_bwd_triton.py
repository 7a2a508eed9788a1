"""LayerNorm backward in Triton: dx per row, plus dgamma/dbeta reduced over all rows.

Ladder: every row atomically adds into the same D accumulators (T-way contention) ->
rows share GROUP partial rows behind spin locks, a second kernel sums the groups ->
lock-free per-program partials over ROWS_PER_PROGRAM rows -> persistent programs (one
partial row per program) -> persistent with the next row's dy/x prefetched under the
current row's reductions.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, KernelSpec, cdiv, triton_ptr
from ._layernorm_bwd_reduce import with_reduce_chain
from ._norms import next_pow2, triton_spill
from .layernorm_bwd_spec import ENTRY, LayerNormBwdSpec

NUM_WARPS = Param("num_warps", (4, 8, 16), 8)
PER_SM = Param("programs_per_sm", (1, 2, 4), 1)


def dwdb_launch(tag: str):
    """Launch model of a rung: the dW/dB traffic (atomics, locked partials, lock-free partials)
    and the prefetch are what the rungs change."""
    def launch(p, task):
        t, d, gpu = task["T"], task["D"], task.gpu
        threads = p["num_warps"] * gpu.warp
        block_d = next_pow2(d)
        per = max(1, block_d // threads)                 # elements of a row each thread holds
        min_bytes, grid = LayerNormBwdSpec.cost(None, task).bytes, programs(p, task)
        regs = 24 + 3 * per                              # dy, x, w as fp32
        pinned = 0                                       # loop-carried across rows (triton_spill)
        util = min(1.0, d / block_d) * min(1.0, block_d / threads) * 0.85
        if tag == "atomic_dgamma":
            # 2*T*D fp32 atomics on only 2*D addresses: each address serialises T updates in L2
            extra = 4.0 * 8 * t * d / min_bytes
        elif tag == "locked_group_buffers":
            # read-modify-write of a partial row per row (L2-resident); the waits are the lock chain below
            extra = 16 * t * d / min_bytes * 0.25
        else:
            regs += 2 * per                              # dW, dB accumulated in registers
            pinned += 2 * per
            extra = 8 * grid * d / min_bytes             # partials written (the reduce's read: with_reduce_chain)
        if tag == "persistent_prefetch":
            regs += per                                  # next row's dy and x in storage precision
            pinned += per
            util /= 0.85                                 # loads in flight during the reductions
        cap = min(255, gpu.regs_per_sm // threads)
        spill = triton_spill(regs, cap, pinned) - 1.0
        main = Launch(grid=grid, threads=threads, smem_bytes=4 * p["num_warps"], regs=min(regs, cap),
                      bytes_per_access=min(16, per * DTYPE_BYTES[task.dtype]), traffic=1.0 + extra + spill,
                      lane_util=util, launches=1 if tag == "atomic_dgamma" else 2,
                      serial_atomics=lock_chain(t, d, p["GROUP"]) if tag == "locked_group_buffers" else 0,
                      rounds=cdiv(t, grid), unrolled=per)
        return main if tag == "atomic_dgamma" else with_reduce_chain(main, p.get("GROUP", grid), task)
    return launch


# One lock's critical sections run one after another: T / GROUP of them, each a CAS round trip,
# the partial row's load + store through L2 and the release (~1.5 us, plus ~0.25 ns a column).
# H200: T=32768 D=1024 GROUP=32 took 1.80-1.85 ms (1024 sections), T=8192 D=5120 0.70 ms (256),
# T=1024 D=8192 0.126 ms (32). Counted in same-address atomic slots (sim.SAME_ADDRESS_ATOMIC_S).
LOCK_SECTION_ATOMICS, LOCK_COLUMN_ATOMICS = 850, 0.14


def lock_chain(t: int, d: int, group: int) -> int:
    return int(cdiv(t, group) * (LOCK_SECTION_ATOMICS + LOCK_COLUMN_ATOMICS * d))


def programs(p, task) -> int:
    if "ROWS_PER_PROGRAM" in p:
        return cdiv(task["T"], p["ROWS_PER_PROGRAM"])
    if "programs_per_sm" in p:
        return min(task["T"], task.gpu.sms * p["programs_per_sm"])
    return task["T"]


def row_backward(scale: str) -> str:
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


LOAD_ROW = """        offs = row.to(tl.int64) * D + cols
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dx, dw_row = row_backward(dy, x, w, tl.load(mean_ptr + row), tl.load(rstd_ptr + row), mask, D)
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
"""
ROW_LOAD = "\n".join(line[4:] for line in LOAD_ROW.splitlines())
HEAD = """    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
"""
RSTD = " * rstd"                  # the rstd factor of dx that missing_scale drops
PART_OFFS = "parts[:, None] * D + cols[None, :]"


def reduce_kernel(live: str = "P", offs: str = PART_OFFS) -> str:
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


def jit(*kernels) -> str:
    return "\n\n\n".join("@triton.jit\n" + k.strip("\n") for k in kernels)


# -- atomic_dgamma -------------------------------------------------------------------------
ATOMIC_UPDATE = """    tl.atomic_add(dw_ptr + cols, dw_row, mask=mask)
    tl.atomic_add(db_ptr + cols, dy, mask=mask)"""
PLAIN_UPDATE = """    tl.store(dw_ptr + cols, tl.load(dw_ptr + cols, mask=mask) + dw_row, mask=mask)
    tl.store(db_ptr + cols, tl.load(db_ptr + cols, mask=mask) + dy, mask=mask)"""


def atomic_dgamma_src(p, task, scale=RSTD, upd=ATOMIC_UPDATE):
    return jit(row_backward(scale), f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # One program per row. Every row adds into the same 2*D fp32 accumulators, so
    # each address sees T atomic updates serialised in L2.
    row = tl.program_id(0)
{HEAD}{ROW_LOAD}
{upd}
""")


# -- locked_group_buffers ------------------------------------------------------------------
def locked_group_buffers_src(p, task, scale=RSTD, locked=True):
    # spin until the lock is taken (a loop whose body retries: KernelBench's checker refuses `pass`)
    acquire = ("    held = tl.atomic_cas(lock_ptr + g, 0, 1)\n    while held == 1:\n"
               "        held = tl.atomic_cas(lock_ptr + g, 0, 1)\n") if locked else ""
    release = "    tl.atomic_xchg(lock_ptr + g, 0)\n" if locked else ""
    barrier = "    tl.debug_barrier()  # every warp's store must land before the lock is released\n" if locked else ""
    return jit(row_backward(scale), f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, lock_ptr,
                         T, D, GROUP: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per row; row r accumulates into partial row r % GROUP under a spin
    # lock, so only T / GROUP programs contend for each lock.
    row = tl.program_id(0)
{HEAD}{ROW_LOAD}
    g = row % GROUP
    part = g * D + cols
{acquire}    tl.store(dw_part_ptr + part, tl.load(dw_part_ptr + part, mask=mask) + dw_row, mask=mask)
    tl.store(db_part_ptr + part, tl.load(db_part_ptr + part, mask=mask) + dy, mask=mask)
{barrier}{release}""", reduce_kernel())


# -- partial_buffers, persistent, persistent_prefetch --------------------------------------
def partial_buffers_src(p, task, scale=RSTD, offs=PART_OFFS):
    return jit(row_backward(scale), f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         ROWS_PER_PROGRAM: tl.constexpr, BLOCK_D: tl.constexpr):
    # Program p owns rows [p * ROWS_PER_PROGRAM, ...): dW/dB accumulate in registers
    # and land in partial row p, no locks, no atomics.
    pid = tl.program_id(0)
{HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for row in range(pid * ROWS_PER_PROGRAM, tl.minimum(pid * ROWS_PER_PROGRAM + ROWS_PER_PROGRAM, T)):
{LOAD_ROW}        dw_acc += dw_row
        db_acc += dy
    tl.store(dw_part_ptr + pid * D + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + pid * D + cols, db_acc, mask=mask)
""", reduce_kernel(offs=offs))


def persistent_src(p, task, scale=RSTD, live="P"):
    return jit(row_backward(scale), f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # Persistent: #SMs x k programs stride over the rows, so the partial buffer is
    # only (programs x D) and the weight is loaded once per program.
    pid = tl.program_id(0)
{HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for row in range(pid, T, tl.num_programs(0)):
{LOAD_ROW}        dw_acc += dw_row
        db_acc += dy
    tl.store(dw_part_ptr + pid * D + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + pid * D + cols, db_acc, mask=mask)
""", reduce_kernel(live))


def persistent_prefetch_src(p, task, stop="T", offs=PART_OFFS):
    return jit(row_backward(RSTD), f"""
def layernorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, T, D,
                         BLOCK_D: tl.constexpr):
    # Persistent, and the next row's dy and x are loaded before this row's two
    # reductions, so DRAM stays busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
{HEAD}    dw_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
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
""", reduce_kernel(offs=offs))


BAD_OFFS = {"offs": "parts[:, None] + cols[None, :] * P"}
NO_SCALE = {"scale": ""}


class LayerNormBwdTriton(LayerNormBwdSpec):
    impl = "triton"
    variants = (
        Rung("atomic_dgamma", "one program per row; dW/dB via tl.atomic_add on D fp32 accumulators",
             (NUM_WARPS,), memory_eff=0.6, launch=dwdb_launch("atomic_dgamma"), render=atomic_dgamma_src,
             bugs={"racy_update": {"upd": PLAIN_UPDATE}, "missing_scale": NO_SCALE}),
        Rung("locked_group_buffers", "rows share GROUP partial rows guarded by spin locks; second kernel sums them",
             (Param("GROUP", (16, 32, 64, 128), 32), NUM_WARPS), memory_eff=0.75, launch=dwdb_launch("locked_group_buffers"),
             render=locked_group_buffers_src, bugs={"racy_update": {"locked": False}, "missing_scale": NO_SCALE}),
        Rung("partial_buffers", "lock-free: each program owns ROWS_PER_PROGRAM rows and one partial row",
             (Param("ROWS_PER_PROGRAM", (8, 16, 32, 64), 16), NUM_WARPS), memory_eff=0.85, launch=dwdb_launch("partial_buffers"),
             render=partial_buffers_src, bugs={"bad_combine_index": BAD_OFFS, "missing_scale": NO_SCALE}),
        Rung("persistent", "grid = #SMs x k programs striding over rows; partials = one row per program",
             (NUM_WARPS, PER_SM), memory_eff=0.88, launch=dwdb_launch("persistent"), render=persistent_src,
             bugs={"off_by_one": {"live": "P - 1"}, "missing_scale": NO_SCALE}),
        Rung("persistent_prefetch", "persistent, with the next row's dy and x prefetched under this row's reductions",
             (NUM_WARPS, PER_SM), memory_eff=0.92, launch=dwdb_launch("persistent_prefetch"),
             render=persistent_prefetch_src,
             bugs={"off_by_one": {"stop": "T - 1"}, "bad_combine_index": BAD_OFFS}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"dy_ptr": ptr, "x_ptr": ptr, "w_ptr": ptr, "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "dx_ptr": ptr}
        consts = constexprs(params, task)
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

    def assemble(self, kernels, variant, params, task) -> str:
        kw = "".join(f"{k}={v}, " for k, v in constexprs(params, task).items())
        tag, nw = variant.tag, params["num_warps"]
        if tag == "atomic_dgamma":
            body = ("    dw = torch.zeros(D, dtype=torch.float32, device=x.device)\n"
                    "    db = torch.zeros(D, dtype=torch.float32, device=x.device)\n"
                    f"    layernorm_bwd_kernel[(T,)](dy, x, weight, mean, rstd, dx, dw, db, T, D, {kw}num_warps={nw})\n"
                    "    return dx, dw.to(x.dtype), db.to(x.dtype)\n")
        else:
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
        return (f"{TRITON_PRELUDE}\n\n{kernels}\n\n\n{ENTRY.py_def(task)}:\n"
                f"    T, D = x.shape\n    dx = torch.empty_like(x)\n{body}")


def constexprs(params, task) -> dict:
    extra = {k: params[k] for k in ("GROUP", "ROWS_PER_PROGRAM") if k in params}
    return {**extra, "BLOCK_D": next_pow2(task["D"])}
