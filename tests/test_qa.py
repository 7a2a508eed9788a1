"""`qa` passes on generated data and fails, naming the check, when a trajectory lies."""
import json

from kernelstrain.cli import main
from kernelstrain.qa import qa_episodes as qa


def test_generated_data_passes(small_dataset):
    result = qa(small_dataset)
    failed = [c["name"] for c in result["checks"] if not c["pass"]]
    # path variety needs more episodes per module than 40 give; the default ladders leave ~0.4 of
    # the steps after the final best, over the third the check asks (the engineer climbs the rungs
    # left and confirms: README, Behaviour; issue 26 is open on it); the retried-slip share sits at
    # its threshold (0.898 of 150 episodes on seed 0 since the streams are keyed by the profile's
    # content, issue 27), and 40 episodes hold ~12 slips: 9/12 is one binomial draw of it. Everything
    # else must hold, the prompt-label and weight-1 checks included.
    assert set(failed) <= {"max_module_path_share", "post_best_tail_share", "slips_retried"}, failed


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
    return next(c for c in result["checks"] if c["name"] == "max_module_path_share")


def test_batch_path_share_needs_support_but_still_catches_a_one_path_module():
    """3 of a module's 5 sessions (or episodes) on one path: chance on a short ladder, scored
    neither in a batch of 100 nor in a small dataset (issue 33: a 300-episode prefix failed
    on it); 10 of 10 on one path fails both."""
    from kernelstrain.qa import _Acc, report, session_report
    acc = _Acc()
    acc.paths["mamba_step_triton"].update({("a", "b"): 3, ("b",): 2})
    assert _path_check(session_report(acc))["pass"]
    assert _path_check(report(acc))["pass"]
    acc.paths["rope_cuda"][("vec", "fused")] = 10
    for check in (_path_check(session_report(acc)), _path_check(report(acc))):
        assert not check["pass"] and check["value"] == 1.0 and "rope_cuda" in check["note"]


def test_path_variety_is_scored_only_where_the_ladder_offers_a_choice():
    from kernelstrain.ops import REGISTRY
    from kernelstrain.qa import has_path_choice
    m = REGISTRY["embedding_bwd_cuda"]
    assert [v.tag for v in m.variants if v.offered("bf16")] == ["sort_segmented_reduce", "sorted_segment_vectorized"]
    assert not has_path_choice(m, "bf16") and has_path_choice(m, "fp16")
    assert all(has_path_choice(REGISTRY[name], "fp16") for name in ("rmsnorm_cuda", "gemm_fp16_triton"))


def test_path_share_allows_the_sampling_noise_of_a_modules_episode_count():
    """6 of a module's 10 episodes on one path is within two standard errors of a half (a
    400-episode run of the default profile holds ~10 a module); 65 of 100 is not, and the module
    judged is the one furthest over the threshold for its count, not the highest share."""
    from kernelstrain.qa import _Acc, report
    acc = _Acc()
    acc.paths["sliding_window_attn_triton"].update({("a", "b", "c"): 6, ("b", "c"): 4})
    assert _path_check(report(acc))["pass"]
    acc.paths["rope_cuda"].update({("vec", "fused"): 65, ("fused",): 35})
    check = _path_check(report(acc))
    assert not check["pass"] and check["value"] == 0.65 and "rope_cuda: 65/100" in check["note"]


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
