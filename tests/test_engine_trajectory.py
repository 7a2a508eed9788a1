"""scripts/read_trajectory.py: one trajectory as the model reads it, with the engineer's reason for
each step read from the trace."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import read_trajectory  # noqa: E402


def _episodes(data):
    with open(data / "episodes.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_every_step_gets_one_reason_that_says_what_it_measured(small_dataset):
    for ep in _episodes(small_dataset):
        why = read_trajectory.reasons(ep)
        assert len(why) == len(ep["steps"])
        for s, w in zip(ep["steps"], why):
            if s["status"] != "ok":
                assert "it fails" in w
            elif s["kept"]:
                assert "kept, the new best" in w and f"{s['time_ms']:g} ms" in w
            else:
                assert "kept, the new best" not in w


def test_a_repair_is_read_as_one_and_a_climb_as_a_rewrite():
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    steps = [{"step": 1, "kind": "structural", "tag": "b", "params": {"t": 1}, "status": "wrong_result",
              "failure": "mismatch", "bug": "race", "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 2, "kind": "structural", "tag": "b", "params": {"t": 1}, "status": "ok", "failure": None,
              "bug": None, "time_ms": 5.0, "best_ms": 5.0, "kept": True},
             {"step": 3, "kind": "param_sweep", "tag": "b", "params": {"t": 2}, "status": "ok", "failure": None,
              "bug": None, "time_ms": 6.0, "best_ms": 5.0, "kept": False}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[0].startswith("Rewrite onto a new technique, `b`") and "risky transformation" in why[0]
    assert why[1].startswith("Repair of step 1's mismatch") and "kept, the new best" in why[1]
    assert why[2].startswith("Tune the best one parameter: t 1->2") and "(1.20x): slower, reverted" in why[2]



def test_a_climb_written_again_at_the_bests_new_parameters_is_read_as_a_retry():
    """engine.Episode.retries: rung b lost at t=1; the best's t moved to 2; b written at t=2 is a
    retry, not a contender's tune (and a tune of b's own parameter is not)."""
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    def step(k, tag, t, ms, kept, best_ms):
        return {"step": k, "kind": "structural" if tag != "a" else "param_sweep", "tag": tag, "params": {"t": t},
                "status": "ok", "failure": None, "bug": None, "time_ms": ms, "best_ms": best_ms, "kept": kept}
    steps = [step(1, "b", 1, 11.0, False, 10.0), step(2, "a", 2, 8.0, True, 8.0), step(3, "b", 2, 8.5, False, 8.0)]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[2].startswith("Write `b` again at the best's new parameters (t 1->2")
    steps[2] = step(3, "b", 3, 8.5, False, 8.0)
    assert not read_trajectory.reasons({"baseline": base, "steps": steps})[2].startswith("Write `b` again")

def test_the_rendered_trajectory_shows_every_assistant_turn_with_its_reason(small_dataset):
    ep = max(_episodes(small_dataset), key=lambda e: len(e["steps"]))
    row, messages = read_trajectory.load(small_dataset, ep["id"])
    text = read_trajectory.render(row, messages)
    assert text.count("  WHY step ") == len(ep["steps"])
    assert text.count("ASSISTANT step ") == len(ep["steps"])
    assert "USER: " in text and "```" not in text          # code shown as its change, feedback as lines


def test_a_re_measure_is_the_same_file_submitted_again_and_read_as_one(small_dataset):
    """A re-measure (kind rebench: the best's code; or a close call's candidate) is the kernel a model
    would resubmit to the harness, byte for byte as it was measured before (no cosmetic edit to get
    past an identical-code rule), a training target only where the harness kept it (a close call's
    candidate whose second run decided it); the reader names it as the earlier code again, not as a
    diff (the fence's final newline is no change)."""
    import re
    fence = re.compile(r"```\w*\n(.*?)```", re.S)
    seen_rebench = 0
    for ep in _episodes(small_dataset):
        row, messages = read_trajectory.load(small_dataset, ep["id"])
        turns = [m for m in messages if m["role"] == "assistant"]
        measured, best = {}, ep["baseline"]["code"]
        for s, m in zip(ep["steps"], turns):
            code = fence.search(m["content"]).group(1)
            assert code.rstrip("\n") == s["code"].rstrip("\n")
            if s["kind"] == "rebench":
                seen_rebench += 1
                assert s["code"] == best and m["weight"] == 0
            if s["status"] == "ok" and s["code"] in measured:
                assert m["weight"] == int(s["kept"])     # a close call's candidate kept on its second run
            if s["status"] == "ok":
                measured[s["code"]] = s["step"]
            if s["kept"]:
                best = s["code"]
        text = read_trajectory.render(row, messages)
        assert text.count("(the best's code again, byte for byte)") >= sum(s["kind"] == "rebench" for s in ep["steps"])
    assert seen_rebench


def test_stop_reasons_names_a_rule_for_every_episode_and_tables_them(capsys):
    import stop_reasons
    assert stop_reasons.main(["--config", "kernelstrain", "--seed", "5", "--sample", "6", "--list"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("module=")]
    assert len(rows) == 6
    stops = {field.split("=")[1] for line in rows for field in line.split() if field.startswith("stop=")}
    assert stops <= {"roofline", "launch", "patience", "flat", "exhausted", "budget", "time"}
    assert "| all | 6 |" in out


def test_a_repaired_opt_in_slip_is_the_same_change_written_right():
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    steps = [{"step": 1, "kind": "structural", "tag": "b", "params": {"t": 1, "optin": 1}, "status": "compile_error",
              "failure": "smem", "bug": None, "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 2, "kind": "structural", "tag": "b", "params": {"t": 1, "optin": 0}, "status": "ok",
              "failure": None, "bug": None, "time_ms": 5.0, "best_ms": 5.0, "kept": True}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[1].startswith("Repair of step 1's smem on the same rung, the same change written right")


def test_a_step_after_a_limit_failure_that_moves_two_parameters_of_it_is_the_next_tune_not_its_repair():
    base = {"tag": "a", "params": {"n": 64, "u": 0}, "time_ms": 10.0, "code": "x"}
    steps = [{"step": 1, "kind": "joint", "tag": "a", "params": {"n": 128, "u": 2}, "status": "compile_error",
              "failure": "smem", "bug": None, "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 2, "kind": "param_sweep", "tag": "a", "params": {"n": 32, "u": 0}, "status": "ok",
              "failure": None, "bug": None, "time_ms": 11.0, "best_ms": 10.0, "kept": False},
             {"step": 3, "kind": "joint", "tag": "a", "params": {"n": 128, "u": 2}, "status": "compile_error",
              "failure": "smem", "bug": None, "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 4, "kind": "joint", "tag": "a", "params": {"n": 128, "u": 1}, "status": "ok",
              "failure": None, "bug": None, "time_ms": 9.0, "best_ms": 9.0, "kept": True}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[0].startswith("Joint move of two or more parameters of the best: n 64->128, u 0->2")
    assert why[1].startswith("Tune the best one parameter: n 64->32")
    assert why[3].startswith("Repair of step 3's smem on the same rung, backing off u 2->1")


def test_stop_reasons_oracle_reports_the_gain_left_in_the_neighbourhood(capsys):
    import stop_reasons
    assert stop_reasons.main(["--config", "kernelstrain", "--seed", "5", "--sample", "4", "--oracle", "--list"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("module=")]
    assert len(rows) == 4 and all("nbr_gain=" in line and "nbr_missed=" in line for line in rows)
    assert "nbr gain > noise" in out


def test_an_ablation_is_read_as_one_and_a_first_move_of_a_parameter_says_so():
    """A step onto a rung below the best's in the module's ladder is an ablation, not a climb;
    a tune of a parameter never moved on the rung says so (engine.Episode.open_ideas)."""
    base = {"tag": "naive", "params": {"BM": 64}, "time_ms": 10.0, "code": "x"}
    step = {"status": "ok", "failure": None, "bug": None}
    steps = [{**step, "step": 1, "kind": "structural", "tag": "mma_sync", "params": {"BM": 64, "BK": 32},
              "time_ms": 2.0, "best_ms": 2.0, "kept": True},
             {**step, "step": 2, "kind": "param_sweep", "tag": "mma_sync", "params": {"BM": 128, "BK": 32},
              "time_ms": 2.2, "best_ms": 2.0, "kept": False},
             {**step, "step": 3, "kind": "param_sweep", "tag": "mma_sync", "params": {"BM": 32, "BK": 32},
              "time_ms": 2.3, "best_ms": 2.0, "kept": False},
             {**step, "step": 4, "kind": "structural", "tag": "register_blocked", "params": {"BM": 64, "BK": 32},
              "time_ms": 3.0, "best_ms": 2.0, "kept": False}]
    why = read_trajectory.reasons({"module": "gemm_fp16_cuda", "baseline": base, "steps": steps})
    assert why[1].startswith("Tune the best one parameter: BM 64->128 (a parameter not moved on this rung yet)")
    assert "not moved" not in why[2]
    assert why[3].startswith("Ablate the best's technique: its parameters on `register_blocked`")
    # the lower rung tuned afterwards (kernelinfer's runner-up) is a contender's tune, not another ablation
    # (kernelinfer-s7171-000014 steps 17-19 read as ablations: eng's note, FROM_ENG.md)
    steps.append({**step, "step": 5, "kind": "param_sweep", "tag": "register_blocked", "params": {"BM": 128, "BK": 32},
                  "time_ms": 2.9, "best_ms": 2.0, "kept": False})
    why = read_trajectory.reasons({"module": "gemm_fp16_cuda", "baseline": base, "steps": steps})
    assert why[4].startswith("Tune `register_blocked`, a rewrite that came close: BM 64->128"), why[4]


def test_a_last_rerun_of_the_best_after_a_loss_past_restore_is_read_as_putting_it_back():
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    step = {"status": "ok", "failure": None, "bug": None}
    steps = [{**step, "step": 1, "kind": "param_sweep", "tag": "a", "params": {"t": 2}, "time_ms": 5.0,
              "best_ms": 5.0, "kept": True},
             {**step, "step": 2, "kind": "param_sweep", "tag": "a", "params": {"t": 4}, "time_ms": 50.0,
              "best_ms": 5.0, "kept": False},
             {**step, "step": 3, "kind": "rebench", "tag": "a", "params": {"t": 2}, "time_ms": 5.1,
              "best_ms": 5.05, "kept": False}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[2].startswith("Put the best back (the file held step 2's code, 10.00x slower)")
    steps[1] = {**steps[1], "time_ms": 5.2}          # a close loss: the re-run is a close call's, not a restore
    assert read_trajectory.reasons({"baseline": base, "steps": steps})[2].startswith("Re-measure the best")


def test_median_picks_a_converged_episode_of_the_median_step_count(small_dataset):
    eps = [ep for ep in _episodes(small_dataset) if ep["end"] == "converged"]
    picked = read_trajectory.median_id(small_dataset)
    ep = next(ep for ep in eps if ep["id"] == picked)
    counts = sorted(len(e["steps"]) for e in eps)
    assert len(ep["steps"]) == counts[len(counts) // 2]
    assert all(len(e["steps"]) != len(ep["steps"]) for e in eps[:eps.index(ep)])


def test_room_table_counts_each_episodes_room_and_path(capsys):
    import room_table
    rows = room_table.build("kernelstrain", 5, 6, 0, [])
    assert len(rows) == 6
    for r in rows:
        # the oracle's grid holds the fastest config, so at least one is within 1.25x of it,
        # and the episode's best is one of the grid's configs: never faster than the fastest
        assert 1 <= r["near"] <= r["configs"] and r["oracle_x"] >= 1.0 - 1e-9
        assert r["before"] + r["tail"] == r["steps"] and r["keeps"] <= r["before"]
        assert all(e[:-1] and e[-1] in "+-" for e in r["edges"])
    print(room_table.table(rows, "t"))
    out = capsys.readouterr().out
    assert "| ALL | 6 |" in out and out.count("\n| ") >= 3


def _on(tag, params, ms, best_ms, regs, k, kind="param_sweep"):
    return {"step": k, "kind": kind, "tag": tag, "params": params, "status": "ok", "failure": None, "bug": None,
            "time_ms": ms, "best_ms": best_ms, "kept": False, "regs": regs}


def test_tunes_of_a_rung_that_lost_far_are_a_contenders_not_spill_fixes():
    """kernelinfer-s86224-000545 (sliding_window_attn_triton, H200, D 256): persistent_tiles ran 1.27x the best
    at 255 registers, a build the launch model does not call spilled; the engine tuned it as a contender (num_warps
    up, then num_stages, BLOCK_M, BLOCK_N up, each from its point: more registers, not fewer). Steps 14-16 read
    "again without the spill" because the step before lost by 2x; nothing spilled, so they are a contender's tunes."""
    best = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
    base = {"tag": "pipelined_tiles", "params": best, "time_ms": 4.55, "code": "x"}
    steps = [_on("persistent_tiles", best, 5.77, 4.55, 255, 1, "structural"),
             _on("persistent_tiles", {**best, "num_warps": 8}, 10.06, 4.55, 152, 2),
             _on("persistent_tiles", {**best, "num_stages": 3}, 11.27, 4.55, 255, 3),
             _on("persistent_tiles", {**best, "BLOCK_M": 128}, 16.94, 4.55, 255, 4)]
    ep = {"module": "sliding_window_attn_triton", "gpu": "H200", "dtype": "bf16", "baseline": base, "steps": steps,
          "shape": {"B": 4, "H": 16, "S": 8192, "D": 256, "W": 4096}}
    why = read_trajectory.reasons(ep)
    assert not any("spill" in w for w in why), why
    assert why[2].startswith("Tune `persistent_tiles`, a rewrite that came close: num_stages 2->3"), why[2]
    assert why[3].startswith("Tune `persistent_tiles`, a rewrite that came close: BLOCK_M 64->128"), why[3]


def test_a_rung_written_again_after_its_one_spilled_measurement_is_read_as_an_unspill_once():
    """kernelinfer-s14141-000140 (selective_scan_cuda, RTX 5090): smem_bc_multi_channel at 8 rows of 128 threads
    (1024 a block: 64 registers a thread, its code holds more) ran 1.18x the best; the engine's unspill wrote it
    at 4 rows (104 registers, no spill). That step is the unspill; a tune after it is the contender's."""
    p = {"threads": 128, "rows": 8, "min_blocks": 0, "main_unroll": 2, "bound": 0, "optin": 0}
    base = {"tag": "vectorized_regs", "params": {}, "time_ms": 0.598, "code": "x"}
    steps = [_on("smem_bc_multi_channel", p, 0.707, 0.598, 64, 1, "structural"),
             _on("smem_bc_multi_channel", {**p, "rows": 4}, 0.762, 0.598, 104, 2),
             _on("smem_bc_multi_channel", {**p, "rows": 2}, 0.70, 0.598, 104, 3)]
    ep = {"module": "selective_scan_cuda", "gpu": "RTX5090", "dtype": "bf16", "baseline": base, "steps": steps,
          "shape": {"B": 16, "L": 1024, "D": 2048, "N": 16}}
    why = read_trajectory.reasons(ep)
    assert why[1].startswith("Write `smem_bc_multi_channel` again at a config that does not spill (step 1, its only "
                             "measurement, spilled at 64 registers a thread"), why[1]
    assert "spill" not in why[2], why[2]
