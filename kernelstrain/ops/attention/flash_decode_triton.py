"""Decode attention in Triton: one query token per (batch, head) over a contiguous KV cache.

Ladder: one key per loop iteration -> [BLOCK_N, D] key tiles with a two-pass softmax ->
single-pass online softmax -> next tile prefetched into registers -> split-KV
(flash-decoding) with a separate combine kernel.
"""
from ..base import (Cost, KernelSpec, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, TRITON_PRELUDE,
                    cdiv, kernelbench_program, triton_ptr)

WARPS = Param("num_warps", (2, 4, 8), 4)
BLOCK_N = Param("BLOCK_N", (16, 32, 64, 128), 64)
LOG2E = 1.4426950408889634


class FlashDecodeTriton(OpModule):
    op, impl, family = "flash_decode", "triton", "attention"
    title = "Decode attention (contiguous KV)"
    desc = ("o[b, h, :] = softmax(q[b, h, :] . k[b, h, :, :]^T * D^-0.5) @ v[b, h, :, :]: one new token per "
            "sequence attends to all S cached tokens; q, o are [B, H, D], k, v are [B, H, S, D].")
    dims = {"B": "batch (sequences)", "H": "attention heads", "S": "cached tokens (context length)",
            "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "S": 4096, "D": 128}, {"B": 32, "H": 32, "S": 4096, "D": 128},
              {"B": 16, "H": 16, "S": 1024, "D": 64}, {"B": 4, "H": 64, "S": 16384, "D": 128},
              {"B": 64, "H": 32, "S": 8192, "D": 128}, {"B": 8, "H": 32, "S": 2048, "D": 128})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("key_per_iteration", "one program per (b, h); the loop loads one key and one value row at a time",
                (Param("num_warps", (1, 2, 4), 1),), memory_eff=0.35, bugs=("missing_scale", "half_accumulator")),
        Variant("blocked_two_pass", "[BLOCK_N, D] tiles; pass 1 finds max and sum, pass 2 re-reads K with V",
                (BLOCK_N, WARPS), memory_eff=0.85, bugs=("missing_scale",)),
        Variant("online_softmax", "single pass: running max/sum, accumulator rescaled per tile",
                (BLOCK_N, WARPS), memory_eff=0.88, bugs=("missing_scale",)),
        Variant("register_prefetch", "next K/V tile loaded into registers while this one is reduced; exp2",
                (BLOCK_N, WARPS), memory_eff=0.9, bugs=("missing_scale",)),
        Variant("split_kv", "flash-decoding: S split across programs, partials merged by a combine kernel",
                (Param("NUM_SPLITS", (2, 4, 8, 16, 32), 8), Param("BLOCK_N", (32, 64, 128), 64), WARPS),
                memory_eff=0.93, bugs=("bad_combine_index", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        b, h, s, d = task["B"], task["H"], task["S"], task["D"]
        return Cost(flops=4 * b * h * s * d, bytes=(2 * b * h * s * d + 2 * b * h * d) * DTYPE_BYTES[task.dtype])

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, s, d, elt = task["B"], task["H"], task["S"], task["D"], DTYPE_BYTES[task.dtype]
        threads = params["num_warps"] * task.gpu.warp
        if variant.tag == "key_per_iteration":
            # a D-row spread over the program: a few bytes per lane; the compiler hoists the next trip's
            # K row over this trip's reduction, so about two rows per lane are in flight (H200: 2.26 ms at B=32)
            return Launch(grid=b * h, threads=threads, regs=32, bytes_per_access=max(4, 2 * d * elt // threads),
                          lane_util=min(1.0, d / threads))
        block_n = params["BLOCK_N"]
        # a K tile load keeps several 16-byte loads per thread in flight (capped by registers), but
        # the next tile waits on this one's reduction: about half of it is in flight on average
        tile = min(64, max(4, block_n * d * elt // threads)) // 2
        regs = min(255, 24 + 2 * block_n * d // threads)
        if variant.tag == "blocked_two_pass":
            return Launch(grid=b * h, threads=threads, regs=regs, bytes_per_access=tile, traffic=1.5)
        if variant.tag == "online_softmax":
            return Launch(grid=b * h, threads=threads, regs=regs, bytes_per_access=tile)
        if variant.tag == "register_prefetch":
            return Launch(grid=b * h, threads=threads, regs=min(255, 2 * regs), bytes_per_access=2 * tile)
        splits = params["NUM_SPLITS"]
        used = min(splits, cdiv(s, block_n))          # splits past the last tile hold no keys
        partials = b * h * splits * (d + 2) * 4 * 2   # fp32 partial o, m, l: written once, read once
        return Launch(grid=b * h * used, threads=threads, regs=regs, bytes_per_access=tile,
                      traffic=1 + partials / self.cost(task).bytes, launches=2)

    def signature(self, task: Task) -> str:
        return "def flash_decode(q, k, v, scale) -> o    # q [B, H, D], k/v [B, H, S, D] contiguous"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, k, v",
            body="s = torch.einsum('bhd,bhsd->bhs', q.float(), k.float()) * D ** -0.5\n"
                 "        return torch.einsum('bhs,bhsd->bhd', s.softmax(-1), v.float()).to(q.dtype)",
            inputs="[torch.randn(B, H, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, H, S, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, H, S, D, dtype=DTYPE, device='cuda')]")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "S": "i32", "scale": "fp32",
               "HEAD_DIM": "constexpr"}
        consts = {"HEAD_DIM": task["D"]}
        if variant.tag == "key_per_iteration":
            return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1)]
        consts["BLOCK_N"] = params["BLOCK_N"]
        sig["BLOCK_N"] = "constexpr"
        if variant.tag != "split_kv":
            return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1)]
        sig = {**sig, "o_ptr": "*fp32", "ml_ptr": "*fp32", "split_len": "i32", "NUM_SPLITS": "constexpr"}
        consts["NUM_SPLITS"] = params["NUM_SPLITS"]
        comb = {"part_ptr": "*fp32", "ml_ptr": "*fp32", "o_ptr": ptr, "HEAD_DIM": "constexpr",
                "NUM_SPLITS": "constexpr"}
        return [KernelSpec("flash_decode_kernel", sig, consts, params["num_warps"], 1),
                KernelSpec("flash_decode_combine_kernel", comb,
                           {"HEAD_DIM": task["D"], "NUM_SPLITS": params["NUM_SPLITS"]}, 4, 1)]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        return TRITON_PRELUDE + getattr(self, "_" + variant.tag)(params, task, bug)

    _HEAD = '''
@triton.jit
def flash_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, scale, HEAD_DIM: tl.constexpr{extra}):
    bh = tl.program_id(0).to(tl.int64)          # int64: B*H*S*D can pass 2**31
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + bh * HEAD_DIM + offs_d).to(tl.float32)
    k_base = k_ptr + bh * S * HEAD_DIM
    v_base = v_ptr + bh * S * HEAD_DIM
    m_i = -float("inf")
    l_i = {l0}
    acc = tl.zeros([HEAD_DIM], dtype={acc_t})
'''

    @staticmethod
    def _wrapper(grid: str, extra: str, params: dict) -> str:
        return f'''

def flash_decode(q, k, v, scale):
    B, H, S, D = k.shape
    o = torch.empty_like(q)
    flash_decode_kernel[({grid},)](q, k, v, o, S, scale, HEAD_DIM=D{extra}, num_warps={params["num_warps"]})
    return o
'''

    def _key_per_iteration(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * scale"
        half = bug == "half_accumulator"        # running sums kept in the storage type: small p vanish into l
        acc_t = "o_ptr.dtype.element_ty" if half else "tl.float32"
        rnd = ".to(o_ptr.dtype.element_ty)" if half else ""
        head = self._HEAD.format(extra="", l0=f"tl.zeros([1], dtype={acc_t})" if half else "0.0", acc_t=acc_t)
        return head + f'''    # one key per trip: every load is a single D-row and every score a cross-lane reduction
    for n in range(0, S):
        k = tl.load(k_base + n * HEAD_DIM + offs_d).to(tl.float32)
        s = tl.sum(k * q, 0){scale}
        m_new = tl.maximum(m_i, s)
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_base + n * HEAD_DIM + offs_d).to(tl.float32)
        acc = (acc * alpha + p * v){rnd}
        l_i = (l_i * alpha + p){rnd}
        m_i = m_new
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
''' + self._wrapper("B * H", "", p)

    _TILE = '''        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < {hi}
        k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        s = tl.where(mask_n, tl.sum(k.to(tl.float32) * q[None, :], 1){scale}, float("-inf"))
'''
    _V = ("        v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], "
          "other=0.0)\n")
    _STORE = "    tl.store(o_ptr + bh * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))\n"

    def _blocked_two_pass(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * scale"
        return self._HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + \
            "    # pass 1: row max and normaliser (the sum is rescaled whenever the max grows)\n" \
            "    for start in range(0, S, BLOCK_N):\n" + self._TILE.format(hi="S", scale=" * scale") + '''\
        m_new = tl.maximum(m_i, tl.max(s, 0))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new), 0)
        m_i = m_new
    # pass 2: K is read a second time to rebuild the probabilities, then weights V
    for start in range(0, S, BLOCK_N):
''' + self._TILE.format(hi="S", scale=scale) + "        p = tl.exp(s - m_i)\n" + self._V + \
            "        acc += tl.sum(p[:, None] * v.to(tl.float32), 0)\n" + self._STORE + \
            self._wrapper("B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

    _ONLINE = '''        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = {exp}(m_i - m_new)
        p = {exp}(s - m_new)
{v}        acc = acc{rescale} + tl.sum(p[:, None] * v.to(tl.float32), 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_new
'''

    def _online_softmax(self, p, task, bug):
        rescale = "" if bug == "missing_scale" else " * alpha"
        return self._HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + \
            "    # one pass over K and V: rescale the running sums whenever the max grows\n" \
            "    for start in range(0, S, BLOCK_N):\n" + self._TILE.format(hi="S", scale=" * scale") + \
            self._ONLINE.format(exp="tl.exp", v=self._V, rescale=rescale) + self._STORE + \
            self._wrapper("B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

    def _register_prefetch(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * qk_scale"
        return self._HEAD.format(extra=", BLOCK_N: tl.constexpr", l0="0.0", acc_t="tl.float32") + f'''\
    qk_scale = scale * {LOG2E}               # fold log2(e): exp2 is one MUFU op
    offs_n = tl.arange(0, BLOCK_N)
    mask_n = offs_n < S
    k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_n[:, None], other=0.0)
    for start in range(0, S, BLOCK_N):
        # issue the next tile's loads before reducing this one: two tiles in flight per program
        offs_next = start + BLOCK_N + tl.arange(0, BLOCK_N)
        mask_next = offs_next < S
        k_next = tl.load(k_base + offs_next[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_next[:, None], other=0.0)
        v_next = tl.load(v_base + offs_next[:, None] * HEAD_DIM + offs_d[None, :], mask=mask_next[:, None], other=0.0)
        s = tl.where(mask_n, tl.sum(k.to(tl.float32) * q[None, :], 1){scale}, float("-inf"))
''' + self._ONLINE.format(exp="tl.exp2", v="", rescale=" * alpha") + '''\
        k, v, mask_n = k_next, v_next, mask_next
''' + self._STORE + self._wrapper("B * H", ", BLOCK_N=" + str(p["BLOCK_N"]), p)

    def _split_kv(self, p, task, bug):
        combine = "(bh + offs_s)" if bug == "bad_combine_index" else "(bh * NUM_SPLITS + offs_s)"
        head = self._HEAD.format(extra=", BLOCK_N: tl.constexpr,\n                        ml_ptr, split_len, "
                                       "NUM_SPLITS: tl.constexpr", l0="0.0", acc_t="tl.float32")
        return head + f'''\
    # this program owns keys [lo, hi) of its head; o_ptr is the fp32 partial buffer
    split = tl.program_id(1)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, S)
    qk_scale = {"" if bug == "missing_scale" else "scale * "}{LOG2E}
    for start in range(lo, hi, BLOCK_N):
''' + self._TILE.format(hi="hi", scale=" * qk_scale") + \
            self._ONLINE.format(exp="tl.exp2", v=self._V, rescale=" * alpha") + f'''\
    part = bh * NUM_SPLITS + split
    tl.store(o_ptr + part * HEAD_DIM + offs_d, acc)    # unnormalised; the combine rescales
    tl.store(ml_ptr + part * 2, m_i)
    tl.store(ml_ptr + part * 2 + 1, l_i)


@triton.jit
def flash_decode_combine_kernel(part_ptr, ml_ptr, o_ptr, HEAD_DIM: tl.constexpr, NUM_SPLITS: tl.constexpr):
    # merge the splits of one head: weights 2^(m_s - m_max), empty splits (m = -inf) weigh 0
    bh = tl.program_id(0).to(tl.int64)
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.load(ml_ptr + (bh * NUM_SPLITS + offs_s) * 2)
    l = tl.load(ml_ptr + (bh * NUM_SPLITS + offs_s) * 2 + 1)
    w = tl.exp2(m - tl.max(m, 0))
    acc = tl.load(part_ptr + {combine}[:, None] * HEAD_DIM + offs_d[None, :])
    o = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + bh * HEAD_DIM + offs_d, o.to(o_ptr.dtype.element_ty))


def flash_decode(q, k, v, scale):
    B, H, S, D = k.shape
    NUM_SPLITS, BLOCK_N = {p["NUM_SPLITS"]}, {p["BLOCK_N"]}
    split_len = triton.cdiv(triton.cdiv(S, NUM_SPLITS), BLOCK_N) * BLOCK_N   # whole tiles per split
    part = torch.empty(B * H * NUM_SPLITS, D, dtype=torch.float32, device=q.device)
    ml = torch.empty(B * H * NUM_SPLITS, 2, dtype=torch.float32, device=q.device)
    flash_decode_kernel[(B * H, NUM_SPLITS)](q, k, v, part, S, scale, HEAD_DIM=D, BLOCK_N=BLOCK_N, ml_ptr=ml,
                                             split_len=split_len, NUM_SPLITS=NUM_SPLITS, num_warps={p["num_warps"]})
    o = torch.empty_like(q)
    flash_decode_combine_kernel[(B * H,)](part, ml, o, HEAD_DIM=D, NUM_SPLITS=NUM_SPLITS, num_warps=4)
    return o
'''
