"""What a wrong result's text says is spoiled follows the bug's site (runtime_texts.off_by_one_site),
and each bug's draws come from an RNG of its own (adding a bug to the table moves no other text)."""
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
