"""The tl.dot kernel of gemm_fp16_triton's pointer rungs (tl_dot_blocked, grouped_swizzle, pipelined_stages):
row-major or GROUP_M-swizzled program order over [BLOCK_M, BLOCK_N] tiles, a masked K loop."""


def dot_kernel(grouped: bool, acc, k_tiles: str) -> str:
    init, step = acc
    if grouped:
        order = """    # GROUP_M swizzle: a group of GROUP_M tile rows walks the N tiles together, so the
    # programs resident at once share A panels and B panels in L2
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m"""
    else:
        order = """    # row-major program order: one wave of programs streams all of B per tile row
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n"""
    group_arg = ", GROUP_M: tl.constexpr" if grouped else ""
    return f"""
@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{group_arg}):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
{order}
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = {init}
    for kt in range(0, {k_tiles}):
        k_left = K - kt * BLOCK_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        {step}
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
"""
