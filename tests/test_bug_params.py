"""A bug is injected only where the parameters make it wrong (the H200 ran gemv_cuda
split_k_combine with bad_combine_index at splits=1 and it matched the reference)."""
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.tasks import make_task


def test_rung_offers_the_combine_bug_only_with_two_splits_or_more():
    m = REGISTRY["gemv_cuda"]
    v = next(v for v in m.variants if v.tag == "split_k_combine")
    assert "bad_combine_index" in v.bugs_for("fp16")
    assert "bad_combine_index" not in v.bugs_for("fp16", {**v.defaults(), "splits": 1})
    assert "bad_combine_index" in v.bugs_for("fp16", {**v.defaults(), "splits": 2})


def test_wrong_proposals_from_one_split_never_carry_the_combine_bug():
    """The engine draws a wrong-result proposal's bug from Episode.bugs(variant, params): at one
    split the combine bug is not among them, at two it is (until made once)."""
    m = REGISTRY["gemv_cuda"]
    v = next(v for v in m.variants if v.tag == "split_k_combine")
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    ep = Episode(m, task, {k: seeded_rng("bug_params", 0, k) for k in STREAMS}, 40, 0.1, 0.4, 8)
    assert "bad_combine_index" not in ep.bugs(v, {**v.defaults(), "splits": 1})
    assert "bad_combine_index" in ep.bugs(v, {**v.defaults(), "splits": 2})
    ep.fixed.add("bad_combine_index")                   # a bug once made is not made again
    assert "bad_combine_index" not in ep.bugs(v, {**v.defaults(), "splits": 2})
