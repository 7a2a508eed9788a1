"""A bug is injected only where the parameters make it wrong (the H200 ran gemv_cuda
split_k_combine with bad_combine_index at splits=1 and it matched the reference)."""
from kernelstrain.engine import STREAMS, Candidate, Episode
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
    m = REGISTRY["gemv_cuda"]
    v = next(v for v in m.variants if v.tag == "split_k_combine")
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    carried = hidden = 0
    for seed in range(60):
        ep = Episode(m, task, {k: seeded_rng("bug_params", seed, k) for k in STREAMS}, 40, 0.1, 0.4, 8)
        ep.best = Candidate(v, {**v.defaults(), "splits": 1})
        c = ep.propose_wrong(1)
        if c is not None and c.bug == "bad_combine_index":
            carried += 1
            hidden += c.params["splits"] < 2
    assert carried > 0 and hidden == 0
