"""mla_decode_triton's tiled kernels' text pieces: one latent tile's attention step (online softmax; c_kv is K and V)
and the query rows a program loads, whole or (latent_halves) as this program's half of the 512 latent columns and the
other half (only mla_decode_triton uses this file)."""

ATTEND = '''

@triton.jit
def _attend(acc, m_i, l_i, q_nope, q_pe, kv_base, rows, S, offs_c, offs_r,
            KV_LORA: tl.constexpr, ROPE: tl.constexpr, MASKED: tl.constexpr):
    # One BLOCK_N slice of the latent cache: c_kv is K for the scores and V for the output.
    ptrs = kv_base + rows[:, None] * (KV_LORA + ROPE)
    if MASKED:
        kv = tl.load(ptrs + offs_c[None, :], mask=(rows < S)[:, None], other=0.0)
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :], mask=(rows < S)[:, None], other=0.0)
    else:
        kv = tl.load(ptrs + offs_c[None, :])
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :])
    s = tl.dot(q_nope, tl.trans(kv)) + tl.dot(q_pe, tl.trans(k_pe))
    if MASKED:
        s = tl.where((rows < S)[None, :], s, float("-inf"))
    # online softmax: rescale what was accumulated under the old running max
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.EXP(m_i - m_new)
    p = tl.EXP(s - m_new[:, None])
    l_i = (l_i * alpha + tl.sum(p, 1)).to(l_i.dtype)
    acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)
    return acc, m_new, l_i
'''


ATTEND_HALF = '''

@triton.jit
def _attend(acc, m_i, l_i, q_mine, q_other, q_pe, kv_base, rows, S, offs_mine, offs_other, offs_r,
            KV_LORA: tl.constexpr, ROPE: tl.constexpr, MASKED: tl.constexpr):
    # One BLOCK_N slice of the latent cache. The scores take all 576 columns (this program's half of c_kv,
    # the other half and k_pe); the output only this program's half, which is also its V.
    ptrs = kv_base + rows[:, None] * (KV_LORA + ROPE)
    if MASKED:
        mine = tl.load(ptrs + offs_mine[None, :], mask=(rows < S)[:, None], other=0.0)
        other = tl.load(ptrs + offs_other[None, :], mask=(rows < S)[:, None], other=0.0)
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :], mask=(rows < S)[:, None], other=0.0)
    else:
        mine = tl.load(ptrs + offs_mine[None, :])
        other = tl.load(ptrs + offs_other[None, :])
        k_pe = tl.load(ptrs + KV_LORA + offs_r[None, :])
    s = tl.dot(q_mine, tl.trans(mine)) + tl.dot(q_other, tl.trans(other)) + tl.dot(q_pe, tl.trans(k_pe))
    if MASKED:
        s = tl.where((rows < S)[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = (l_i * alpha + tl.sum(p, 1)).to(l_i.dtype)
    acc = acc * alpha[:, None] + tl.dot(p.to(mine.dtype), mine)
    return acc, m_new, l_i
'''
# latent_halves: the head block's 512 output columns over two programs, FlashMLA's split of the latent over its two
# consumer warpgroups (its q in shared memory, each warpgroup a [64, 256] fp32 accumulator); in Triton each half is
# a program of its own that scores the whole row again
HALF_QUERY = '''    half = tl.program_id(1) % 2
    offs_h = tl.program_id(1) // 2 * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = offs_h < H
    offs_mine = half * (KV_LORA // 2) + tl.arange(0, KV_LORA // 2)
    offs_other = (1 - half) * (KV_LORA // 2) + tl.arange(0, KV_LORA // 2)
    offs_r = tl.arange(0, ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = q_ptr + (b * H + offs_h).to(tl.int64)[:, None] * (KV_LORA + ROPE)
    # the softmax scale is folded into the query once (fp32 multiply, back to the MMA type)
    q_mine = (tl.load(q_rows + offs_mine[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)
    q_other = (tl.load(q_rows + offs_other[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)
    q_pe = (tl.load(q_rows + KV_LORA + offs_r[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)'''
WHOLE_QUERY = '''    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = offs_h < H
    offs_c = tl.arange(0, KV_LORA)
    offs_r = tl.arange(0, ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = q_ptr + (b * H + offs_h).to(tl.int64)[:, None] * (KV_LORA + ROPE)
    # the softmax scale is folded into the query once (fp32 multiply, back to the MMA type)
    q_nope = (tl.load(q_rows + offs_c[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)
    q_pe = (tl.load(q_rows + KV_LORA + offs_r[None, :], mask=mask_h[:, None], other=0.0) * qk_scale).to(q_ptr.dtype.element_ty)'''
