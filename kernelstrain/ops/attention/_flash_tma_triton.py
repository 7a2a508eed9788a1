"""flash_prefill_triton's tensor-descriptor rung: Q/K/V tiles loaded (and O stored) through
tl.make_tensor_descriptor, one TMA copy a tile into swizzled shared memory on Hopper."""
from .flash_prefill_spec import ENTRY, LOG2E

TMA_ATTEND = '''
@triton.jit
def _attend(acc, l_i, m_i, q, k_desc, v_desc, kv0, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
            MASKED: tl.constexpr):
    # key blocks [lo, hi) of this head (rows kv0 + lo ... of the [B*H*S, D] K and V): each tile one descriptor load
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([kv0 + start_n, 0])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            s = tl.where(offs_m[:, None] {causal} offs_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        v = v_desc.load([kv0 + start_n, 0])
        acc = acc{rescale} + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    return acc, l_i, m_i
'''


def tma_descriptors_src(p, task, causal: str, rescale: str, m0: str, l0: str) -> str:
    return TMA_ATTEND.format(causal=causal, rescale=rescale) + f'''
@triton.jit
def flash_prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BH, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    # q, k, v, o as [B*H*S, D] row-major; a head's rows start at bh * S, and BLOCK_M / BLOCK_N divide S, so no tile
    # crosses a head
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[BH * S, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[BH * S, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[BH * S, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[BH * S, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
    kv0 = bh * S
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = q_desc.load([kv0 + start_m * BLOCK_M, 0])
    m_i = tl.full([BLOCK_M], {m0}, tl.float32)
    l_i = tl.full([BLOCK_M], {l0}, tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # keys left of the diagonal band need no mask; only the band does (it starts on a BLOCK_N boundary)
    band = start_m * BLOCK_M // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, kv0, offs_m, 0, band, qk_scale, BLOCK_N, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, kv0, offs_m, band, (start_m + 1) * BLOCK_M, qk_scale,
                            BLOCK_N, True)
    o_desc.store([kv0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty))


def _alloc(size: int, alignment: int, stream):
    # device-side descriptors need a small global scratch buffer per program
    return torch.empty(size, device="cuda", dtype=torch.int8)


{ENTRY.py_def(task)}:
    B, H, S, D = q.shape
    BLOCK_M, BLOCK_N = {p["BLOCK_M"]}, {p["BLOCK_N"]}
    assert S % BLOCK_M == 0 and S % BLOCK_N == 0, "tiles must divide the sequence"
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    triton.set_allocator(_alloc)
    flash_prefill_kernel[(S // BLOCK_M, B * H)](q, k, v, o, S, B * H, scale * {LOG2E!r}, HEAD_DIM=D, BLOCK_M=BLOCK_M,
                         BLOCK_N=BLOCK_N, num_warps={p["num_warps"]}, num_stages={p["num_stages"]})
    return o
'''
