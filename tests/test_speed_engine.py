"""The engine's and the simulator's speed-ups (issue 32): each kept or shared answer is the plain
computation's, and a cache keyed on too little would be caught here."""
import math
from dataclasses import replace

from kernelstrain import sim
from kernelstrain.calibration import FIT, Fit, cross_steps, curve_steps, held_steps, launch_terms, param_steps
from kernelstrain.ops.occupancy import in_flight_ratio

from test_caches import registry_sample


def _core_factor_plain(f: Fit, module: str, impl: str, variant: str, terms: dict, steps: dict | None = None,
                       work_ms: float | None = None) -> float:
    """Fit.core_factor as it read before its rung's sums were kept (the formula of calibration's docstring: the
    module's parameter terms on the steps held within param_range, the rung's on those held within its
    variant_param_range, summed as one where both hold a step alike; the rung's cross terms on its held steps after)."""
    exps, params = f.exponents.get(impl, {}), f.param_exponents.get(module, {})
    own = f.module_exponents.get(module, {})
    size = f.size_exponents.get(module, {}).get(variant, 0.0)
    by_module = held_steps(steps or {}, f.param_range.get(module, {}))
    by_variant = held_steps(steps or {}, f.variant_param_range.get(module, {}).get(variant, {}))
    if by_module == by_variant:
        param = sum((params.get(p, 0.0) + params.get(f"{p}@{variant}", 0.0)) * x
                    for p, x in {**by_module, **curve_steps(by_module)}.items())
    else:
        param = sum(params.get(p, 0.0) * x for p, x in {**by_module, **curve_steps(by_module)}.items()) + \
            sum(params.get(f"{p}@{variant}", 0.0) * x for p, x in {**by_variant, **curve_steps(by_variant)}.items())
    param += sum(params.get(f"{p}@{variant}", 0.0) * x for p, x in cross_steps(by_variant).items())
    return f.ceiling(module, variant) * math.exp(
        sum((exps.get(t, 0.0) + own.get(t, 0.0) + own.get(f"{t}@{variant}", 0.0)) * math.log(x)
            for t, x in terms.items())
        + math.log(2.0) * (param + size * f.size_step(module, work_ms, variant)))


def _time_ms_plain(module, variant, launch, task, params) -> float:
    """sim.time_ms as it read before its efficiencies were shared by its two roofline passes."""
    t_compute, t_memory, t_atomics = sim.roofline_terms(module, variant, launch, task)
    terms = launch_terms(launch, sim.sm_coverage(launch, task.gpu), t_compute >= t_memory,
                         in_flight_ratio(launch, task.gpu),
                         sim.latency_ratio(launch, task.gpu, max(t_compute, t_memory, t_atomics)), task.gpu.bw_tbs)
    floor_ms = sim.roofline_floor_ms(module, task, variant.path)
    factor = _core_factor_plain(FIT, module.name, module.impl, sim.fit_name(module, variant), terms,
                                param_steps(params, variant.defaults()), floor_ms)
    core_s = max(*sim.roofline_terms(module, variant, launch, task, factor), sim.floor_s(launch, task.gpu),
                 floor_ms * 1e-3 / FIT.memory_cap)
    return (core_s + launch.later_s) * 1e3 + FIT.overhead_us(task.gpu.vendor, launch.launches) * 1e-3


def test_time_ms_is_the_plain_computation_registry_wide():
    """Exactly the same float (not approximately): output bytes hang on it."""
    timed = 0
    for _ in range(2):                 # a cold pass, then one from the rungs' kept sums
        for m, v, params, task in registry_sample():
            if hasattr(m, "simulate") or sim.failure.uncached(m, v, params, task) is not None:
                continue
            launch = sim.built_launch(m, v, params, task)
            assert sim.time_ms(m, v, launch, task, params) == _time_ms_plain(m, v, launch, task, params), \
                (m.name, v.tag, params, task.key)
            timed += 1
    assert timed > 2000


def test_core_factor_keeps_each_rungs_sums_apart():
    """A Fit whose exponents differ by rung (term@variant, param@variant), module and impl: asked in turns, each
    rung's factor is its own (a kept sum keyed without the variant, the module or the impl would fail this)."""
    f = Fit(exponents={"cuda": {"threads": 0.3, "traffic": -0.2}, "triton": {"threads": -0.4}},
            module_exponents={"m": {"threads": 0.1, "threads@v": 0.5}, "n": {"traffic@w": 0.7}},
            param_exponents={"m": {"BLOCK": 0.2, "BLOCK@w": -0.6, "threads^2@v": 0.05}},
            ceilings={"m": {"v": 1.3}}, module_ceilings={"m": 0.9, "n": 1.1},
            size_exponents={"m": {"w": -0.2}}, size_ref_ms={"m": 0.1},
            param_range={"m": {"BLOCK": [0.0, 0.5]}}, variant_param_range={"m": {"w": {"BLOCK": [0.0, 2.0]}}})
    terms = {"threads": 2.0, "traffic": 1.5, "coverage": 0.7}
    steps = {"BLOCK": 1.0, "threads": -1.0}
    asks = [(mod, impl, var) for mod in ("m", "n") for impl in ("cuda", "triton") for var in ("v", "w", "x")]
    seen = set()
    for _ in range(2):
        for mod, impl, var in asks:
            got = f.core_factor(mod, impl, var, terms, steps, 0.4)
            assert got == _core_factor_plain(f, mod, impl, var, terms, steps, 0.4), (mod, impl, var)
            seen.add(round(got, 12))
    assert len(seen) >= 8              # the rungs' factors do differ: the test can tell them apart
    # a refit is a new Fit: its own sums, not the old one's
    refit = replace(f, module_exponents={"m": {"threads@v": -0.5}})
    assert refit.core_factor("m", "cuda", "v", terms, steps) == _core_factor_plain(refit, "m", "cuda", "v", terms, steps) \
        != f.core_factor("m", "cuda", "v", terms, steps)
    assert refit == replace(f, module_exponents={"m": {"threads@v": -0.5}})     # the kept sums are no field


def test_scan_failure_is_launch_failures_answer_and_keeps_nothing():
    """sim.scan_failure (a limit scan's question) answers as launch_failure, registry-wide, and fills no
    candidate cache (neither its own answer nor its launch model's)."""
    from kernelstrain import knobs
    sample = [s for s in registry_sample() if not hasattr(s[0], "simulate")]
    knobs.launch.cache_clear()
    sim.launch_failure.cache_clear()
    failed = [sim.scan_failure(*s) for s in sample]
    assert knobs.launch.cache_len() == 0 and sim.launch_failure.cache_len() == 0
    for (m, v, params, task), r in zip(sample, failed):
        assert r == sim.launch_failure.uncached(m, v, params, task), (m.name, v.tag, params, task.key)
    assert {r.error_class for r in failed if r is not None} >= {"arch", "smem", "resources"}


def _episodes():
    """Episodes of a CUDA rung ladder on an NVIDIA GPU (the scans by groups of own parameters) and of a
    Triton one (config by config), each on a task where some rungs overflow shared memory."""
    from kernelstrain.engine import Episode
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    from test_engine import streams
    for name in ("gemm_fp16_cuda", "softmax_triton", "layernorm_triton"):
        m = REGISTRY[name]
        yield Episode(m, make_task(m, "H100", "fp16", m.shapes[0]), streams(3), 40, 0.0, 0.0, 1)


def test_scan_failure_is_clear_failure_for_both_classes_in_turns():
    """Episode.scan_failure (kept once an episode for the smem and the resources scans) answers as
    clear_failure of every config of every rung, the classes asked in turns; a key that told configs
    apart by less than the config itself (its rung, its own parameters) would answer some config with
    another's failure, and the classes found must include both answers for this to show it."""
    answers = set()
    for e in _episodes():
        for v in e.rungs:
            configs = e.configs(v)
            for error_class in ("smem", "resources", "smem"):
                for c in configs:
                    got = e.scan_failure(c, error_class)
                    assert got == e.clear_failure(c, error_class), (e.m.name, v.tag, c.params, error_class)
                    answers.add((e.m.name, error_class, got))
    assert {(n, "smem", True) for n, _, _ in answers} & answers and (answers & {(n, "smem", False) for n, _, _ in answers})


def test_limit_scans_find_what_the_plain_tests_find():
    """Episode._over_limit's whole-grid scans (limits.rung_failing over scan_failure) are the plain
    filter of each rung's configs by clear_failure and writable, for both classes (a grid grid_limits proves
    clear is not scanned: nothing kept, and the plain filter must find nothing)."""
    from kernelstrain import limits
    for e in _episodes():
        limits._FAILING.clear()
        for v in e.rungs:
            for error_class in ("smem", "resources"):
                e._over_limit(v, error_class)
                plain = [c.params for c in e.configs(v) if e.clear_failure(c, error_class) and e.writable(c)]
                assert [c.params for c in e._limits.get((v.tag, error_class), [])] == plain, (e.m.name, v.tag, error_class)


def test_op_cost_is_the_modules_cost_and_keyed_by_the_task_object():
    """sim.op_cost answers module.cost(task) for every registry sample task (a cold pass, then kept), and a
    task equal in value but another object, or another module asked of the same task, gets its own answer."""
    sim._COSTS.clear()
    sample = list(registry_sample())
    for _ in range(2):
        for m, _, _, task in sample:
            assert sim.op_cost(m, task) == m.cost(task), (m.name, task.key)
    m, _, _, task = sample[0]
    twin = replace(task)
    assert twin is not task and sim.op_cost(m, twin) == m.cost(task)
    fake = type("Fake", (), {"cost": lambda self, t: "not the module's"})()
    assert sim.op_cost(fake, task) == "not the module's" and sim.op_cost(m, task) == m.cost(task)


def test_render_cache_returns_the_plain_render():
    """OpModule.render keeps its last renders (ops.base._rendered): each equals the plain assembly of the
    rung's source, cold and kept, with and without a bug, and a candidate differing only in its GPU, dtype,
    shape or parameters is rendered for itself (a key short of any would fail here)."""
    from kernelstrain.ops import base
    base._RENDERS.clear()
    sample = [s for s in registry_sample() if isinstance(s[1], base.Rung)]
    assert len(sample) > 1000
    for _ in range(2):
        for m, v, params, task in sample:
            assert m.render(v, params, task) == m.assemble(v.source(params, task), v, params, task), \
                (m.name, v.tag, params, task.key)
            for bug in v.bugs[:1]:
                assert m.render(v, params, task, bug) == m.assemble(v.source(params, task, bug), v, params, task)
    assert 0 < len(base._RENDERS) <= base.RENDERS_MAX
    # the same candidate at another shape of its task (the sample holds each module's first shape alone)
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["rmsnorm_cuda"]
    v = m.variants[0]
    a, b = (make_task(m, "H100", "fp16", shape) for shape in m.shapes[:2])
    codes = [m.render(v, v.defaults(), t) for t in (a, b, a, b)]
    assert codes[0] != codes[1] and codes[2:] == codes[:2]
    assert codes[1] == m.assemble(v.source(v.defaults(), b), v, v.defaults(), b)


def test_replaced_is_dataclasses_replace():
    """records.replaced makes the record dataclasses.replace makes (equal, the same type, hash and fields in the
    same order) for every registry sample's launch, a field at a time; and hands a class whose __init__ does
    more than store its fields (a __post_init__, a hand-written __init__), a record holding a cached value, or
    a name that is no field to dataclasses.replace itself (the same answer, the same error)."""
    import dataclasses
    from functools import cached_property

    import pytest

    from kernelstrain.ops.base import Launch
    from kernelstrain.records import plain_fields, replaced
    names = [f.name for f in dataclasses.fields(Launch)]
    made = 0
    for m, v, params, task in registry_sample():
        if hasattr(m, "simulate"):
            continue
        launch = m.launch(v, params, task)
        for name in names:
            value = getattr(launch, name)
            changed = value + 1 if type(value) is int else value * 1.5
            a, b = replaced(launch, **{name: changed}), dataclasses.replace(launch, **{name: changed})
            assert type(a) is type(b) and a == b and hash(a) == hash(b) and list(vars(a).items()) == list(vars(b).items())
            made += 1
    assert made > 10000

    @dataclasses.dataclass(frozen=True)
    class Posted:
        x: int
        y: int = 0

        def __post_init__(self):
            object.__setattr__(self, "y", self.x * 2)

    @dataclasses.dataclass(frozen=True)
    class Cached:
        x: int

        @cached_property
        def twice(self):
            return 2 * self.x

    @dataclasses.dataclass(frozen=True, init=False)
    class Own:
        x: int

        def __init__(self, x):
            object.__setattr__(self, "x", x + 100)
    assert plain_fields(Posted) is None and plain_fields(Own) is None and plain_fields(Cached) == {"x"}
    assert replaced(Posted(1), x=5) == dataclasses.replace(Posted(1), x=5) == Posted(5)
    c = Cached(1)
    assert c.twice == 2 and replaced(c, x=5).twice == 10
    assert replaced(Own(1), x=5).x == 105
    with pytest.raises(TypeError):
        replaced(Launch(1, 32), nothing=1)


def test_plain_launch_is_launch_and_keeps_nothing():
    """knobs.plain_launch (the held-out search's) is knobs.launch's answer, registry-wide, and fills neither
    candidate cache."""
    from kernelstrain import knobs
    sample = [s for s in registry_sample() if not hasattr(s[0], "simulate")]
    knobs.launch.cache_clear()
    knobs.module_launch.cache_clear()
    for m, v, params, task in sample:
        assert knobs.plain_launch(m, v, params, task) == knobs.launch.uncached(m, v, params, task), (m.name, v.tag)
    knobs.launch.cache_clear()
    knobs.module_launch.cache_clear()
    for m, v, params, task in sample[:50]:
        knobs.plain_launch(m, v, params, task)
    assert knobs.launch.cache_len() == knobs.module_launch.cache_len() == 0


def test_baseline_rung_is_kept_per_task_and_caps_and_is_the_plain_answer(monkeypatch):
    """engine.baseline_rung keeps each (module, task, caps)'s answer: the plain one (_baseline_rung) for every
    module's first menu task on each GPU at three pairs of caps, the caps apart (a key without them would hand
    a (0, 0) baseline to a capped ask), and a second ask computes nothing."""
    from kernelstrain import engine
    from kernelstrain.profiles import Search
    engine._BASELINES.clear()
    tasks = {(m.name, t.gpu.name): (m, t) for m, _, _, t in registry_sample()}
    searches = [Search(baseline_cap=0.0, eager_cap=0.0), Search(baseline_cap=4.0, eager_cap=0.0),
                Search(baseline_cap=4.0, eager_cap=1.5)]
    plain = {(k, i): engine._baseline_rung(m, t, s) for k, (m, t) in tasks.items() for i, s in enumerate(searches)}
    assert len({v.tag for v in plain.values()}) > 20 and any(
        plain[k, 0] != plain[k, 1] for k in tasks), "the caps move some baselines (else this test shows nothing)"
    for (k, i), want in plain.items():
        m, t = tasks[k]
        assert engine.baseline_rung(m, t, searches[i]) is want
    monkeypatch.setattr(engine, "_baseline_rung", lambda *a: (_ for _ in ()).throw(AssertionError("asked again")))
    for (k, i), want in plain.items():
        m, t = tasks[k]
        assert engine.baseline_rung(m, t, replace(searches[i], patience_min=3)) is want   # other fields: same key


def test_masked_calls_by_kernel_text_are_the_whole_codes():
    """slips.triton_more.masked_calls reads each launched kernel alone (its sites kept by the kernel's text):
    the same (line, column, def line) as the whole code's tree gives, for both builtins, over every Triton
    rung's renders (clean, and with its first bug) at three configs on two GPUs, many sharing a kernel text; a
    kernel that does not parse alone (a line at column 0 inside it) is read from the whole code's tree."""
    from kernelstrain.gpus import get_gpu
    from kernelstrain.ops import REGISTRY
    from kernelstrain.slips import triton_more as T
    from kernelstrain.tasks import make_task, param_grid
    T._kernel_masked.cache_clear()
    found = 0
    sample = [(m, v, params, make_task(m, gpu, m.dtypes[0], m.shapes[0])) for m in REGISTRY.values()
              if m.impl == "triton" for gpu in ("H100", "MI300X") if m.supports(get_gpu(gpu), m.dtypes[0])
              for v in m.variants for _, params in zip(range(3), param_grid(v))]
    assert len({m.name for m, *_ in sample}) > 20
    for m, v, params, task in sample:
        for bug in (None, *v.bugs_for(task.dtype, params)[:1]):
            code = m.render(v, params, task, bug)
            for builtin in ("load", "store"):
                want = T.masked_calls_whole(code, builtin)
                T.masked_calls.cache_clear()
                assert T.masked_calls(code, builtin) == want, (m.name, v.tag, bug, builtin)
                found += len(want)
    assert found > 300 and T._kernel_masked.cache_info().hits > 300
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, D, BLOCK: tl.constexpr):\n"
           "    c = tl.arange(0, BLOCK)\n    s = '''\nx'''\n    v = tl.load(x_ptr + c, mask=c < D, other=0.0)\n"
           "    tl.store(x_ptr + c, v, mask=c < D)\n\n\ndef f(x):\n    k[(1,)](x, x.numel(), BLOCK=64)\n")
    assert T._kernel_masked("\n".join(src.split("\n")[5:8]), 1, "load") is None     # the string cut: no parse
    for builtin in ("load", "store"):
        T.masked_calls.cache_clear()
        assert T.masked_calls(src, builtin) == T.masked_calls_whole(src, builtin)
