"""gemm_fp4_triton's shared text pieces and its 16-bit-copies rungs' renders, outside the module file (kept under its
300 lines): the e2m1 decode, the program orders, the wrapper's head and launch line, and the copies' dequant kernel
with the GEMMs that run on its copies (dequant_then_dot / pipelined_copies' tl.dot loop, copies_persistent_tma's
persistent TMA loop, gemm_fp16_triton's own kernel)."""
from .gemm_fp16_triton import K_TILES, persistent_tma_kernel, persistent_tma_launch
from .gemm_fp4_spec import ENTRY

SCALE = "tl.exp2(s.to(tl.float32) - 127.0)"          # ue8m0: 2^(s - 127)

DEQUANT = """
@triton.jit
def dequant_e2m1(q, s, ROWS: tl.constexpr, KB: tl.constexpr):
    # q [ROWS, KB // 2] packed e2m1 (low nibble = even k), s [ROWS, KB // 32] ue8m0 -> fp32 [ROWS, KB]
    v = tl.join(q & 15, q >> 4).reshape(ROWS, KB)
    e = (v >> 1) & 3
    m = (v & 1).to(tl.float32)
    mag = tl.where(e == 0, 0.5 * m, tl.exp2((e - 1).to(tl.float32)) * (1.0 + 0.5 * m))
    val = tl.where((v & 8) != 0, -mag, mag)
    scale = {scale}
    return (val.reshape(ROWS, KB // 32, 32) * scale[:, :, None]).reshape(ROWS, KB)
"""

ORDER = """    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = N // BLOCK_N
    pid = tl.program_id(0)
    group = pid // (GROUP_M * num_pid_n)     # GROUP_M tile rows walk the N tiles together (L2 reuse)
    first_m = group * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_pid_n)) % size_m
    pid_n = (pid % (GROUP_M * num_pid_n)) // size_m"""
ROW_ORDER = """    num_pid_n = N // BLOCK_N
    pid_m = tl.program_id(0) // num_pid_n
    pid_n = tl.program_id(0) % num_pid_n"""

DEQUANT_KERNEL = """
@triton.jit
def dequant_kernel(q_ptr, s_ptr, w_ptr, K, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    # one [BLOCK_R, BLOCK_K] block of the 16-bit copy from its packed bytes and scales
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    kt = tl.program_id(1)
    q = tl.load(q_ptr + rr[:, None] * (K // 2) + kt * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :])
    s = tl.load(s_ptr + rr[:, None] * (K // 32) + kt * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)[None, :])
    w = dequant_e2m1(q, s, BLOCK_R, BLOCK_K)
    tl.store(w_ptr + rr[:, None] * K + kt * BLOCK_K + tl.arange(0, BLOCK_K)[None, :], w.to(w_ptr.dtype.element_ty))
"""

# the wrapper's lines that write the 16-bit copies a and b (A's rows padded to whole 16-row blocks)
COPIES = """    a = torch.empty((M, K), device=A.device, dtype=C.dtype)   # 16-bit copies: 4x the packed bytes
    b = torch.empty((N, K), device=A.device, dtype=C.dtype)
    Mp = triton.cdiv(M, 16) * 16
    if Mp != M:                              # the dequant kernel works on whole 16-row blocks
        A, scale_a = torch.nn.functional.pad(A, (0, 0, 0, Mp - M)), torch.nn.functional.pad(scale_a, (0, 0, 0, Mp - M))
        a = torch.empty((Mp, K), device=A.device, dtype=C.dtype)
    dequant_kernel[(Mp // 16, K // 128)](A, scale_a, a, K, BLOCK_R=16, BLOCK_K=128)
    dequant_kernel[(N // 16, K // 128)](B, scale_b, b, K, BLOCK_R=16, BLOCK_K=128)
"""


def launch_line(p, kernel="gemm_fp4_kernel", args="A, B, scale_a, scale_b, C, M, N, K") -> str:
    kw = ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("num_warps", "num_stages"))
    splits = f", {p['SPLIT_K']}" if "SPLIT_K" in p else ","
    return (f"    grid = (triton.cdiv(M, {p['BLOCK_M']}) * (N // {p['BLOCK_N']}){splits})\n"
            f"    {kernel}[grid]({args}, {kw}, num_warps={p.get('num_warps', 4)}, num_stages={p.get('num_stages', 1)})\n")


def head(task) -> str:
    return f"""

{ENTRY.py_def(task)}:
    M, K = A.shape[0], A.shape[1] * 2        # two e2m1 values a byte
    N = B.shape[0]                            # B is [N, K / 2]: C = A @ B.T
    C = torch.empty((M, N), device=A.device, dtype={'torch.bfloat16' if task.dtype == 'bf16' else 'torch.float16'})
"""


def dequant_then_dot_src(p, task, k_end="K // BLOCK_K", scale=SCALE):
    """The copies' GEMM: unpipelined in row order, or (num_stages given) pipelined in the GROUP_M order."""
    group, order = (", GROUP_M: tl.constexpr", ORDER) if "GROUP_M" in p else ("", ROW_ORDER)
    return DEQUANT.format(scale=scale) + DEQUANT_KERNEL + f"""

@triton.jit
def gemm_fp4_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{group}):
{order}
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, {k_end}):
        a = tl.load(a_ptr + rm[:, None] * K + kt * BLOCK_K + rk[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[None, :] * K + kt * BLOCK_K + rk[:, None])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=rm[:, None] < M)
""" + head(task) + COPIES + f"""{launch_line(p, args="a, b, C, M, N, K")}    return C
"""


def copies_persistent_src(p, task, k_tiles=K_TILES, scale=SCALE):
    """copies_persistent_tma: the dequant kernel's 16-bit copies, then gemm_fp16_triton's persistent TMA GEMM on them
    (NUM_PROGS resident programs striding over the tiles, tensor-descriptor loads, the C tile stored by TMA)."""
    return (DEQUANT.format(scale=scale) + DEQUANT_KERNEL + "\n" + persistent_tma_kernel(k_tiles=k_tiles) + head(task)
            + COPIES + persistent_tma_launch(p, task, "a, b, C") + "    return C\n")
