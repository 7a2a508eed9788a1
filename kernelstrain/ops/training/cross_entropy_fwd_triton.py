"""Cross-entropy forward in Triton: loss[t] = logsumexp(logits[t, :]) - logits[t, label[t]].

Vocabularies of 32000 / 128256: a row is 64-512 KB, far too big for one program's registers.
Ladder: load the whole row at once (spills, workable only for small V) -> loop over chunks in
two passes (max, then sum of exp) -> single pass with an online logsumexp -> split V across
programs, then a combine kernel merges the (max, sum) partials: fills the GPU when T is small.
"""
from ..norms._norms import triton_spill
from ..base import (Cost, KernelSpec, Launch, OpModule, Param, Rung, Task, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, TorchRef)
from ..contract import Arg, Entry, Scalar
from .. import stream_stages, unroll

NUM_WARPS = Param("num_warps", (4, 8, 16), 8)
BLOCK = Param("BLOCK", (1024, 2048, 4096, 8192), 4096)
IGNORE = -100
LOAD = 'tl.load(row_ptr + cols, mask=cols < V, other=-float("inf"))'
# no_bounds_check: the tail past V (V is never a multiple of BLOCK here) reads the next row
LOAD_BUGS = {"wrong_init": {"load": "tl.load(row_ptr + cols, mask=cols < V, other=0.0)"},
             "no_bounds_check": {"load": "tl.load(row_ptr + cols)"}}
# Both only add the tail's 768-2816 lanes to a sum over V: the loss moves by 0.003 (exp(0) per lane)
# or 0.02 (the next row's logits), past fp32's 1e-4 of a loss near 12 but inside bf16's 1e-2 (0.13):
# at bf16 the kernel still rounds to the right loss, so the bugs are injected into fp32 tasks only.
LOAD_BUG_DTYPES = (("wrong_init", ("fp32",)), ("no_bounds_check", ("fp32",)))
RESCALE = "s_vec * tl.exp(m_vec - m_new)"      # the running-sum rescale missing_scale drops
# The online loop's trips in flight by num_stages: stream_stages' table but at 4 stages, which an H100 ran slower than 3
# and than the plain loop at both shapes timed (room_device_check_triton KNOBT_SET=tuning, 2026-12-06, bf16 V=128256,
# BLOCK 4096 on 8 warps: T=16 25.7 / 31.0 / 19.4 / 27.6 us at 1-4 stages, T=512 55.0 / 60.4 / 56.6 / 63.3, repeated
# 55.9 / 61.4 / 57.5 / 64.1); chunked_two_pass's loop, at the same 16 rows, gained to 4 (27.7 / 33.8 / 26.7 / 24.1)
ONLINE_IN_FLIGHT = {**stream_stages.TRIPS_IN_FLIGHT, 4: 0.9}

ENTRY = Entry("cross_entropy_fwd", (
    Arg("logits", "in", ("T", "V")), Arg("labels", "in", ("T",), "int64"), Arg("loss", "out", ("T",), "fp32"),
    Scalar("T"), Scalar("V"), Scalar("ignore_index", "int", str(IGNORE))))


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def min_bytes(task) -> int:
    return task["T"] * task["V"] * DTYPE_BYTES[task.dtype] + 12 * task["T"]


def launch_of(kind: str):
    """full (the row in registers), two_pass (the row read twice), online (one pass) or split
    (SPLIT programs per row and a combine launch)."""
    def launch(p, task):
        t, v, e, gpu = task["T"], task["V"], DTYPE_BYTES[task.dtype], task.gpu
        threads = p["num_warps"] * gpu.warp
        smem = p["num_warps"] * 4                      # cross-warp reduction scratch
        vec = min(16 // e, 4)                          # Triton's per-thread load width here
        if kind == "full":
            # fp32 values each thread holds; Triton keeps about twice the cap before it spills
            # (H200: V=32000 on 4 warps, 256 a thread, ran as fast as the chunked rungs)
            per_thread = _pow2(v) // threads
            return Launch(grid=t, threads=threads, smem_bytes=smem, regs=min(255, 40 + per_thread),
                          bytes_per_access=vec * e, traffic=triton_spill(40 + per_thread, 255),
                          lane_util=v / _pow2(v), unrolled=per_thread)
        block = p["BLOCK"]
        lane = v / (cdiv(v, block) * block)
        regs = 32 + 2 * block // threads
        if kind == "two_pass":
            resident = min(t, gpu.sms * 2)             # rows in flight between the two passes
            reread = min(1.0, resident * v * e / (gpu.l2_mb * 1e6))
            return Launch(grid=t, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=vec * e,
                          traffic=1 + reread, lane_util=lane)
        if kind == "online":
            return Launch(grid=t, threads=threads, smem_bytes=smem, regs=regs + block // threads,
                          bytes_per_access=vec * e, lane_util=lane)
        split = p["SPLIT"]
        lane = v / (split * cdiv(cdiv(v, split), block) * block)
        return Launch(grid=t * split, threads=threads, smem_bytes=smem, regs=regs + block // threads,
                      bytes_per_access=vec * e, traffic=1 + 16 * t * split / min_bytes(task),
                      lane_util=lane, launches=2)
    return launch


def finish(lse: str) -> str:
    return f"""    label = tl.load(labels_ptr + row)
    ignored = label == ignore_index
    x_label = tl.load(row_ptr + tl.where(ignored, 0, label)).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(ignored, 0.0, {lse} - x_label))"""


def wrapper(task, launch: str, extra: str = "") -> str:
    return f"""

{ENTRY.py_def(task)}:
    T, V = logits.shape
    assert logits.stride(1) == 1
    loss = torch.empty(T, dtype=torch.float32, device=logits.device)
{extra}    {launch}
    return loss
"""


def row_kernel(why: str, body: str, lse: str, task, p, block: str) -> str:
    """A one-program-per-row candidate: the kernel's def line, `why` (its comment lines), the
    row pointer, `body` computing `lse`, the loss store, and the wrapper launching T programs."""
    return f'''
@triton.jit
def cross_entropy_fwd_kernel(logits_ptr, labels_ptr, loss_ptr, V, stride, ignore_index, BLOCK: tl.constexpr):
{why}
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride
{body}
{finish(lse)}
''' + wrapper(task, f"cross_entropy_fwd_kernel[(T,)](logits, labels, loss, V, logits.stride(0), ignore_index, "
                    f"BLOCK={block}, num_warps={p['num_warps']})")


def staged(launch, in_flight=stream_stages.TRIPS_IN_FLIGHT):
    """A chunked rung's launch with its V loop unrolled and pipelined as the params say (ops/stream_stages.py:
    a program per row streams one BLOCK of logits a trip; few rows leave DRAM's bandwidth-latency product
    short, where trips staged ahead in shared memory help as they did softmax's twin loop on an H100)."""
    return stream_stages.launch_of(unroll.launch_of(launch, unroll.chunk_trips("V"), unroll.chunk_regs),
                                   unroll.chunk_trips("V"), loads=1, row="V", in_flight=in_flight)


def full_row_src(p, task, load=LOAD):
    return row_kernel("""    # The whole row in registers: BLOCK = next_pow2(V) values spread over the program's
    # threads. Fine for a small vocabulary; at 32K-128K the values spill to local memory.""", f"""    cols = tl.arange(0, BLOCK)
    x = {load}.to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))""", "lse", task, p, "triton.next_power_of_2(V)")


def chunked_two_pass_src(p, task, load=LOAD):
    return row_kernel("""    # Pass 1 finds the row max chunk by chunk, pass 2 sums exp(x - max): the row is read
    # twice (the second time partly from L2).""", f"""    offs = tl.arange(0, BLOCK)
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + offs
        x = tl.load(row_ptr + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_vec = tl.maximum(m_vec, x)
    m = tl.max(m_vec, axis=0)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + offs
        x = {load}.to(tl.float32)
        s_vec += tl.exp(x - m)
    lse = m + tl.log(tl.sum(s_vec, axis=0))""", "lse", task, p, p["BLOCK"])


def online_loop(lo, hi, rescale=RESCALE):
    return f"""    # Per-lane running max and sum: when a lane's max grows, its sum is rescaled by
    # exp(old - new). A finite floor keeps exp(-inf - -inf) out of masked lanes.
    m_vec = tl.full([BLOCK], -1e30, tl.float32)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range({lo}, {hi}, BLOCK):
        cols = start + offs
        x = tl.load(row_ptr + cols, mask=cols < {hi}, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        s_vec = {rescale} + tl.exp(x - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)"""


def online_softmax_src(p, task, rescale=RESCALE):
    return row_kernel("    # One pass over the row: every logit is read from DRAM exactly once.",
                      f"    offs = tl.arange(0, BLOCK)\n{online_loop('0', 'V', rescale)}", "m + tl.log(s)", task, p, p["BLOCK"])


def split_v_combine_src(p, task, ks="ks", rescale="s_k * tl.exp(m_k - m)"):
    split = p["SPLIT"]
    return f'''
@triton.jit
def cross_entropy_fwd_kernel(logits_ptr, part_ptr, V, stride, chunk, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # Program (row, k) reduces logits[row, k*chunk : (k+1)*chunk] online and leaves its
    # (max, sum) pair: T * SPLIT programs keep every SM busy even for a handful of rows.
    row = tl.program_id(0)
    k = tl.program_id(1)
    row_ptr = logits_ptr + row.to(tl.int64) * stride
    offs = tl.arange(0, BLOCK)
    lo = k * chunk
    hi = tl.minimum(lo + chunk, V)
{online_loop("lo", "hi")}
    tl.store(part_ptr + (row * SPLIT + k) * 2, m)
    tl.store(part_ptr + (row * SPLIT + k) * 2 + 1, s)


@triton.jit
def cross_entropy_combine_kernel(logits_ptr, labels_ptr, loss_ptr, V, stride, ignore_index, part_ptr,
                                 SPLIT: tl.constexpr):
    # Merge the SPLIT partials of a row: lse = M + log(sum_k s_k * exp(m_k - M)).
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride
    ks = tl.arange(0, SPLIT)
    m_k = tl.load(part_ptr + (row * SPLIT + {ks}) * 2)
    s_k = tl.load(part_ptr + (row * SPLIT + ks) * 2 + 1)
    m = tl.max(m_k, axis=0)
    lse = m + tl.log(tl.sum({rescale}, axis=0))
{finish("lse")}
''' + wrapper(task, 
        f"cross_entropy_fwd_kernel[(T, SPLIT)](logits, part, V, logits.stride(0), chunk, SPLIT=SPLIT, "
            f"BLOCK={p['BLOCK']}, num_warps={p['num_warps']})\n"
            "    cross_entropy_combine_kernel[(T,)](logits, labels, loss, V, logits.stride(0), ignore_index, part, "
            "SPLIT=SPLIT, num_warps=1)",
        extra=f"    SPLIT = {split}\n    chunk = triton.cdiv(V, SPLIT)\n"
                  "    part = torch.empty(T, SPLIT, 2, dtype=torch.float32, device=logits.device)  # (max, sum)\n")


class CrossEntropyFwdTriton(OpModule):
    op, impl, family = "cross_entropy_fwd", "triton", "training"
    title = "Cross-entropy loss forward"
    desc = (f"loss[t] = logsumexp(logits[t, :]) - logits[t, labels[t]] in fp32 for logits [T, V]; "
            f"rows with labels[t] == {IGNORE} get loss 0 (reduction='none').")
    dims = {"T": "tokens (rows)", "V": "vocabulary size"}
    shapes = ({"T": 16, "V": 128256}, {"T": 256, "V": 32000}, {"T": 2048, "V": 128256},
              {"T": 4096, "V": 32000}, {"T": 8192, "V": 128256}, {"T": 16384, "V": 32000})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("logits", "labels")
    check_shape = {"T": 512, "V": 128256}
    # the loss is fp32 math on bf16 logits, as the reference's: 1e-6 of the loss, not a bf16 ulp
    tolerance = "fp32"
    variants = (
        Rung("full_row", "one program per row loads all V logits at once (BLOCK = next_pow2(V))",
             (NUM_WARPS,), compute_eff=0.3, memory_eff=0.75, launch=launch_of("full"), render=full_row_src,
             consts=lambda p, task: {"BLOCK": _pow2(task["V"])}, bugs=LOAD_BUGS, bug_dtypes=LOAD_BUG_DTYPES),
        Rung("chunked_two_pass", "loop over V in BLOCK chunks: a max pass, then a sum-of-exp pass",
             (BLOCK, NUM_WARPS, unroll.LOOP_UNROLL, stream_stages.STREAM_STAGES), compute_eff=0.3, memory_eff=0.85,
             launch=staged(launch_of("two_pass")), render=stream_stages.render_of(unroll.render_of(chunked_two_pass_src)), consts=lambda p, task: {"BLOCK": p["BLOCK"]}, bugs=LOAD_BUGS,
             bug_dtypes=LOAD_BUG_DTYPES),
        Rung("online_softmax", "one pass over V with a running max and a rescaled running sum per lane",
             (BLOCK, NUM_WARPS, unroll.LOOP_UNROLL, stream_stages.STREAM_STAGES), compute_eff=0.2, memory_eff=0.9,
             launch=staged(launch_of("online"), ONLINE_IN_FLIGHT), render=stream_stages.render_of(unroll.render_of(online_softmax_src)), consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"missing_scale": {"rescale": "s_vec"}}),
        Rung("split_v_combine", "SPLIT programs per row each reduce a V slice online; a combine kernel merges",
             (Param("SPLIT", (2, 4, 8, 16), 4), Param("BLOCK", (1024, 2048, 4096), 2048),
              Param("num_warps", (4, 8), 4), unroll.LOOP_UNROLL), compute_eff=0.2, memory_eff=0.92,
             launch=unroll.launch_of(launch_of("split"), lambda p, t: t["V"] / (p["SPLIT"] * p["BLOCK"]), unroll.chunk_regs),
             render=unroll.render_of(split_v_combine_src), consts=lambda p, task: {"SPLIT": p["SPLIT"], "BLOCK": p["BLOCK"]},
             bugs={"bad_combine_index": {"ks": "(ks + 1) % SPLIT"}, "missing_scale": {"rescale": "s_k"}}),
    )

    def cost(self, task: Task) -> Cost:
        t, v = task["T"], task["V"]
        return Cost(flops=5 * t * v, bytes=t * v * DTYPE_BYTES[task.dtype] + 12 * t)

    torch_ref = TorchRef(
        body=f"return nn.functional.cross_entropy(logits.float(), labels, reduction='none', ignore_index={IGNORE})",
        inputs=(f"[torch.randn(T, V, dtype=DTYPE, device='cuda') * 2, torch.where(torch.arange(T, device='cuda') % 16 == 15, "
                f"{IGNORE}, torch.randint(0, V, (T,), device='cuda'))]"))

    def triton_kernels(self, variant, params: dict, task: Task) -> list:
        sig = {"logits_ptr": triton_ptr(task.dtype, task), "labels_ptr": "*i64", "loss_ptr": "*fp32",
               "V": "i32", "stride": "i32", "ignore_index": "i32"}
        consts = variant.consts(params, task)
        if "SPLIT" not in consts:
            return [KernelSpec("cross_entropy_fwd_kernel", {**sig, "BLOCK": "constexpr"}, consts,
                               num_warps=params["num_warps"], num_stages=1)]
        part = {"logits_ptr": triton_ptr(task.dtype, task), "part_ptr": "*fp32", "V": "i32", "stride": "i32",
                "chunk": "i32", "SPLIT": "constexpr", "BLOCK": "constexpr"}
        comb = {**sig, "part_ptr": "*fp32", "SPLIT": "constexpr"}
        return [KernelSpec("cross_entropy_fwd_kernel", part, consts, num_warps=params["num_warps"], num_stages=1),
                KernelSpec("cross_entropy_combine_kernel", comb, {"SPLIT": consts["SPLIT"]}, num_warps=1,
                           num_stages=1)]

    def assemble(self, body, variant, params, task) -> str:
        return TRITON_PRELUDE + body
