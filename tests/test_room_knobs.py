"""Room to tune on the shortest-episode modules (issue 26 item 2): the ranges a real kernel of the
op tunes, each written into the candidate's code and modelled in its launch, with the rung's
default candidate unchanged (its render is golden; here: the values are in the code and move the
model the way the hardware does)."""
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.training import cross_entropy_fwd_triton as fwd
from kernelstrain.tasks import make_task


def _task(name, gpu="H100", dtype="bf16", shape=None):
    m = REGISTRY[name]
    return m, make_task(m, gpu, dtype, shape or m.shapes[0])


def test_cross_entropy_bwd_takes_the_forwards_block_and_warp_ranges():
    m, task = _task("cross_entropy_bwd_triton")
    for v in m.variants:
        assert v.param("BLOCK").values == fwd.BLOCK.values and v.param("num_warps").values == fwd.NUM_WARPS.values
        assert (v.param("BLOCK").default, v.param("num_warps").default) == (2048, 4)    # today's candidate
        p = {**v.defaults(), "BLOCK": 8192, "num_warps": 16}
        code = m.render(v, p, task)
        assert "BLOCK=8192" in code and "num_warps=16" in code
        assert all(k.num_warps == 16 for k in m.triton_kernels(v, p, task) if k.name != "cross_entropy_onehot_kernel")
        # an 8192-wide chunk over 16 warps holds a quarter of the registers a thread that 4 warps need
        wide4, wide16 = (m.launch(v, {**p, "num_warps": w}, task) for w in (4, 16))
        assert wide16.threads == 4 * wide4.threads and wide16.regs < wide4.regs


def test_dropout_takes_eight_chunks_a_thread_and_1024_thread_blocks():
    m, task = _task("dropout_cuda", shape={"T": 4096, "D": 8192})
    v = m.variant("unrolled_ilp")
    assert v.defaults() == {"threads": 256, "unroll": 2}                                   # today's candidate
    code = m.render(v, {"threads": 1024, "unroll": 8}, task)
    assert "#define THREADS 1024" in code and "#define UNROLL 8" in code
    for tag in ("unrolled_ilp", "persistent"):
        r = m.variant(tag)
        four, eight = (m.launch(r, {"threads": 256, "unroll": u}, task) for u in (4, 8))
        # twice the 16-byte loads in flight a thread, for the registers that hold them
        assert eight.bytes_per_access == 2 * four.bytes_per_access and eight.regs > four.regs


def test_swiglu_tiles_take_2_to_16_warps():
    for name in ("swiglu_fwd_triton", "swiglu_bwd_triton"):
        m, task = _task(name, shape={"T": 8192, "I": 14336})
        for v in m.variants:
            if v.param("num_warps").values != (2, 4, 8, 16):
                continue
            assert v.param("num_warps").default == 4                                      # today's candidate
            p = {**v.defaults(), "BLOCK": 512, "num_warps": 16}
            assert "num_warps=16" in m.render(v, p, task)
            assert all(k.num_warps == 16 for k in m.triton_kernels(v, p, task))
            # 512 columns over 16 warps: one 2-byte element a lane; over 4, 8-byte accesses
            assert m.launch(v, p, task).bytes_per_access < m.launch(v, {**p, "num_warps": 4}, task).bytes_per_access


def test_kv_append_takes_16_tokens_a_block():
    m, task = _task("kv_append_cuda", dtype="fp16", shape={"T": 4096, "H": 8, "D": 128, "P": 16})
    v = m.variant("warp_per_token_ilp")
    assert v.defaults() == {"warps": 4, "unroll": 4}                                     # today's candidate
    assert "#define WARPS 16" in m.render(v, {"warps": 16, "unroll": 4}, task)
    four, sixteen = (m.launch(v, {"warps": w, "unroll": 4}, task) for w in (4, 16))
    assert sixteen.threads == 4 * four.threads and sixteen.grid * 4 == four.grid


def test_moe_combine_takes_512_threads_and_8_tokens_a_block():
    m, task = _task("moe_combine_cuda", dtype="bf16", shape={"T": 16, "topk": 2, "K": 4096})
    v = m.variant("multi_token_ilp")
    assert v.defaults() == {"threads": 128, "tokens_per_block": 2}                         # today's candidate
    code = m.render(v, {"threads": 512, "tokens_per_block": 8}, task)
    assert "#define THREADS 512" in code and "#define TPB 8" in code
    # 16 tokens: 512 threads cover a 4096-wide row's 512 uint4 chunks in one pass; 8 tokens a block
    # leave two blocks for the whole GPU
    wide, default = m.launch(v, {"threads": 512, "tokens_per_block": 2}, task), m.launch(v, v.defaults(), task)
    assert wide.threads == 4 * default.threads and wide.lane_util == 1.0
    assert m.launch(v, {"threads": 128, "tokens_per_block": 8}, task).grid == 2
