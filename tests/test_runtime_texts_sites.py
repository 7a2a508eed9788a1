"""What a wrong result's text says is spoiled follows the bug's site (runtime_texts.off_by_one_site),
and each bug's draws come from an RNG of its own (adding a bug to the table moves no other text)."""
import math
import random
import re

from kernelstrain import messages, runtime_texts
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def _counts(text: str) -> tuple[int, int, list]:
    bad, numel = map(int, re.search(r"Mismatched elements: (\d+) / (\d+)", text).groups())
    return bad, numel, re.findall(r"at index (\([^)]*\))", text)


def test_gemm_k_tile_off_by_one_spoils_every_column():
    m = REGISTRY["gemm_fp16_cuda"]
    v = next(v for v in m.variants if v.tag == "mma_sync")
    task = make_task(m, "H100", "fp16", {"M": 4096, "N": 4096, "K": 4096})
    params = {**v.defaults(), "BK": 32}
    seen_last = 0
    for seed in range(20):
        text = messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, params)
        bad, numel, at = _counts(text)
        assert bad > numel / 2, text          # a K tile dropped: every element a little off
        seen_last += all(i.endswith(", 4095)") for i in at)
    assert seen_last < 5                      # not the last column each time


def test_flat_bound_spoils_the_final_element_alone():
    text = runtime_texts.mismatch_text("off_by_one", (64, 128), "bf16", 1.0, random.Random(3), ("final",))
    bad, _, at = _counts(text)
    assert bad == 1 and at == ["(63, 127)", "(63, 127)"]


def test_row_bound_spoils_the_last_row():
    text = runtime_texts.mismatch_text("off_by_one", (4, 64, 128), "bf16", 1.0, random.Random(3), ("row",))
    bad, numel, at = _counts(text)
    assert bad == numel // 64 and all(re.fullmatch(r"\(\d+, 63, \d+\)", i) for i in at)


class Counting(random.Random):
    def __init__(self, seed):
        super().__init__(seed)
        self.calls = 0

    def random(self):
        self.calls += 1
        return super().random()


def test_each_bug_draws_only_its_own_entry():
    for bug in ("off_by_one", "racy_update", "no_such_bug"):
        rng = Counting(1)
        runtime_texts._spoiled(bug, 128, rng)
        assert rng.calls <= 2, bug           # its own entry's draws, not the whole table's


def test_parent_rng_gives_one_draw_to_the_bug():
    """The spoiled share is drawn from an RNG keyed on the bug: the same parent stream gives a
    bug the same text whatever other bugs exist."""
    a = runtime_texts.mismatch_text("racy_update", (64, 64), "fp16", 1.0, random.Random(7))
    b = runtime_texts.mismatch_text("racy_update", (64, 64), "fp16", 1.0, random.Random(7))
    c = runtime_texts.mismatch_text("wrong_init", (64, 64), "fp16", 1.0, random.Random(7))
    assert a == b and a != c


def test_a_causal_mask_one_key_off_spoils_the_first_query_rows_not_the_last_column():
    """flash_prefill's causal comparison one off adds or drops a key of every query row: the rows
    with few keys (the start of each head's queries) go out of tolerance, every column of them."""
    m = REGISTRY["flash_prefill_triton"]
    v = next(v for v in m.variants if v.tag == "causal_block_skip")
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})
    assert runtime_texts.off_by_one_site(dict(v.edits)["off_by_one"], task.dims, v.defaults())[0] == "first_rows"
    columns = set()
    for seed in range(10):
        text = messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults())
        bad, numel, at = _counts(text)
        rows = [int(i.strip("()").split(", ")[2]) for i in at]
        columns |= {int(i.strip("()").split(", ")[3]) for i in at}
        assert bad < numel / 10 and all(r < 100 for r in rows), text
    assert columns != {127}


def test_a_decode_that_skips_its_last_kv_block_spoils_every_output_by_that_blocks_share():
    site = runtime_texts.off_by_one_site({"stop": "S - BLOCK_N"}, {"B": 8, "H": 16, "S": 1024, "D": 512},
                                         {"BLOCK_N": 128})
    assert site == ("keys", 0.125)
    bad, numel, _ = _counts(runtime_texts.mismatch_text("off_by_one", (8, 16, 512), "bf16", 1.0,
                                                        random.Random(0), site))
    assert bad > numel / 2


def test_a_grouped_gemm_expert_lookup_one_off_spoils_one_row_per_expert_boundary():
    m = REGISTRY["grouped_gemm_triton"]
    v = next(v for v in m.variants if dict(v.edits).get("off_by_one") == {"cmp": "<"})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    text = messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults())
    bad, numel, _ = _counts(text)
    rows, cols = m.entry.outputs(task)[0][1]
    assert bad == (task.dims["E"] - 1) * cols, text


def _variant(name: str, slot_value: dict):
    m = REGISTRY[name]
    return m, next(v for v in m.variants if dict(v.edits).get("off_by_one") == slot_value)


def test_an_embedding_gradients_segment_end_spoils_each_ids_whole_row():
    """The sorted segment's end one short drops every segment's last token: each distinct id's
    table row misses one grad row (every column), by one grad row's size."""
    m, v = _variant("embedding_bwd_cuda", {"end": "k1 - 1"})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    V, T, D = task.dims["V"], task.dims["T"], task.dims["D"]
    distinct = V * (1 - (1 - 1 / V) ** T)
    columns = set()
    for seed in range(10):
        bad, numel, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults()))
        assert abs(bad / D - distinct) < 0.05 * distinct and bad % D == 0
        columns |= {int(i.strip("()").split(", ")[1]) for i in at}
    assert len(columns) > 5                      # any column, not the last one


def test_an_embedding_gradients_flat_bound_spoils_one_element_and_its_chunk_bound_eight_columns():
    # atomic_per_element's flat loop one token short (labels, 2407f19): the last token's id's row misses its grad row,
    # every element but those within tolerance of 0 (the H100, labels k4: 3,970-4,022 of D 4096 under gpu-check's
    # class), both greatest differences in that row; its own id (T 512 V 32000: 98.6%): relative difference 1.0
    m, v = _variant("embedding_bwd_cuda", {"last": "(int64_t)(T - 1) * D"})
    task = make_task(m, "H100", "fp16", m.shapes[0])
    D = task.dims["D"]
    ones = 0
    for seed in range(4):
        text = messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults())
        bad, _, at = _counts(text)
        assert 0.97 * D < bad < D and len({i.split(",")[0] for i in at}) == 1, text
        ones += "Greatest relative difference: 1.0 at" in text
    assert ones >= 3
    m, v = _variant("embedding_bwd_cuda", {"last": "chunks - 1"})
    for seed in range(5):
        bad, _, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults()))
        assert bad < 600 * 8 and bad % 8 == 0 and all(int(i.strip("()").split(", ")[1]) >= D - 8 for i in at)


def test_a_rows_last_16_byte_word_one_short_spoils_the_last_word_of_every_row():
    m, v = _variant("swiglu_fwd_cuda", {"guard": "c[k] < chunks - 1"})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    (_, shape, _), = m.entry.outputs(task)[:1]
    seen = set()
    for seed in range(10):
        bad, numel, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults()))
        assert bad == numel // shape[-1] * 8
        cols = {int(i.strip("()").split(", ")[-1]) for i in at}
        assert all(c >= shape[-1] - 8 for c in cols)
        seen |= cols
    assert len(seen) > 1


def test_a_scatters_rank_counting_itself_moves_every_row():
    m, v = _variant("moe_scatter_cuda", {"cmp": "<="})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == numel


def test_a_conv_channel_bound_one_short_drops_one_channel_of_every_tap():
    m, v = _variant("conv2d_nhwc_cuda", {"stop": "C - 1"})
    task = make_task(m, "H100", "fp16", m.shapes[0])
    assert runtime_texts.off_by_one_site(dict(v.edits)["off_by_one"], task.dims, v.defaults(), m.op) \
        == ("reduction", 1 / task.dims["C"])
    bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad > numel / 2


def test_an_mla_decode_skipping_a_kv_block_spoils_every_output():
    m, v = _variant("mla_decode_triton", {"stop": "S - BLOCK_N"})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    assert runtime_texts.off_by_one_site(dict(v.edits)["off_by_one"], task.dims, v.defaults(), m.op)[0] == "keys"


def _rms_of(draw_row, k: int, n: int = 150, seed: int = 0) -> float:
    """RMS of n dot products of length k of (a, b) pairs drawn by draw_row(rng)."""
    rng = random.Random(seed)
    sq = 0.0
    for _ in range(n):
        s = 0.0
        for _ in range(k):
            a, b = draw_row(rng)
            s += a * b
        sq += s * s
    return (sq / n) ** 0.5


def test_output_scale_follows_the_harness_inputs():
    """messages._output_scale against the RMS of outputs drawn as each spec's inputs are (the
    weights divided by sqrt(K) where the spec divides them, the quantized operands' scales)."""
    K = 1024
    lut = [0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6]
    cases = {
        "gemm_fp16_cuda": (lambda r: (r.gauss(0, 1), r.gauss(0, 1) / K ** 0.5), {"M": 64, "N": 64, "K": K}),
        "gemm_fp8_cuda": (lambda r: (2 * r.gauss(0, 1) * 0.5, 2 * r.gauss(0, 1) / K ** 0.5), {"M": 64, "N": 64, "K": K}),
        "gemm_int4_cuda": (lambda r: (r.gauss(0, 1), (r.randrange(16) - 8) * (r.random() * 0.01 + 0.005)),
                           {"M": 16, "N": 64, "K": K}),
        "gemm_fp4_cuda": (lambda r: (lut[r.randrange(16)] * (r.random() * 0.25 + 0.0625),
                                     lut[r.randrange(16)] * (r.random() * 0.25 + 0.0625)), {"M": 64, "N": 64, "K": K, "G": 16}),
        "gemv_cuda": (lambda r: (r.gauss(0, 1), r.gauss(0, 1)), {"M": 1, "N": 64, "K": K}),
    }
    for name, (draw, dims) in cases.items():
        m = REGISTRY[name]
        task = make_task(m, "H100", _dtype(m), dims)
        want = _rms_of(draw, K)
        assert abs(messages._output_scale(m, task) / want - 1) < 0.2, (name, messages._output_scale(m, task), want)
    # int8: per-row scales rand/64 and rand/(64 sqrt K) multiply the int32 sum
    rng = random.Random(1)
    sq = 0.0
    for _ in range(150):
        s = sum(rng.randrange(-128, 128) * rng.randrange(-128, 128) for _ in range(K))
        sq += (s * rng.random() / 64 * rng.random() / (64 * K ** 0.5)) ** 2
    m = REGISTRY["gemm_int8_cuda"]
    got = messages._output_scale(m, make_task(m, "H100", _dtype(m), {"M": 64, "N": 64, "K": K}))
    assert abs(got / (sq / 150) ** 0.5 - 1) < 0.2


def _dtype(m) -> str:
    return getattr(m, "dtypes", ("fp16",))[0]


def test_a_norms_statistic_missing_its_last_chunk_scales_every_element():
    """rmsnorm's sum of squares over range(0, D - BLOCK, BLOCK) misses the last chunk: every
    output is 1/sqrt(1 - BLOCK/D) too large, an error proportional to the value."""
    m, v = _variant("rmsnorm_triton", {"stop": "D - BLOCK"})
    task = make_task(m, "H100", "bf16", {"T": 64, "D": 4096})
    params = {**v.defaults(), "BLOCK": 1024}
    site = runtime_texts.off_by_one_site(dict(v.edits)["off_by_one"], task.dims, params, m.op, v.tag)
    assert site[0] == "scale" and abs(site[1] - (1 / (1 - 0.25) ** 0.5 - 1)) < 1e-9
    bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, params))
    assert bad > numel / 2


def test_an_output_loop_missing_its_last_chunk_spoils_those_columns_and_a_row_loop_the_last_row():
    m, v = _variant("softmax_triton", {"stop": "C - BLOCK"})
    task = make_task(m, "H100", "fp32", {"R": 32, "C": 32000})
    params = {**v.defaults(), "BLOCK": 2048}
    bad, numel, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, params))
    # only the unwritten values past fp32's atol fail: a 4 * randn row's softmax has 120-630 of its
    # 32000 above 1e-4 (softmax_cuda.ABOVE_TOLERANCE_A_ROW), so 1280 columns hold ~5-25 a row
    assert 32 * 1280 * 120 / 32000 <= bad <= 32 * 1280 * 630 / 32000, bad
    assert all(int(i.strip("()").split(", ")[1]) >= 32000 - 1280 for i in at)
    m2, v2 = _variant("softmax_cuda", {"last": "chunks - 1"})
    for dtype, floor in (("fp32", 120), ("bf16", 2)):
        t2 = make_task(m2, "H100", dtype, {"R": 4096, "C": 32000})
        bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m2, t2, random.Random(0), v2, v2.defaults()))
        word = 4 if dtype == "fp32" else 8
        assert 4096 * word * floor / 32000 <= bad < 4096 * word * 700 / 32000, (dtype, bad)
    m, v = _variant("softmax_triton", {"stop": "R - 1"})
    bad, numel, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == 32000 and all(i.startswith("(31, ") for i in at)


def _warp_scan(v: list, test) -> list:
    """The render's warp_inclusive_scan (shfl_up by o, added where test(lane, o))."""
    v, o = list(v), 1
    while o < len(v):
        v = [v[i] + v[i - o] if i >= o and test(i, o) else v[i] for i in range(len(v))]
        o <<= 1
    return v


def test_a_warp_scan_skipping_the_lane_o_below_loses_the_share_the_site_says():
    """prefix_scan's block_exclusive_scan with `lane > o`, run in Python on random thread sums:
    the tile total it carries is short by the share off_by_one_site gives (every later prefix)."""
    m, v = _variant("prefix_scan_cuda", {"test": "lane > o"})
    rng = random.Random(0)
    for threads in (128, 256, 1024):
        warps, lost = threads // 32, []
        for _ in range(20):
            s = [sum(rng.random() for _ in range(4)) for _ in range(threads)]
            sums = [_warp_scan(s[w * 32:(w + 1) * 32], lambda i, o: i > o)[-1] for w in range(warps)]
            total = _warp_scan(sums + [0.0] * (32 - warps), lambda i, o: i > o)[warps - 1]
            lost.append(1 - total / sum(s))
        site = runtime_texts.off_by_one_site({"test": "lane > o"}, {"R": 1, "C": 4096}, {"threads": threads}, m.op)
        assert site[0] == "scale" and abs(site[1] - sum(lost) / len(lost)) < 0.02, (threads, site, sum(lost) / len(lost))
    task = make_task(m, "H100", "fp32", {"R": 1, "C": 128256})
    bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad > 0.9 * numel


def test_a_prefix_scans_output_scale_is_its_cumsums():
    """torch.cumsum of U(0, 1) rows: RMS 0.5 C / sqrt(3) (was 1)."""
    m = REGISTRY["prefix_scan_cuda"]
    C = 4096
    task = make_task(m, "H100", "fp32", {"R": 1, "C": C})
    rng, acc, sq = random.Random(0), 0.0, 0.0
    for _ in range(C):
        acc += rng.random()
        sq += acc * acc
    assert abs(messages._output_scale(m, task) / (sq / C) ** 0.5 - 1) < 0.05


def test_a_cache_copys_per_token_bound_spoils_each_tokens_last_element_or_word():
    """kv_append copies each token's H * D values to its slot: a bound one short leaves the last
    value (a 16-byte word on the uint4 rungs) of each of the T tokens; paged_kv_copy's cp.async
    staging one pass short leaves each thread's last word of every copied block."""
    m, v = _variant("kv_append_cuda", {"stop": "H * D - 1"})
    task = make_task(m, "H100", "fp16", m.shapes[0])
    T, D = task.dims["T"], task.dims["D"]
    bad, _, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == T and all(i.endswith(f", {D - 1})") for i in at)
    m, v = _variant("kv_append_cuda", {"guard": "c < chunks - 1"})
    bad, _, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == T * 8
    m, v = _variant("paged_kv_copy_cuda", {"stop": "n - 1"})
    task = make_task(m, "H100", "bf16", m.shapes[0])
    bad, _, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == task.dims["M"] * v.defaults()["threads"] * 8


def test_rope_heads_a_thread_leaves_unrotated_are_the_last_rows_the_site_says():
    """rope_cuda's register rungs: thread `group` rotates heads group + j * HEAD_THREADS (q's H,
    then k's) for j < HEADS_PER_THREAD - 1: the heads left are k's last ones (q's all where one j)."""
    m, v = _variant("rope_cuda", {"heads": "HEADS_PER_THREAD - 1"})
    for H in (16, 32, 64):
        for ht in (4, 8, 16, 32):
            per = -(-2 * H // ht)
            done = {g + j * ht for g in range(ht) for j in range(per - 1) if g + j * ht < 2 * H}
            left = sorted(set(range(2 * H)) - done)
            q_left, k_left = [x for x in left if x < H], [x - H for x in left if x >= H]
            first = q_left if q_left else k_left          # assert_close reports the first tensor that differs
            site = runtime_texts.off_by_one_site({"heads": "HEADS_PER_THREAD - 1"}, {"T": 4, "H": H, "D": 128},
                                                 {"head_threads": ht}, "rope")
            assert site == ("last_rows", len(first)) and first == list(range(H - len(first), H)), (H, ht, left)
    task = make_task(m, "H100", "fp16", {"T": 64, "H": 32, "D": 128})
    bad, _, at = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert bad == 64 * 16 * 128 and all(int(i.strip("()").split(", ")[1]) >= 16 for i in at)


def test_a_softmax_merge_skipping_its_last_warp_scales_the_values_past_the_tolerance():
    """online_softmax's merge over w < WARPS - 1 drops one warp's share of the sum: every output
    1/(W - 1) too large, out of tolerance where that exceeds atol + rtol y: the row's largest few."""
    m, v = _variant("softmax_cuda", {"last": "WARPS - 1"})
    task = make_task(m, "H100", "fp32", {"R": 32, "C": 32000})
    site = runtime_texts.off_by_one_site({"last": "WARPS - 1"}, task.dims, {"threads": 512}, m.op, v.tag, 32)
    assert site == ("scale", 1 / 15)
    rng, above = random.Random(0), 0
    for _ in range(4):                       # 4 * randn rows: values above 1e-4 / (1/15 - 1e-4)
        x = [4 * rng.gauss(0, 1) for _ in range(32000)]
        top = max(x)
        e = [math.exp(a - top) for a in x]
        s = sum(e)
        above += sum(1 for a in e if a / s * (1 / 15) > 1e-4 + 1e-4 * a / s)
    bad, numel, _ = _counts(messages.mismatch_text("off_by_one", m, task, random.Random(0), v, v.defaults()))
    assert 0.4 < bad / (above / 4 * 32) < 2.5, (bad, above / 4 * 32)


def test_a_softmaxs_proportional_error_is_largest_at_its_largest_value_never_past_one():
    m, v = _variant("softmax_cuda", {"last": "WARPS - 1"})
    task = make_task(m, "H100", "fp32", {"R": 32, "C": 32000})
    for seed in range(5):
        text = messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, v.defaults())
        diff = float(re.search(r"Greatest absolute difference: ([\d.e-]+)", text).group(1))
        assert 0.3 / 15 < diff <= 1.2 / 15, text     # ~1/15 of the largest y (0.8 in 32 rows of 4 * randn)


def _figures(text: str) -> tuple[float, float, float]:
    bad, numel, _ = _counts(text)
    big = float(re.search(r"Greatest absolute difference: ([\d.e+-]+)", text).group(1))
    rel = float(re.search(r"Greatest relative difference: ([\d.e+-]+|inf)", text).group(1))
    return bad / numel, big, rel


def test_rms_norm_without_its_weight_reads_as_torch_prints_it():
    """An RMS norm that leaves out its weight (1 + 0.1 randn a column) outputs the normalized value:
    every column off by |w - 1| of it. The text's figures are those torch.testing.assert_close prints
    for that candidate on CPU (2048 x 4096 fp16: 70.9% mismatched, 1.47 / 0.75 greatest); before,
    the generic table printed 28.56 and 5.41 for a 2048 x 2048 fp16 output (seed 8181, episode 30)."""
    torch = __import__("pytest").importorskip("torch")
    m = REGISTRY["rmsnorm_cuda"]
    v = next(v for v in m.variants if v.tag == "warp_shuffle")
    task = make_task(m, "H100", "fp16", {"T": 2048, "D": 4096})
    torch.manual_seed(0)
    x = torch.randn(2048, 4096, dtype=torch.float16).float()
    w = (1 + 0.1 * torch.randn(4096)).to(torch.float16).float()
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    try:
        torch.testing.assert_close(n.half(), (n * w).half(), atol=1e-2, rtol=1e-2)
    except AssertionError as e:
        share, big, rel = _figures(str(e))
    for seed in range(6):
        text = messages.mismatch_text("missing_scale", m, task, random.Random(seed), v, v.defaults())
        got = _figures(text)
        assert abs(got[0] - share) < 0.03 and big / 1.6 < got[1] < big * 1.6 and rel / 2.5 < got[2] < rel * 2.5, text


def test_sum_whose_partials_start_at_one_is_off_by_their_count():
    """reduction_cuda's warp_shuffle rung with `float v = 1.f`: each of the grid x THREADS threads adds
    one to the result, so the one output element is off by exactly that count (4,194,304 at N = 2^24,
    THREADS 1024, ITEMS 4), the clue an engineer reads the bug from. Before, the generic table printed
    3051.57 for that candidate (seed 8181, episode 41, step 4)."""
    m = REGISTRY["reduction_cuda"]
    v = next(v for v in m.variants if v.tag == "warp_shuffle")
    n = 1 << 24
    task = make_task(m, "H100", "fp32", {"N": n})
    for threads, items in ((1024, 4), (256, 8), (128, 1)):
        count = -(-n // (threads * items)) * threads
        params = {**v.defaults(), "threads": threads, "items": items}
        for seed in range(4):
            text = messages.mismatch_text("wrong_init", m, task, random.Random(seed), v, params)
            bad, numel, at = _counts(text)
            _, big, rel = _figures(text)
            assert (bad, numel, at) == (1, 1, ["(0,)", "(0,)"]) and abs(big - count) <= 1, text
            assert rel > count / (6 * 4096), text      # the reference, a sum of 2^24 normals, is within 6 sigma


def test_layernorm_without_its_weight_reads_as_torch_prints_it():
    """layernorm keeps its bias (0.1 randn a column) when it leaves out the weight: the reference
    n w + b crosses zero inside each column, so the greatest relative difference is huge (torch on
    CPU, 2048 x 4096 fp16: 70.8% mismatched, 1.48 greatest, relative inf at a reference rounded to 0),
    not the generic table's few units (15.4 / 3.82 before, on the MI300X's 2048 x 2048)."""
    torch = __import__("pytest").importorskip("torch")
    m = REGISTRY["layernorm_cuda"]
    v = next(v for v in m.variants if "missing_scale" in dict(v.edits))
    task = make_task(m, "H100", "fp16", {"T": 2048, "D": 4096})
    torch.manual_seed(0)
    x = torch.randn(2048, 4096, dtype=torch.float16).float()
    w = (1 + 0.1 * torch.randn(4096)).to(torch.float16).float()
    b = (0.1 * torch.randn(4096)).to(torch.float16).float()
    n = torch.nn.functional.layer_norm(x, (4096,), None, None, 1e-5)
    try:
        torch.testing.assert_close((n + b).half(), (n * w + b).half(), atol=1e-2, rtol=1e-2)
    except AssertionError as e:
        share, big, _ = _figures(str(e))
    for seed in range(6):
        text = messages.mismatch_text("missing_scale", m, task, random.Random(seed), v, v.defaults())
        got = _figures(text)
        assert abs(got[0] - share) < 0.03 and big / 1.6 < got[1] < big * 1.6 and got[2] > 1000, text


def _diffs(text: str) -> tuple[float, float]:
    return tuple(float(x) for x in re.findall(r"Greatest \w+ difference: ([\d.e+-]+|inf)", text))


def test_rms_norm_whose_partial_sums_of_squares_start_at_d_shrinks_every_row():
    """rmsnorm_cuda's wrong_init starts each of a row's THREADS partial sums of squares at D: the mean
    square ~1 reads ~1 + THREADS, every output shrinks to sqrt(1 / (1 + THREADS)) of itself. torch on
    the CPU (T=8192, D=5120, bf16, 1024 threads, weight 1 + 0.1 randn): 98.3% mismatched, greatest
    absolute 5.94, greatest relative 0.97265625 at index (0, 6). The generic table said 50.0%, 8.125
    and 655360.0: no shrunk value is further off than the value itself."""
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "A100", "bf16", {"T": 8192, "D": 5120})
    for tag in ("smem_block_reduce", "warp_shuffle", "register_cached"):
        v = m.variant(tag)
        for seed in range(3):
            text = messages.mismatch_text("wrong_init", m, task, random.Random(seed), v, {**v.defaults(), "threads": 1024})
            bad, numel, at = _counts(text)
            absolute, relative = _diffs(text)
            assert 0.975 < bad / numel < 0.99, text
            assert 5.0 < absolute < 7.5 and 0.96 < relative < 0.98, text
            assert at[1].startswith("(0, "), text          # the first of the elements sharing the greatest


def test_outputs_whose_accumulators_start_at_one_are_off_by_their_count():
    """gemv_cuda's lanes each start their partial at 1 and warp_sum adds the warp's: every y is off by
    the warp size (torch on the CPU, M=1 N=4096 K=14336 bf16, y + 32: 100.0%, greatest absolute 33.0,
    relative 448.0; the generic table said 47.6% and 1000.0); conv2d_nhwc's and moe_combine's one
    accumulator an output starts at 1: every output off by 1."""
    for name, gpu, dtype, shape, tag, offset in (
            ("gemv_cuda", "H100", "bf16", {"M": 1, "N": 4096, "K": 14336}, "warp_per_row", 32),
            ("gemv_cuda", "MI300X", "fp16", {"M": 1, "N": 4096, "K": 14336}, "multi_row_warp", 64),
            ("conv2d_nhwc_cuda", "H100", "fp16", None, "smem_tiled", 1),
            ("conv2d_nhwc_triton", "H100", "fp16", None, "implicit_gemm_dot", 1),
            ("moe_combine_cuda", "A100", "bf16", None, "gather_per_element", 1)):
        m = REGISTRY[name]
        task = make_task(m, gpu, dtype, shape or m.shapes[0])
        v = m.variant(tag)
        text = messages.mismatch_text("wrong_init", m, task, random.Random(7), v, v.defaults())
        bad, numel, _ = _counts(text)
        absolute, _ = _diffs(text)
        assert bad == numel and offset <= absolute <= offset * 1.07, (name, text)


def test_a_transpose_whose_store_loop_starts_a_stride_late_leaves_rows_unwritten():
    """transpose_cuda vectorized_multi_row's off_by_one starts the store loop at threadIdx.y + BLOCK_ROWS:
    the first BLOCK_ROWS of every TILE output rows keep the allocation's zeros. torch on the CPU (4096 x
    4096 fp16, TILE 64, BLOCK_ROWS 8, those rows zero): 12.5% mismatched, greatest absolute 4.85, relative
    1.0 at index (0, 0). The generic table said a last column (0.0%) or, read as other rows, relative inf."""
    m = REGISTRY["transpose_cuda"]
    v = m.variant("vectorized_multi_row")
    task = make_task(m, "H100", "fp16", {"R": 4096, "C": 4096})
    for seed in range(5):
        params = {**v.defaults(), "tile": (32, 64, 128)[seed % 3], "block_rows": (2, 4, 8, 16)[seed % 4]}
        text = messages.mismatch_text("off_by_one", m, task, random.Random(seed), v, params)
        bad, numel, at = _counts(text)
        share = params["block_rows"] / params["tile"]
        assert share * 0.98 < bad / numel <= share, text
        row = int(at[0].strip("()").split(",")[0])
        assert row % params["tile"] < params["block_rows"], text       # the greatest |ref| in an unwritten row
        assert text.endswith("Greatest relative difference: 1.0 at index (0, 0) (up to 0.01 allowed)"), text


def test_an_int4_gemm_without_its_group_scales_is_off_by_its_unscaled_sum():
    """gemm_int4_cuda's missing_scale dequantizes q - 8 without the group's scale s ~ U(0.005, 0.015): the
    output is ~95x the reference's size and of its own sign. torch on the CPU (M=512 N=K=4096 bf16):
    2096967 / 2097152 (100.0%), greatest absolute 1440.0, relative 44302336.0; the generic table printed
    kernelinfer-s8181-000009 step 19 as 99.9%, 34.5 and 2.234375."""
    m = REGISTRY["gemm_int4_cuda"]
    task = make_task(m, "A100", "bf16", {"M": 512, "N": 4096, "K": 4096})
    for tag in ("dequant_then_gemm", "fused_dequant_tiled", "mma_lop3_dequant", "cp_async_pipeline"):
        v = m.variant(tag)
        for seed in range(3):
            text = messages.mismatch_text("missing_scale", m, task, random.Random(seed), v, v.defaults())
            bad, numel, _ = _counts(text)
            absolute, relative = _diffs(text)
            assert bad / numel > 0.999 and 1000 < absolute < 2200 and relative > 1e5, text


def test_integer_outputs_are_compared_exactly_as_torch_words_it():
    """min_p / top_p / topk return int32 token ids: torch.testing.assert_close compares them exactly and says
    "Tensor-likes are not equal!" with integer differences and no tolerance (torch on the CPU: "Greatest
    absolute difference: 28667 at index (28,)"). kernelinfer-s8181-000033 step 3 printed "not close!",
    "27295.96875 ... (up to 0.01 allowed)": the float text of the task's fp32 logits."""
    for name, gpu in (("min_p_cuda", "RTXA6000"), ("top_p_cuda", "H100"), ("topk_cuda", "H100"), ("min_p_triton", "H100")):
        m = REGISTRY[name]
        task = make_task(m, gpu, m.dtypes[0], m.shapes[-1])
        v = next(v for v in m.variants if v.bugs)
        for seed in range(4):
            text = messages.mismatch_text(v.bugs[0], m, task, random.Random(seed), v, v.defaults())
            assert text.startswith("AssertionError: Tensor-likes are not equal!"), text
            assert "allowed" not in text, text
            absolute = re.search(r"Greatest absolute difference: (\S+) at", text).group(1)
            relative = float(re.search(r"Greatest relative difference: (\S+) at", text).group(1))
            assert absolute.isdigit() and relative >= int(absolute) / task.dims.get("V", 32000) * 0.99, text


def test_a_gelu_without_its_half_doubles_every_output():
    """bias_gelu_cuda's missing_scale drops gelu's 0.5: every output is exactly twice the reference's (a power
    of two: exact in floating point). torch on the CPU (T=1 N=18176 bf16, x and bias randn): 16917 / 18176
    (93.1%), greatest absolute 5.375, relative 1.0 at index (0, 0); (T=64 N=13824 fp16): 95.8%, 6.57, 1.0 at
    (0, 0). The generic table drew a share of 90-100% and a relative difference from a value near zero."""
    m = REGISTRY["bias_gelu_cuda"]
    for tag in ("grid_stride_half2", "fast_math_ptx"):
        v = m.variant(tag)
        for (T, N, dtype, share) in ((1, 18176, "bf16", 0.931), (64, 13824, "fp16", 0.958)):
            task = make_task(m, "H200", dtype, {"T": T, "N": N, "TANH": 0})
            for seed in range(3):
                text = messages.mismatch_text("missing_scale", m, task, random.Random(seed), v, v.defaults())
                bad, numel, at = _counts(text)
                absolute, relative = _diffs(text)
                assert abs(bad / numel - share) < 0.01 and 4.0 < absolute < 8.5 and relative == 1.0, text
                assert at[1] == "(0, 0)", text


def test_attention_without_its_softmax_scale_is_a_softmax_at_another_temperature():
    """An attention rung's missing_scale multiplies the scores by c: sqrt(D) where the scale is dropped (or
    1.0 passed for it), ln 2 where exp2 runs without log2 e. torch on the CPU (q, k, v randn, the module's
    reference): flash decode B=1 H=32 S=4096 D=128 bf16, scale dropped: 4026 / 4096 (98.3%), greatest
    absolute 3.89, relative 405504.0; cross attention B=1 H=4 Sq=448 Skv=1500 D=64 fp16 without log2 e:
    46.2%, 0.198, 13528.0; with 1.0 for the scale: 98.7%, 3.97, inf. The generic table drew 90-100% and
    differences of an output of RMS 1 (the reference's is sqrt(sum w^2), 0.026 here)."""
    m = REGISTRY["flash_decode_triton"]
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 4096, "D": 128})
    for seed in range(3):
        text = messages.mismatch_text("missing_scale", m, task, random.Random(seed), m.variant("blocked_two_pass"), None)
        bad, numel, _ = _counts(text)
        absolute, relative = _diffs(text)
        assert 0.96 < bad / numel < 0.995 and 1.5 < absolute < 6 and relative > 1000, text
    m = REGISTRY["cross_attention_triton"]
    task = make_task(m, "H100", "fp16", {"B": 1, "H": 4, "Sq": 448, "Skv": 1500, "D": 64})
    for tag, share in (("tail_peel_exp2", (0.40, 0.52)), ("pipelined_tiles", (0.40, 0.52)),
                       ("blocked_online_softmax", (0.97, 0.995))):
        text = messages.mismatch_text("missing_scale", m, task, random.Random(0), m.variant(tag), None)
        bad, numel, _ = _counts(text)
        assert share[0] < bad / numel < share[1], (tag, text)


def test_the_softmax_temperature_of_each_attention_rung_is_read_from_its_edit():
    """c for every attention rung whose missing_scale edits the scale: sqrt(D) (ln 2 sqrt(D) where the
    kernel's exp2 loses its folded log2 e too), ln 2 where only log2 e is lost."""
    root = math.sqrt(128)
    for name, tag, c in (("flash_decode_triton", "blocked_two_pass", root),
                         ("flash_decode_triton", "register_prefetch", math.log(2) * root),
                         ("paged_decode_cuda", "split_kv", root), ("swa_decode_triton", "gqa_dot", math.log(2) * root),
                         ("sliding_window_attn_triton", "pipelined_tiles", math.log(2)),
                         ("tree_attention_triton", "tree_tile_tl_dot", root),
                         ("chunked_prefill_cuda", "smem_online", math.log(2) * root)):
        m = REGISTRY[name]
        task = make_task(m, "H100", m.dtypes[0], {**m.shapes[0], "D": 128} if "D" in m.shapes[0] else m.shapes[0])
        got = messages._softmax_temperature(m, m.variant(tag), task)
        assert got is not None and abs(got[0] - c) < 1e-9 and abs(got[1] - 1) < 1e-9, (name, tag, got)


def test_an_moe_combine_without_its_router_weights_adds_the_rows_whole():
    """moe_combine's missing_scale adds each expert row without its weight w = softmax(randn(topk)): the
    output is sum x_j against sum w_j x_j. torch on the CPU (the module's inputs): T=16 topk=2 K=4096 bf16
    97.1%, greatest absolute 3.75; T=512 topk=8 K=7168 bf16 99.2%, 13.25; T=256 topk=6 K=2048 fp16 99.5%,
    11.23. The generic table drew an output of RMS sqrt(K) (a GEMM's): kernelinfer-s8383-000017 step 6."""
    m = REGISTRY["moe_combine_cuda"]
    for (T, topk, K, dtype), share, top in (((16, 2, 4096, "bf16"), (0.95, 0.985), (2.5, 5)),
                                            ((512, 8, 7168, "bf16"), (0.985, 0.995), (9, 18)),
                                            ((256, 6, 2048, "fp16"), (0.99, 0.998), (7, 15))):
        task = make_task(m, "H100", dtype, {"T": T, "topk": topk, "K": K})
        for tag in ("column_split_ilp", "atomic_scatter_add", "vectorized_uint4"):
            text = messages.mismatch_text("missing_scale", m, task, random.Random(2), m.variant(tag), None)
            bad, numel, _ = _counts(text)
            absolute, _ = _diffs(text)
            assert share[0] < bad / numel < share[1] and top[0] < absolute < top[1], (T, tag, text)


def test_a_softmax_whose_partial_sums_are_added_without_their_rescale_shrinks_every_row():
    """softmax_triton split_row_online / online_softmax keep each partial sum relative to its own max;
    missing_scale adds them without e^(m_k - m), so every output of a row shrinks by one factor, and on
    4 * randn rows only the few outputs above atol fail. torch on the CPU (32 x 32000, the partials
    computed as the kernel does): 8 splits fp16 340 / 1024000 (0.0%), greatest absolute 0.594, relative
    0.945; fp32 1.1%, 0.723, 0.953; 2048 lanes fp16 419 (0.0%), 0.701, 1.0. The generic table printed
    kernelstrain-s8383-000024 step 14 (fp32) as 90.9%."""
    m = REGISTRY["softmax_triton"]
    for dtype, tag, params, share in (("fp16", "split_row_online", {"SPLITS": 8}, (1e-4, 1e-3)),
                                      ("fp32", "split_row_online", {"SPLITS": 8}, (0.005, 0.02)),
                                      ("fp16", "online_softmax", {"BLOCK": 2048}, (1e-4, 1e-3))):
        task = make_task(m, "H100", dtype, {"R": 32, "C": 32000})
        text = messages.mismatch_text("missing_scale", m, task, random.Random(1), m.variant(tag), params)
        bad, numel, _ = _counts(text)
        absolute, relative = _diffs(text)
        assert share[0] < bad / numel < share[1] and 0.4 < absolute < 0.9 and 0.6 < relative <= 1.0, (tag, text)


def test_a_split_k_combine_one_split_short_drops_that_share_of_every_sum():
    """bad_combine_index on a split-K combine ('SPLITS - 1' for its end) drops the last split's K range:
    every output is short 1 / SPLITS of its sum. torch on the CPU (M=512 N=1024 K=4096 fp16, 4 splits,
    B / sqrt(K) as the reference's inputs): 98.9%, greatest absolute 2.44, relative inf. gemv's combine that
    reads other outputs' partials gives values of the reference's size and their own sign."""
    m = REGISTRY["gemm_fp16_cuda"]
    task = make_task(m, "H100", "fp16", {"M": 512, "N": 1024, "K": 4096})
    for seed in range(3):
        text = messages.mismatch_text("bad_combine_index", m, task, random.Random(seed), m.variant("wgmma_split_k"),
                                      {"SPLITS": 4})
        bad, numel, _ = _counts(text)
        absolute, _ = _diffs(text)
        assert 0.93 < bad / numel < 1.0 and 1.8 < absolute < 3.5, text
    assert messages._combine_site({"combine_end": "SPLIT_K - 1"}, {"SPLIT_K": 8}) == ("reduction", 1 / 8)
    assert messages._combine_site({"combine_end": "SPLITS - 1"}, {"SPLITS": 1}) is None
    gemv = REGISTRY["gemv_cuda"]
    task = make_task(gemv, "H100", "fp16", {"M": 1, "N": 4096, "K": 4096})
    text = messages.mismatch_text("bad_combine_index", gemv, task, random.Random(0), gemv.variant("split_k_combine"), None)
    bad, numel, _ = _counts(text)
    absolute, _ = _diffs(text)
    assert bad / numel > 0.95 and 3 * 64 < absolute < 7 * 64, text        # sqrt(2) x sqrt(K) = 90 an element


def test_an_fp4_gemm_without_its_block_scales_is_off_by_its_unscaled_sum():
    """gemm_fp4's missing_scale dequantizes both operands without their block scales (a shared dequant, or
    sa and sb set to 1): the candidate is sum a_k b_k against sum a_k b_k s_a s_b, ~24x the reference's size
    with nvfp4's U(1/16, 5/16) scales. torch on the CPU (M1024 N2048 K4096 G16 fp16, the reference's inputs):
    2096846 / 2097152 (100.0%), greatest absolute 2710.0, relative inf; reference RMS 22.12."""
    m = REGISTRY["gemm_fp4_cuda"]
    task = make_task(m, "RTX5090", "fp16", {"M": 1024, "N": 2048, "K": 4096, "G": 16})
    for tag in ("dequant_then_gemm", "fused_dequant_smem", "mma_reg_dequant"):
        text = messages.mismatch_text("missing_scale", m, task, random.Random(0), m.variant(tag), None)
        bad, numel, _ = _counts(text)
        absolute, _ = _diffs(text)
        assert bad / numel > 0.999 and 2000 < absolute < 4000, (tag, text)


def test_a_split_kv_decode_that_merges_other_heads_partials_is_off_by_an_attention_output():
    """A split-KV decode merge indexed by head + split, not head * splits + split, merges other heads'
    partial outputs: values of an attention output's size (sqrt(sum w^2), 0.026 at 4096 keys) and their
    own sign. torch on the CPU (flash decode B1 H32 S4096 D128 bf16, 8 splits, the kernel's merge with the
    wrong rows): 2328 / 4096 (56.8%), greatest absolute 0.134, relative 7168.0. The generic table drew
    20-95% of an output of RMS 1."""
    m = REGISTRY["flash_decode_triton"]
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 4096, "D": 128})
    for seed in range(3):
        text = messages.mismatch_text("bad_combine_index", m, task, random.Random(seed), m.variant("split_kv"),
                                      {"NUM_SPLITS": 8})
        bad, numel, _ = _counts(text)
        absolute, _ = _diffs(text)
        assert 0.5 < bad / numel < 0.64 and 0.08 < absolute < 0.2, text
    for name, tag in (("paged_decode_cuda", "gqa_cp_async"), ("swa_decode_triton", "split_kv"), ("swa_decode_cuda", "split_kv")):
        mod = REGISTRY[name]
        t = make_task(mod, "H100", mod.dtypes[0], mod.shapes[0])
        _, _, _ = _counts(messages.mismatch_text("bad_combine_index", mod, t, random.Random(0), mod.variant(tag), None))
        absolute, _ = _diffs(messages.mismatch_text("bad_combine_index", mod, t, random.Random(0), mod.variant(tag), None))
        assert absolute < 0.5, (name, absolute)


def test_the_greatest_relative_difference_of_many_token_ids_is_at_the_smallest_id():
    """torch on the CPU, 256 token ids uniform over V = 128256 against 256 others: greatest absolute 115255,
    greatest relative 164.59 (the smallest expected id, ~V / 256, off by ~V / 2). kernelstrain-s8383-000137
    step 5 (top_p_cuda, 254 of 256 ids wrong) printed a relative difference of 2.04: one pair's ratio."""
    for seed in range(6):
        text = runtime_texts.mismatch_text("missing_scale", (256,), "int32", 128256 / 2, random.Random(seed))
        absolute = int(re.search(r"Greatest absolute difference: (\d+) at", text).group(1))
        relative = float(re.search(r"Greatest relative difference: (\S+) at", text).group(1))
        assert 90000 < absolute < 128256 and relative > 20, text
