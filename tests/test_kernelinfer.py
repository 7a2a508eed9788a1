"""The kernelinfer machinery: profiles by name, the explicit default module list, the generic
launch knobs (code and simulator), the clock, multi-attempt repair, one impl per combo."""
import random
from dataclasses import replace
from pathlib import Path

import pytest

from kernelstrain import knobs
from kernelstrain.clock import Clock
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.errors import UsageError
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import all_combos, seeded_rng
from kernelstrain.profiles import DEFAULT_PROFILE, PROFILE_DIR, Search, load_profile, resolve
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task
from kernelstrain.dataset import validate

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / "tests" / "fixtures" / "kernelinfer_dev.toml"
KNOBS = Search(knobs=("min_blocks", "main_unroll"))


def test_bundled_profiles_resolve_by_name_and_match_the_top_level_copies():
    assert resolve("kernelinfer") == PROFILE_DIR / "kernelinfer.toml"
    assert resolve("kernelstrain") == DEFAULT_PROFILE
    assert resolve(str(DEV)) == DEV                      # a path stays a path
    for path in PROFILE_DIR.glob("*.toml"):
        assert (ROOT / "configs" / path.name).read_bytes() == path.read_bytes()
    with pytest.raises(UsageError, match="bundled profiles: fused, kernelinfer, kernelstrain"):
        load_profile("no_such_profile")


def test_default_profile_names_its_57_modules():
    p = load_profile("kernelstrain")
    assert len(p.modules) == 57 and len({REGISTRY[m].op for m in p.modules}) == 45
    # its search is the defaults but for the slip kinds it draws (every kind, issue 28) and how near its floor it
    # tunes on to (the last 10% is measurable with the hardware's noise, issue 26), and how it climbs and tunes
    # (issue 26: fewer skipped rungs and expert-first rewrites, a raised ceiling climbed one rung at a time, rewrites
    # within 1.5x tuned before judged, and ablations within 1.5x, a new best's neighbours re-probed, a way measured faster
    # inside the noise a tie, joint moves of ways that each came close alone, a flat neighbourhood's mirror probes left
    # out, joint moves of coupled knobs once one knob at a time is exhausted), its step budget, and its wrong-result draw
    # (a tune's bug only on the lines it writes, issue 26: the rest owed to rewrites, so the draw is raised to keep the
    # card's share)
    d = Search()
    assert replace(p.search, typo_weight=d.typo_weight, slip_weights=(), roofline_near=d.roofline_near, skip_min=d.skip_min,
                   skip_max=d.skip_max, expert_first=d.expert_first, stepwise=d.stepwise, contender=d.contender,
                   contender_steps=d.contender_steps, reprobe=d.reprobe, learn_limits=d.learn_limits,
                   budget_scale=d.budget_scale, tie_wins=d.tie_wins, joint_ways=d.joint_ways, knobs=d.knobs,
                   flat_stop=d.flat_stop, coupled=d.coupled, failure_scale=d.failure_scale, runner_up=d.runner_up) == d
    assert p.search.coupled == 2 and load_profile("kernelinfer").search.coupled == 0
    assert p.search.runner_up == 1.5 and load_profile("kernelinfer").search.runner_up == 1.5
    assert p.search.flat_stop and load_profile("kernelinfer").search.flat_stop
    # the generic knobs: the defaults and the Triton eviction hint on a re-read row (knobs_triton, NVIDIA only)
    assert p.search.knobs == d.knobs + ("evict",)
    # a step budget drawn at 4x the card's mean: at 2x, 9% of episodes ended on it mid-search, rungs untried (issue 26)
    assert p.search.budget_scale == 4.0
    # skip 0.1-0.4 and 10% expert-first: at 0.05-0.3 and 5% the full seed-0 run fails qa's path variety
    assert p.search.roofline_near == 1.18 and (p.search.skip_min, p.search.skip_max) == (0.1, 0.4)
    assert (p.search.expert_first, p.search.stepwise) == (0.1, True)
    assert (p.search.contender, p.search.contender_steps, p.search.reprobe) == (1.5, 4, True)
    assert p.search.learn_limits                # a limit failure is not made again at no smaller demand
    assert not p.search.probe_all and not p.search.interact    # they add as many steps after the best as before it
    assert p.search.slip_weights and p.clock == Clock() and not p.shapes


def test_dev_profile_has_unique_op_combos_for_every_session():
    p = load_profile(DEV)
    combos = all_combos(p)
    keys = [(REGISTRY[t.module].op, t.gpu.name, t.dtype, t.shape) for t in combos]
    assert len(keys) == len(set(keys)) >= p.combos
    text = (PROFILE_DIR / "kernelinfer.toml").read_text()
    for name in p.modules:                                   # the dev copy lists a subset
        assert f'"{name}"' in text


def test_knobs_are_written_into_the_code_and_change_the_model():
    # a rung with no unroll knob of its own (rmsnorm's vectorized rung has pragma_unroll, which
    # supersedes the generic main_unroll: knobs.SUPERSEDED)
    m = REGISTRY["adamw_cuda"]
    task = make_task(m, "A10", "fp32", {"N": 16777216, "T": 1})
    v = m.variant("fused_elementwise")
    ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), KNOBS.knobs)
    assert [p.name for p in ext.params[-2:]] == ["min_blocks", "main_unroll"]
    plain = {**ext.defaults()}
    assert knobs.render(m, ext, plain, task) == m.render(v, v.defaults(), task)
    tuned = {**plain, "min_blocks": 2, "main_unroll": 4}
    code = knobs.render(m, ext, tuned, task)
    assert ", 2)" in code.split("__launch_bounds__(", 1)[1].split("\n", 1)[0] and "#pragma unroll 4\n" in code
    # unrolling: more registers and more loads in flight per thread
    plain_launch, unrolled = knobs.launch(m, ext, plain, task), knobs.launch(m, ext, {**plain, "main_unroll": 8}, task)
    assert unrolled.regs == plain_launch.regs + 24 and unrolled.bytes_per_access > plain_launch.bytes_per_access
    # __launch_bounds__(1024, 3) asks for 3 x 1024 threads an SM, past the A10's 1536: ptxas ignores the
    # bound (".minnctapersm will be ignored") and the kernel keeps its registers and its time
    # (tests/test_knobs_min_blocks.py has a bound that fits and caps)
    wide = {**plain, "threads": 1024}
    free, bound = simulate(m, ext, wide, task), simulate(m, ext, {**wide, "min_blocks": 3}, task)
    assert 3 * 1024 > task.gpu.max_threads_per_sm
    assert free.ok and bound.ok and bound.regs == free.regs and bound.time_ms == free.time_ms


def test_knob_sessions_validate(tmp_path):
    """A small knob profile: steps tune the knobs, every step re-renders, validate passes."""
    text = DEV.read_text()
    start, end = text.index("modules = ["), text.index("]", text.index("modules = [")) + 1
    text = (text[:start] + 'modules = ["rmsnorm_cuda", "softmax_cuda"]' + text[end:])
    text = text.replace("episodes = 1899", "episodes = 6").replace("combos = 2094", "combos = 20")
    text = text.replace("min = 30", "min = 12").replace("max = 200", "max = 30").replace("mean = 94.6", "mean = 20")
    cfg = tmp_path / "knobs.toml"
    cfg.write_text(text)
    from kernelstrain.generation import generate
    from kernelstrain.reading import read_jsonl
    generate(load_profile(cfg), 0, tmp_path / "out", workers=1, progress=False)
    assert list(validate(tmp_path / "out")) == []
    rows = [r for _, r in read_jsonl(tmp_path / "out" / "episodes.jsonl")]
    tuned = [s for r in rows for s in r["steps"]
             if any(p["name"] in knobs.KNOBS and p["value"] for p in s["params"])]
    assert tuned, "no step moved a knob"
    assert all(r["steps"][0]["elapsed_s"] >= 1500 * 0.8 for r in rows)      # the setup comes first


def test_a_kept_step_adds_a_profile_of_the_new_best_and_the_default_clock_draws_none():
    import random
    c = Clock(profile_best=(60.0, 180.0))
    plain = c.step_seconds(random.Random(1), "param_sweep", "ok", "cuda", "x")
    kept = c.step_seconds(random.Random(1), "param_sweep", "ok", "cuda", "x", kept=True)
    assert 60.0 <= kept - plain <= 180.0
    assert Clock().step_seconds(random.Random(1), "joint", "ok", "cuda", "x", kept=True) \
        == Clock().step_seconds(random.Random(1), "joint", "ok", "cuda", "x")


def test_default_clock_draws_as_before():
    """The default clock: four write draws, one build draw, one bench draw unless the build failed."""
    rng, ref = random.Random(5), random.Random(5)
    got = Clock().step_seconds(rng, "joint", "ok", "triton", "x" * 5000)
    w = [ref.uniform(240, 900), ref.uniform(90, 300), ref.uniform(10, 30), ref.uniform(45, 180)]
    assert got == w[1] + ref.uniform(3, 15) + ref.uniform(6, 25)
    assert rng.random() == ref.random()                # nothing else was drawn


def test_refail_repairs_take_more_than_one_attempt():
    """A repair may slip again (search.refail), on the lines it writes (engine.Episode.fix_lines): with the
    typo alone that is never (the name it fixed is not misspelt twice), with kernelinfer's slip kinds it is."""
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "A100", "fp16", m.shapes[0])
    twice = 0
    for seed in range(24):       # (slips of tunes only on the lines they write, engine.Episode.edited: fewer to repair)
        s = {k: seeded_rng("refail", seed, k) for k in STREAMS}
        q = replace(load_profile("kernelinfer").search, refail=0.9)
        steps = [x.row() for x in Episode(m, task, s, 40, 0.3, 0.0, 8, q).run()]
        for a, b in zip(steps, steps[1:]):
            if a["status"] == b["status"] == "compile_error" and (a["tag"], a["params"]) == (b["tag"], b["params"]) \
                    and a["typo"] is not None and b["typo"] is not None:
                twice += 1
                assert a["error"] != b["error"] or a["typo"] != b["typo"]
    assert twice > 0


def test_shapes_table_extends_a_menu_and_bad_tables_are_usage_errors(tmp_path):
    text = DEV.read_text()
    cfg = tmp_path / "p.toml"
    cfg.write_text(text + '\n[shapes]\nrmsnorm_cuda = [{T = 3000, D = 1024}]\n')
    extra = [t for t in all_combos(load_profile(cfg)) if t.dims == {"T": 3000, "D": 1024}]
    assert {t.gpu.name for t in extra} <= set(load_profile(DEV).gpus) and extra
    cases = {"shapes.rmsnorm_cuda": text + '\n[shapes]\nrmsnorm_cuda = [{T = 1}]\n',
             "clock.bench": text.replace("\nbench = [3, 8]", "\nbench = [5, 1]"),
             "search.knobs": text.replace('knobs = ["min_blocks", "main_unroll"]', 'knobs = ["warp_size"]')}
    for key, body in cases.items():
        assert body != text
        cfg.write_text(body)
        with pytest.raises(UsageError, match=key.replace(".", r"\.")):
            load_profile(cfg)


def test_bound_slip_writes_a_stale_launch_bound_and_the_launch_fails():
    # a rung with no unroll knob of its own (rmsnorm's vectorized rung has pragma_unroll, which
    # supersedes the generic main_unroll: knobs.SUPERSEDED)
    m = REGISTRY["adamw_cuda"]
    task = make_task(m, "A10", "fp32", {"N": 16777216, "T": 1})
    v = m.variant("fused_elementwise")
    ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), ("min_blocks", "bound"))
    assert "bound" in [p.name for p in ext.params]
    assert all(c.get("bound") == 0 for c in __import__("kernelstrain.tasks").tasks.param_grid(knobs.untuned(ext)))
    wide = {**ext.defaults(), "threads": 512}
    slip = {**wide, "bound": 256}
    code = knobs.render(m, ext, slip, task)
    assert "__launch_bounds__(256)" in code and knobs.render(m, ext, wide, task) == m.render(v, {**v.defaults(), "threads": 512}, task)
    r = simulate(m, ext, slip, task)
    assert not r.ok and r.error_class == "resources" and "too many resources requested for launch" in r.error
    assert simulate(m, ext, wide, task).ok and simulate(m, ext, {**wide, "bound": 512}, task).ok


def test_a_limit_failure_is_backed_off_one_value_and_a_bound_slip_is_fixed_next():
    """search.backoff: the next candidate after a shared-memory overflow is the failed config
    with one parameter lowered to the nearest value that fits (every value between overflows too);
    a bound slip's next candidate is the same config with the bound written as THREADS again."""
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "A10", "fp16", m.shapes[-1])
    s = {k: seeded_rng("backoff", 0, k) for k in STREAMS}
    agent = Episode(m, task, s, 60, 0.3, 0.0, 8, Search(backoff=1.0))
    over = next(c for v in agent.rungs for c in agent.grid(v) if agent.clear_failure(c, "smem"))
    agent.over = (over, "smem")
    nxt = agent.propose_backoff()
    moved = [k for k in over.params if over.params[k] != nxt.params[k]]
    assert nxt.variant.tag == over.variant.tag and len(moved) == 1
    p = nxt.variant.param(moved[0])
    lo, hi = sorted((p.values.index(over.params[moved[0]]), p.values.index(nxt.params[moved[0]])))
    assert agent.sim(nxt).ok and agent.sim(nxt).smem_bytes < agent.sim(over).smem_bytes
    assert all(not agent.sim(replace(over, params={**over.params, moved[0]: x})).ok for x in p.values[lo + 1:hi])
    from kernelstrain.episodes import build_episode
    from kernelstrain.plan import make_plan
    plan = make_plan(load_profile("kernelinfer"), 0)
    fixed = other = 0
    for i in range(120):                  # sessions end on evidence: look further for three bound slips
        steps = build_episode(plan, i).steps
        assert sum(bool(s.params.get("bound") or s.params.get("optin")) for s in steps) <= 2   # then it knows
        for a, b in zip(steps, steps[1:]):
            if a.params.get("bound"):
                assert a.failure == "resources" and "requested for launch" in a.error
                if b.params == {**a.params, "bound": 0}:
                    fixed += 1
                else:
                    other += 1        # the fix written with a typo, or (4%) put off
        if fixed >= 3:
            break
    assert fixed >= 3 and fixed >= 2 * other, (fixed, other)


def test_optin_slip_drops_the_dynamic_smem_opt_in_and_fails_past_48_kb():
    m = REGISTRY["gemm_fp16_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[-1])
    v = m.variant("cp_async_pipeline")
    ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), ("optin",))
    grid = [p for p in __import__("kernelstrain.tasks").tasks.param_grid(knobs.untuned(ext))]
    big = next(p for p in grid if simulate(m, ext, p, task).ok and simulate(m, ext, p, task).smem_bytes > 48 * 1024)
    small = next((p for p in grid if simulate(m, ext, p, task).ok and simulate(m, ext, p, task).smem_bytes <= 48 * 1024), None)
    code = knobs.render(m, ext, {**big, "optin": 1}, task)
    assert "MaxDynamicSharedMemorySize" in knobs.render(m, ext, big, task) and "MaxDynamicSharedMemorySize" not in code
    r = simulate(m, ext, {**big, "optin": 1}, task)
    assert not r.ok and r.error_class == "smem" and "CUDA error: invalid argument" in r.error
    from kernelstrain.verify import recorded_class
    assert recorded_class(r.error, r.error_class) == "launch"
    if small is not None:
        assert simulate(m, ext, {**small, "optin": 1}, task).ok


def test_a_session_never_repeats_a_limit_failure_it_has_learnt():
    """The feasibility memory (limits.py): sessions that on the engine before it failed the
    same rung's shared memory dozens of times (49 dominated repeats in 52 limit failures in
    session 133, 46 in 49 in session 263) now fail no config that asks as much of a limit as one
    that already failed on its rung, nor an arch gate on a feature already shown missing."""
    from kernelstrain.episodes import build_episode
    from kernelstrain.limits import replay
    from kernelstrain.plan import make_plan
    plan = make_plan(load_profile("kernelinfer"), 0)
    hits = 0
    # gemm_fp16_cuda and gemm_fp8_cuda on RTX 5090 (99 KB a block), then other sessions until one
    # reaches a cap (sessions end on evidence now, and may stop before any limit is near)
    for i in (133, 263, *range(0, 400, 7)):
        if hits and i not in (133, 263):
            break
        task = plan.task(i)
        steps = [{**s.row(), "params": s.params} for s in build_episode(plan, i).steps]
        limit, dominated, arch_again = replay(REGISTRY[task.module], task, steps)
        assert (dominated, arch_again) == (0, 0), (i, limit, dominated)
        hits += limit
    assert hits > 0                       # the sessions do reach the cap (once per rung and resource)


def test_a_session_time_budget_stops_new_work_but_finishes_a_due_repair(tmp_path):
    """search.time_budget_h: the session ends ("time") once a step would start past the budget,
    never before min_steps and never on a slip it was about to fix; what came before is the
    same session as without a budget (the budget draws nothing)."""
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "A100", "fp16", m.shapes[0])
    # 40 minutes: this session's rmsnorm episodes run shorter since limits are learnt and rows tune `vec`;
    # at an hour no repair fell due past the budget in 400 seeds (one does by seed 27 at 40 minutes)
    budget_s, ended, repaired = 2400, 0, 0
    for seed in range(400):       # until the examples are found: a repair due past the budget is ~1 session in 40-200
        if ended >= 4 and repaired:
            break

        def run(search):
            agent = Episode(m, task, {k: seeded_rng("time", seed, k) for k in STREAMS}, 60, 0.4, 0.15, 8, search)
            return [x.row() for x in agent.run()], agent.end
        free, _ = run(Search(refail=0.3))
        capped, end = run(Search(refail=0.3, time_budget_h=budget_s / 3600))
        i = next((j for j, (a, b) in enumerate(zip(capped, free)) if a != b), len(capped))
        if i < len(capped):      # past the budget a repair the free session put off (4%) runs, and so does
            a = capped[i - 1]    # the repair of a repair that slipped again (refail): nothing else
            assert end == "time" and a["status"] != "ok"
            assert all((b["tag"], b["params"]) == (a["tag"], a["params"]) for b in capped[i:])
            assert all(b["status"] != "ok" for b in capped[i:-1])
        if end != "time":
            assert capped == free                  # it ended on its own first
        else:
            ended += 1
            assert len(capped) >= 8 and capped[-1]["elapsed_s"] >= budget_s
            assert capped[-1]["failure"] not in ("syntax", "mismatch", "fault")
        for a, b in zip(capped, capped[1:]):
            # started past the budget: only a slip's repair (elapsed_s is rounded: 2400 may be 2399.6, under the budget;
            # the engine's draws since eng's seventh pass end seed 87's step 11 there)
            if a["elapsed_s"] > budget_s and b["step"] > 8:
                assert a["failure"] in ("syntax", "mismatch", "fault") and (b["tag"], b["params"]) == (a["tag"], a["params"])
                repaired += 1
    assert ended >= 4 and repaired >= 1, (ended, repaired)
    for seed in range(20):       # a session may converge before the minimum on its own: the first that runs out of time
        short = Episode(m, task, {k: seeded_rng("time", seed, k) for k in STREAMS}, 60, 0.3, 0.1, 8, Search(time_budget_h=0.01))
        rows = [x.row() for x in short.run()]
        if short.end == "time":
            break
    assert len(rows) >= 8 and short.end == "time"               # never below the step minimum
    for a, b in zip(rows[7:], rows[8:]):                        # past it: only the repair of a due slip
        assert a["failure"] in ("syntax", "mismatch", "fault", "type", "constexpr") \
            and (b["tag"], b["params"]) == (a["tag"], a["params"])
    cfg = tmp_path / "p.toml"
    cfg.write_text(DEV.read_text().replace("[search]", "[search]\ntime_budget_h = -1"))
    with pytest.raises(UsageError, match=r"search\.time_budget_h"):
        load_profile(cfg)
