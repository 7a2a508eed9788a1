"""The first rung of flash_prefill_triton: scores materialised in global memory by three kernels (QK^T
tiles, a whole-row softmax, PV tiles), the baseline the fused rungs remove the S x S round trip from."""
from .flash_prefill_spec import ENTRY


def materialized_scores_src(p, task, scale=" * scale", causal=">="):
    return f'''
@triton.jit
def attn_scores_kernel(q_ptr, k_ptr, s_ptr, S, scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    # one [BLOCK_M, BLOCK_N] tile of S = QK^T * scale, future keys set to -inf, stored as fp32
    bh = tl.program_id(2).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    k = tl.load(k_ptr + bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
    s = tl.dot(q, tl.trans(k)){scale}
    s = tl.where(offs_m[:, None] {causal} offs_n[None, :], s, float("-inf"))
    tl.store(s_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :], s)


@triton.jit
def attn_softmax_kernel(s_ptr, p_ptr, S, BLOCK: tl.constexpr):
    # one program per score row: the whole row (next power of two >= S) in registers
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    s = tl.load(s_ptr + row * S + offs, mask=offs < S, other=float("-inf"))
    e = tl.exp(s - tl.max(s, 0))
    tl.store(p_ptr + row * S + offs, (e / tl.sum(e, 0)).to(p_ptr.dtype.element_ty), mask=offs < S)


@triton.jit
def flash_prefill_kernel(p_ptr, v_ptr, o_ptr, S, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    # O = P V for one [BLOCK_M, HEAD_DIM] tile; P is zero past the diagonal but still multiplied
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        p = tl.load(p_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :])
        v = tl.load(v_ptr + bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        acc += tl.dot(p, v)
    tl.store(o_ptr + bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(o_ptr.dtype.element_ty))


{ENTRY.py_def(task)}:
    B, H, S, D = q.shape
    BLOCK_M, BLOCK_N = {p["BLOCK_M"]}, {p["BLOCK_N"]}
    assert S % BLOCK_M == 0 and S % BLOCK_N == 0
    q, k, v = (t.reshape(B * H, S, D) for t in (q, k, v))
    o = torch.empty_like(q)
    chunk = max(1, (1 << 30) // (S * S * 6))      # heads per pass: fp32 scores + fp16 probs <= 1 GB
    scores = torch.empty(chunk, S, S, dtype=torch.float32, device=q.device)
    probs = torch.empty(chunk, S, S, dtype=q.dtype, device=q.device)
    for h0 in range(0, B * H, chunk):
        n = min(chunk, B * H - h0)
        attn_scores_kernel[(S // BLOCK_M, S // BLOCK_N, n)](q[h0:], k[h0:], scores, S, scale, HEAD_DIM=D,
                                                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps={p["num_warps"]})
        attn_softmax_kernel[(n * S,)](scores, probs, S, BLOCK=triton.next_power_of_2(S), num_warps=8)
        flash_prefill_kernel[(S // BLOCK_M, n)](probs, v[h0:], o[h0:], S, HEAD_DIM=D, BLOCK_M=BLOCK_M,
                                                BLOCK_N=BLOCK_N, num_warps={p["num_warps"]})
    return o.view(B, H, S, D)
'''
