"""The episode state machine: propose -> simulate -> keep or revert, for tens of steps.

An episode starts from the ladder's first rung (the baseline) and hill-climbs: structural
rewrites up the rungs this GPU can run, one-parameter sweeps, joint configs, rebenchmarks
of the current best, and endgame nudges near the end. With the profile's probabilities a
step is a failure that a real engineer makes: an arch-gated rewrite, a shared-memory
overflow, a renamed-variable typo (compile errors), or a risky transformation whose code
really carries the bug (wrong result). Failures are never kept; the next step usually
fixes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from . import feedback
from .mutations import break_identifier
from .ops.base import OpModule, Task, Variant
from .sim import measure, simulate, smem_cap
from .tasks import param_grid

KINDS = ("structural", "param_sweep", "joint", "rebench", "endgame")


@dataclass(frozen=True)
class Candidate:
    variant: Variant
    params: dict
    bug: str | None = None        # a risky transformation written into the code
    typo: int | None = None       # break_identifier(pick=typo): a compile error

    @cached_property
    def key(self):
        return (self.variant.tag, tuple(sorted(self.params.items())))


def draw_steps(rng, lo: int, hi: int, mean: float) -> int:
    """Steps per episode: lo + Gamma(k=2.5) with the requested mean, capped at hi."""
    extra = rng.gammavariate(2.5, (mean - lo) / 2.5) if mean > lo else 0.0
    return int(min(hi, lo + round(extra)))


class Episode:
    """One trajectory on one task. `run()` returns the step records in order."""

    def __init__(self, module: OpModule, task: Task, rng, n_steps: int, p_compile: float, p_wrong: float):
        self.m, self.task, self.rng = module, task, rng
        self.n_steps, self.p_compile, self.p_wrong = n_steps, p_compile, p_wrong
        gpu = task.gpu
        self.rungs = [v for v in module.variants if not (v.needs - gpu.features)]
        self.gated = [v for v in module.variants if v.needs - gpu.features]
        self.rung = 0                           # highest rung of self.rungs tried
        self.tried: set = set()
        self._true_ms: dict = {}
        self._grids: dict = {}          # variant tag -> [Candidate] of its whole grid
        self._overflows: dict = {}      # variant tag -> configs over the shared-memory cap
        base = Candidate(self.rungs[0], self.rungs[0].defaults())
        self.baseline_code = self.render(base)
        self.baseline_ms = round(measure(self.true_ms(base), rng), 6)
        self.best, self.best_ms, self.best_step, self.best_code = base, self.baseline_ms, 0, self.baseline_code
        self.tried.add(base.key)
        self.elapsed = 0.0

    # -- helpers --------------------------------------------------------------------
    def render(self, c: Candidate) -> str:
        return self.m.render(c.variant, c.params, self.task, c.bug)

    def sim(self, c: Candidate):
        return simulate(self.m, c.variant, c.params, self.task)

    def true_ms(self, c: Candidate) -> float:
        if c.key not in self._true_ms:
            r = self.sim(c)
            self._true_ms[c.key] = r.time_ms if r.ok else None
        return self._true_ms[c.key]

    def runs(self, c: Candidate) -> bool:
        return self.true_ms(c) is not None

    def carry(self, variant: Variant) -> dict:
        """Params for a new rung: keep the current value where the name and value exist."""
        params = variant.defaults()
        for p in variant.params:
            v = self.best.params.get(p.name)
            if v in p.values:
                params[p.name] = v
        return params

    def neighbours(self, variant: Variant, params: dict, names: list, spread: int) -> list[dict]:
        out = []
        for name in names:
            p = variant.param(name)
            i = p.values.index(params[name])
            for j in range(max(0, i - spread), min(len(p.values), i + spread + 1)):
                if j != i:
                    out.append({**params, name: p.values[j]})
        return out

    def fresh(self, options: list[Candidate]) -> list[Candidate]:
        return [c for c in options if c.key not in self.tried and self.runs(c)]

    # -- proposals ------------------------------------------------------------------
    def propose_structural(self) -> Candidate | None:
        if self.rung + 1 >= len(self.rungs):
            return None
        self.rung += 1
        v = self.rungs[self.rung]
        c = Candidate(v, self.carry(v))
        return c if self.runs(c) else Candidate(v, v.defaults())

    def propose_sweep(self, spread: int) -> Candidate | None:
        v = self.best.variant
        names = [p.name for p in v.params if len(p.values) > 1]
        if not names:
            return None
        self.rng.shuffle(names)
        options = [Candidate(v, p) for p in self.neighbours(v, self.best.params, names[:1], spread)]
        options = self.fresh(options) or self.fresh(
            [Candidate(v, p) for p in self.neighbours(v, self.best.params, names, spread)])
        return self.rng.choice(options) if options else None

    def propose_joint(self) -> Candidate | None:
        v = self.best.variant
        names = [p.name for p in v.params if len(p.values) > 1]
        if len(names) < 2:
            return self.propose_sweep(2)
        for _ in range(12):
            params = dict(self.best.params)
            for name in self.rng.sample(names, self.rng.randint(2, len(names))):
                params[name] = self.rng.choice(v.param(name).values)
            c = Candidate(v, params)
            if self.fresh([c]):
                return c
        return self.propose_sweep(1)

    def grid(self, variant: Variant) -> list[Candidate]:
        """Every parameter combination of a rung, built once per episode."""
        if variant.tag not in self._grids:
            self._grids[variant.tag] = [Candidate(variant, p) for p in param_grid(variant)]
        return self._grids[variant.tag]

    def propose_untried(self) -> Candidate | None:
        """When the neighbourhood is exhausted: any untried config of the current rung, then
        of the rungs below it (an older structure may win with other parameters)."""
        for v in [self.best.variant] + list(reversed(self.rungs[:self.rung + 1])):
            options = self.fresh(self.grid(v))
            if options:
                return self.rng.choice(options)
        return None

    def propose_compile_error(self):
        """(kind, candidate, error text) for a compile-error step, or None."""
        rng = self.rng
        modes = []
        untried_gated = [v for v in self.gated if (v.tag, ()) not in self.tried]
        if untried_gated:
            modes += ["arch"] * 3
        overflow = self.overflow_candidates()
        if overflow:
            modes += ["smem"] * 2
        modes.append("typo")
        mode = rng.choice(modes)
        if mode == "arch":
            v = rng.choice(untried_gated)   # any newer feature the GPU lacks: wgmma, fp8, block-scaled mma...
            self.tried.add((v.tag, ()))
            c = Candidate(v, v.defaults())
            return "structural", c, self.sim(c).error
        if mode == "smem":
            c = rng.choice(overflow)
            self.tried.add(c.key)
            return ("joint" if sum(c.params[k] != self.best.params.get(k) for k in c.params) > 1
                    else "param_sweep"), c, self.sim(c).error
        base = self.propose_structural() or self.propose_sweep(1) or self.best
        c = Candidate(base.variant, base.params, typo=rng.randrange(1000))
        broken = break_identifier(self.render(c), self.m.impl, c.typo)
        if broken is None:
            return None
        kind = "structural" if base.variant is not self.best.variant else "param_sweep"
        return kind, c, broken[1]

    def overflow_candidates(self) -> list[Candidate]:
        """Configs of the current rung that exceed the shared-memory cap."""
        v = self.best.variant
        if v.tag not in self._overflows:
            # clear overflows only: near the cap the smem model is an estimate, looser for Triton's
            # LDS allocation on gfx942 (its pipeliner buffers differently from the NVIDIA backend)
            cap = smem_cap(v, self.m, self.task.gpu)
            margin = 1.6 if self.m.impl == "triton" and self.task.is_hip else 1.25
            self._overflows[v.tag] = [c for c in self.grid(v) if self.sim(c).error_class == "smem"
                                      and self.sim(c).smem_bytes >= margin * cap]
        return [c for c in self._overflows[v.tag] if c.key not in self.tried]

    def propose_wrong(self):
        """(kind, candidate) carrying a bug that compiles but computes the wrong thing."""
        nxt = self.rungs[self.rung + 1] if self.rung + 1 < len(self.rungs) else None
        if nxt is not None and nxt.bugs and self.rng.random() < 0.5:
            self.rung += 1
            return "structural", Candidate(nxt, self.carry(nxt), bug=self.rng.choice(nxt.bugs))
        v = self.best.variant
        if not v.bugs:
            v = next((r for r in reversed(self.rungs[:self.rung + 1]) if r.bugs), None)
            if v is None:
                return None
        c = self.propose_sweep(1) if v is self.best.variant else None
        params = c.params if c else (self.best.params if v is self.best.variant else v.defaults())
        return "param_sweep", Candidate(v, params, bug=self.rng.choice(v.bugs))

    def choose_kind(self, k: int) -> str:
        rng, frac = self.rng, k / self.n_steps
        rungs_left = self.rung + 1 < len(self.rungs)
        if rungs_left and (k == 1 or frac > 0.55 or rng.random() < 0.5):
            return "structural"
        if frac > 0.75:
            return rng.choices(("endgame", "rebench", "param_sweep"), (0.75, 0.1, 0.15))[0]
        return rng.choices(("param_sweep", "joint", "rebench"), (0.6, 0.32, 0.08))[0]

    # -- the loop -------------------------------------------------------------------
    def run(self) -> list[dict]:
        steps = []
        retry: Candidate | None = None
        for k in range(1, self.n_steps + 1):
            record = self.step(k, retry)
            retry = record.pop("_retry")
            steps.append(record)
        return steps

    def step(self, k: int, retry: Candidate | None) -> dict:
        rng = self.rng
        u = rng.random()
        kind, cand, error, status = None, None, None, "ok"
        if u < self.p_compile:
            got = self.propose_compile_error()
            if got:
                kind, cand, error = got
                status = "compile_error"
        elif u < self.p_compile + self.p_wrong:
            got = self.propose_wrong()
            if got:
                kind, cand = got
                status = "wrong_result"
                error = feedback.mismatch_text(cand.bug, self.m, self.task, rng)
        if cand is None and retry is not None and rng.random() < 0.8:
            kind, cand = retry[0], retry[1]          # fix the previous failure
        if cand is None:
            kind = self.choose_kind(k)
            cand = {"structural": self.propose_structural, "param_sweep": lambda: self.propose_sweep(2),
                    "joint": self.propose_joint, "endgame": lambda: self.propose_sweep(1),
                    "rebench": lambda: self.best}[kind]()
            if cand is None and kind != "structural":
                cand = self.propose_untried()
            if cand is None:
                kind, cand = "rebench", self.best
        return self.evaluate(k, kind, cand, status, error)

    def evaluate(self, k: int, kind: str, cand: Candidate, status: str, error: str | None) -> dict:
        rng = self.rng
        code = self.best_code if kind == "rebench" else self.render(cand)
        if cand.typo is not None:
            code = break_identifier(code, self.m.impl, cand.typo)[0]
        r = self.sim(cand)
        time_ms, kept, retry = None, False, None
        if status == "ok" and not r.ok:            # a structural rung that fails to build here
            status, error = "compile_error", r.error
        if status == "ok":
            time_ms = round(measure(r.time_ms, rng), 6)
            kept = kind != "rebench" and time_ms < self.best_ms
        elif cand.bug or cand.typo is not None:
            retry = (kind, Candidate(cand.variant, cand.params))
        if status == "ok":
            self.tried.add(cand.key)
        prev_best = self.best_ms
        if kept:
            self.best, self.best_ms, self.best_step, self.best_code = cand, time_ms, k, code
        self.elapsed += self.step_seconds(kind, status)
        record = {
            "step": k, "kind": kind, "tag": cand.variant.tag, "params": dict(cand.params),
            "bug": cand.bug, "typo": cand.typo, "code": code,   # code = render(tag, params, bug) + typo
            "status": status, "time_ms": time_ms, "smem_bytes": r.smem_bytes, "regs": r.regs,
            "error": error, "kept": kept, "best_ms": self.best_ms, "elapsed_s": round(self.elapsed),
            "_retry": retry, "_prev_best": prev_best, "_best_step": self.best_step,
        }
        return record

    def step_seconds(self, kind: str, status: str) -> float:
        """Simulated wall time of a step: writing the candidate, compiling, benchmarking."""
        rng = self.rng
        write = {"structural": rng.uniform(240, 900), "joint": rng.uniform(90, 300),
                 "rebench": rng.uniform(10, 30)}.get(kind, rng.uniform(45, 180))
        compile_s = rng.uniform(8, 40) if self.m.impl == "cuda" else rng.uniform(3, 15)
        bench = 0.0 if status == "compile_error" else rng.uniform(6, 25)
        return write + (0.0 if kind == "rebench" else compile_s) + bench
