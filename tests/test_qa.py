"""`qa` passes on generated data and fails, naming the check, when a trajectory lies."""
import json

from kernelstrain.cli import main
from kernelstrain.qa import qa_episodes as qa


def test_generated_data_passes(small_dataset):
    result = qa(small_dataset)
    failed = [c["name"] for c in result["checks"] if not c["pass"]]
    # path variety needs a choice point reached 20 times, which 40 episodes never give; the default ladders leave ~0.4 of
    # the steps after the final best, over the third the check asks (the engineer climbs the rungs
    # left and confirms: README, Behaviour; issue 26 is open on it); the retried-slip share sits at
    # its threshold (0.898 of 150 episodes on seed 0 since the streams are keyed by the profile's
    # content, issue 27), and 40 episodes hold ~12 slips: 9/12 is one binomial draw of it. Everything
    # else must hold, the prompt-label and weight-1 checks included.
    assert set(failed) <= {"post_best_tail_share", "slips_retried"}, failed


def test_a_keep_inside_the_noise_and_a_mislabelled_kind_fail(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    lines = path.read_text().splitlines()
    ep = json.loads(lines[0])
    i = next(i for i, s in enumerate(ep["steps"]) if s["status"] == "ok" and not s["kept"] and s["kind"] != "rebench")
    before = ep["steps"][i - 1]["best_ms"] if i else ep["baseline"]["time_ms"]
    for s in ep["steps"][i:]:
        s["best_ms"] = round(before * 0.999, 6)            # a 0.1% "gain" kept
    ep["steps"][i]["kept"] = True
    lines[0] = json.dumps(ep)
    path.write_text("\n".join(lines) + "\n")
    assert main(["qa", str(dataset_copy)]) == 1
    out = capsys.readouterr().out
    assert any(l.startswith("noise_keeps") and "FAIL" in l for l in out.splitlines())


def _path_check(result: dict) -> dict:
    return next(c for c in result["checks"] if c["name"] == "max_choice_share")


def test_choice_share_needs_support_but_still_catches_a_scripted_climb():
    """A choice point reached 10 times, 9 on one rung, is chance at 0.8 (and unscored: a batch of
    100 sessions holds 1-6 of a module's); 16 of 20 passes; 20 of 20 on one rung fails, in a batch
    report and a dataset's alike; the situation judged is the one furthest over the threshold for
    its count, named in the note."""
    from kernelstrain.qa import _Acc, report, session_report
    acc = _Acc()
    acc.paths["mamba_step_triton: from a, open b c"].update({"b": 9, "c": 1})
    acc.paths["rope_cuda: from a, open b c"].update({"b": 16, "c": 4})
    assert _path_check(session_report(acc))["pass"] and _path_check(report(acc))["pass"]
    acc.paths["rmsnorm_cuda: from a, open b c d"]["b"] = 20
    for check in (_path_check(session_report(acc)), _path_check(report(acc))):
        assert not check["pass"] and check["value"] == 1.0 and "rmsnorm_cuda: from a" in check["note"]


def _first_climb(m, task, first: str) -> dict:
    """An episode row that climbs from the task's first rung to `first` and keeps it."""
    from kernelstrain.sim import simulate
    from kernelstrain.tasks import carry
    base = next(v for v in m.variants if v.offered(task.dtype))
    v = m.variant(first)
    return {"baseline": {"tag": base.tag, "params": base.defaults(),
                         "time_ms": simulate(m, base, base.defaults(), task).time_ms},
            "steps": [{"tag": first, "params": carry(v, base.defaults()), "kept": True,
                       "best_ms": simulate(m, v, carry(v, base.defaults()), task).time_ms}]}


def test_a_scripted_climb_where_several_rungs_were_open_fails_and_a_one_way_ladder_is_not_scored():
    """Every episode of a module climbing one rung first where several could beat the baseline
    (a script) fails max_choice_share; the same episodes spread over the open rungs pass; a
    ladder with one rung above the baseline (embedding_bwd_cuda's bf16) makes no choice point."""
    from kernelstrain.qa import _Acc, choice_points, report
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["swiglu_fwd_triton"]
    task = make_task(m, "H100", "fp16", {"T": 4096, "I": 11008})
    points = choice_points(m, task, _first_climb(m, task, m.variants[1].tag))
    assert len(points) == 1 and points[0][1] == m.variants[1].tag
    opened = points[0][0].split("open ")[1].split()
    assert len(opened) >= 2, opened              # several rungs beat the baseline: a real choice
    scripted, varied = _Acc(), _Acc()
    for i in range(40):
        for acc, first in ((scripted, opened[0]), (varied, opened[i % len(opened)])):
            for point, rung in choice_points(m, task, _first_climb(m, task, first)):
                acc.paths[point][rung] += 1
    check = _path_check(report(scripted))
    assert not check["pass"] and check["value"] == 1.0 and "swiglu_fwd_triton: from flat_index" in check["note"]
    assert _path_check(report(varied))["pass"]
    e = REGISTRY["embedding_bwd_cuda"]
    assert [v.tag for v in e.variants if v.offered("bf16")] == ["sort_segmented_reduce", "sorted_segment_vectorized"]
    bf16 = make_task(e, "H100", "bf16", e.shapes[0])
    assert choice_points(e, bf16, _first_climb(e, bf16, "sorted_segment_vectorized")) == []


def test_converged_far_share_allows_a_batchs_sampling_noise_but_not_a_real_rate():
    """2 of a kernelinfer batch's ~95 converged endings far from the best (0.021) is a 0.5 %
    generator within the noise of 95 draws (full seed-0 kernelinfer: 9/1,854 overall, yet two of
    its 19 batch reports failed at 2/95 and 4/92); 6 of 95 is not, nor 40 of 1,000."""
    from kernelstrain.qa import _Acc, report, session_report

    def far_check(converged, far):
        acc = _Acc()
        acc.behaviour.update(converged=converged, converged_far=far)
        return [c for c in session_report(acc)["checks"] if c["name"] == "converged_far_from_best"][0]

    assert far_check(95, 2)["pass"] and far_check(92, 4)["pass"]
    assert not far_check(95, 6)["pass"]
    bad = far_check(1000, 40)
    assert not bad["pass"] and bad["value"] == 0.04 and "40/1000" in bad["note"]


def test_a_rung_the_printed_bound_singles_out_is_not_a_choice(monkeypatch):
    """A climb where several rungs beat the best but only one answers the bound its profile printed
    (qa.answers_bound, the engine's moves_toward) is the evidence's move, not a choice: no choice point
    (seed 0 on m20: all 39 softmax_cuda climbs from smem_block_reduce went to the one rung that cut its
    memory time, and the check, which counted the other open rungs, failed at 1.0). Where two or more
    answer, the point lists exactly those."""
    import kernelstrain.qa as qa
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["swiglu_fwd_triton"]
    task = make_task(m, "H100", "fp16", {"T": 4096, "I": 11008})
    row = _first_climb(m, task, m.variants[1].tag)
    monkeypatch.setattr(qa, "answers_bound", lambda *a: True)
    opened = qa.choice_points(m, task, row)[0][0].split("open ")[1].split()
    assert len(opened) >= 2, opened
    monkeypatch.setattr(qa, "answers_bound", lambda module, t, tag, params, v: v.tag == opened[0])
    assert qa.choice_points(m, task, row) == []
    monkeypatch.setattr(qa, "answers_bound", lambda module, t, tag, params, v: v.tag in opened[:2])
    assert qa.choice_points(m, task, row)[0][0].split("open ")[1].split() == opened[:2]
