"""The agent policy: propose -> build -> check -> measure -> keep or revert, until the agent's
own evidence says nothing left is worth a step, or its step budget runs out.

The agent edits the current best, and every step has a reason the state supports: climb to a
rung above the best not yet tried whose roofline could beat the best; take the next step of a
coordinate search around the best (a Line: one parameter at a time, walked on while it pays and
the other way once it loses, up to search.spread values past ties; then up to search.joints
joint moves of two near-tied parameters), or around a climb that lost by less than
search.contender; re-measure the best and the candidate in turn to settle a close call; repair
the failure it just made (the same rung, fixed); ablate techniques of the best (search.ablations
of them, each once), onto rungs below not measured slow. It never returns to a rung measured at
SLOW_RUNG x the best, never proposes code already measured except to settle a close call, and
never makes a bug again. A long session (search.stepwise) builds its kernel up: toward a rung that
raises the ceiling it climbs one rung at a time, walking on each the parameters its profile points
at while they pay; with search.probe_all every parameter of the best is probed both ways, and
(search.interact) interacting pairs (INTERACT_LOSS; search.across: warps x the block a CTA covers, ACROSS) are
tried jointly, before patience may end the search; a joint move pairs only ways that each came close alone
(search.joint_ways), and a way walked past a measurement faster inside the noise is a tie, not a loss (search.tie_wins).
A climb that lost by under search.contender is written once more at the best's parameters once the best's tuning
changed the ones it carries over (search.retry: Episode.retries). Once one knob at a time is exhausted (patience
spent, or the neighbourhood flat), a best still COUPLED_HEADROOM x its floor gets up to search.coupled joint moves
of a coupled pair its profile points at, each half measured alone and close (Episode.coupled_moves). A rung below
the best measured within search.runner_up of it (an ablation at the best's parameters) is tuned as a contender too.
A rewrite that overflowed shared memory or the register file is repaired on its rung (one parameter backed off) and
measured. It stops when nothing is open and the best is within search.roofline_near of its floor (the roofline
plus one launch) or
launch-bound (one launch is LAUNCH_BOUND of its time: only a rewrite that launches fewer kernels
or moves fewer bytes is tried, no tune inside the noise), or no rung is left worth climbing, the
neighbourhood of the best was probed (Episode.probed) and either every parameter of the best is
settled or `patience` steps in a row found nothing (its evidence that the rest will not either;
the nearer the floor, the fewer: HEADROOM), or (search.flat_stop) every parameter of the best was probed
and moved nothing past the noise, or lost both ways (Episode.flat): a probe inside the noise settles its
parameter without the mirror probe. When the last candidate it measured lost by more than
RESTORE x, or failed, the workspace holds that slower or broken code: it restores the best and runs it once
more before it stops (Episode.restore), so a finished session ends on the kernel it reports. A limit failure
is never its last word: where the search would end on one, the change is backed off until it fits.

Each episode draws its own habits (how often it skips a rung, tries the expert rung first,
ablates, tunes jointly, how patient it is), so ladders are walked in many orders. Every
benchmark is one noisy run in a Ledger: a candidate is kept only when it beats the best beyond
the noise; a candidate faster than the best inside the noise is a close call, re-measured only
while the difference could still cross the keep threshold (SETTLE_REACH): the best and the candidate
once each at most, the one with fewer runs first, then decided. Failures are the ones engineers make
in the change they were about to make anyway: a typo or a risky transformation (fixed and
retried next), an arch-gated rewrite once the ladder reaches it, a tile too big for shared memory.

Four RNG streams (policy, noise, clock, wording) keep trajectories independent of wording.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import itemgetter

from . import feasibility, grid_limits, knobs, messages, slips
from .clock import Clock
from .ledger import Ledger, beats, required_gain
from .limits import Limits, demand, overflow, rung_failing
from .grids import rung_grid
from .memo import Made
from .mutations import find_typo, typo_sites
from .slip_memory import SlipMemory, site_lines as slip_sites
from .ops.base import OpModule, Task, Variant
from .profiles import Search
from .references import reference_ms
from .rerender import with_typo     # slips.apply, cached: a slip drawn is applied again when evaluated (and by qa)
from .schema import Step
from .calibration import FIT
from .profiler import bound_of
from .sim import (LAUNCH_CLASSES, blocks_per_sm, failure, launch_failure, measure, modelled_launch, noise_cv, op_cost,
                  roofline_floor_ms, roofline_terms, scan_failure, simulate, smem_cap, writable)
from .tasks import carry, starting_rung

STREAMS = ("policy", "noise", "clock", "wording")
# a launch-bound or opt-in slip (knobs.SLIPS) is made once a session at most: its launch failure names what was
# wrong (too many resources for __launch_bounds__, no opt-in past 48 KB), and the engineer knows better after
# (at two a session, 34 of the 77 sessions of kernelinfer seed 7171 that made the bound slip made it again)
SLIP_TIE = 4          # a slip kind with a site in the lines a change wrote: this much likelier
AUTHOR_FAILURES = (*slips.FAILURES, "mismatch", "fault")   # the author's own: fixed at the next step
SLOW_RUNG = 2.0       # a rung whose best measurement is this many times the best is not gone back to
CLIFF_LOSS = 1.0      # a way that lost by this much (2x the point) stays shut even once a coupled parameter moved: a new
                      # balance turns a loss of tens of percent (num_stages +1 at +27%), not a cliff (kernelinfer s16262-000000:
                      # num_warps 4 -> 2 on the persistent layernorm lost 14.6x, asked again after programs_per_sm moved: 15.1x)
SHUT_SIGMAS = 2.0     # a tuning direction that lost by more than this many sigma of the noise (a clear loss) stays shut
                      # when a new best of the same rung re-opens the search (engine.Line.moved)
SPILLS = 1.5          # a config whose code holds a thread this many times the registers the compiler gave it spilled
                      # a third of them or more: its time is the spill's, not its rung's (Episode.unspill). Rewrites
                      # left after such a measurement alone, kernelinfer seeds 7171 + 7272 (600 sessions): 16, at
                      # 1.5-4.8x the cap (a back-off that kept __launch_bounds__(T, 4): 40 registers); their rungs'
                      # fastest configs spill 1.0-1.15x
RAISES = 1.5          # a rung whose technique's floor is this much under the best's own is climbed to before tuning
HEADROOM = 3.0        # a best this far from its floor gets the engineer's whole patience (engine.patience)
# the parameters a profiler's verdict on the best points at first, by the names the ladders give
# them: an under-filled GPU (fewer CTAs than SMs) -> split factors and persistent grids; compute-
# bound -> tile shapes, stages, warps; memory-bound -> vector width, unrolling, rows and threads
# per CTA (the loads in flight)
POINTS_AT = {
    "occupancy": re.compile(r"split|per_sm|min_blocks|tiles_per|persistent|partition", re.I),
    "compute": re.compile(r"^(b[mnk]|tm|tn|block_[mnkd]|tile.*|.*stages|.*warps.*|group.*|swizzle.*)$", re.I),
    "memory": re.compile(r"unroll|vec|width|rows|items|strip|chunk|^(threads|block|block_[xyrt]|tokens.*)$", re.I),
}
# pairs across those groups that interact as much: the warps of a CTA and the block of elements or rows
# it covers (elements per thread = block / threads: a Triton BLOCK x num_warps, a CUDA rows x warps)
ACROSS = ((re.compile(r"warps", re.I), re.compile(r"^(block|block_[a-z]+|rows.*|items.*|tokens.*)$", re.I)),)
INTERACT_LOSS = 0.25  # interacting parameters each within this of the best alone are tried together (propose_joint)
RESTORE = 2.0         # the search ends on a candidate this much slower than the best (as SLOW_RUNG): the best is restored and re-run
COUPLED_HEADROOM = 1.5  # a joint move of coupled knobs (Episode.coupled_moves) only where the floor is a third of the best's
                      # time or more away: nearer, a pair of halves that each lost alone is a blind bet (default seeds
                      # 7171 + 7272, 300 each: 16 of 259 such moves kept at any distance, 13 of 165 from 1.5x)
REACH_TUNES = 2       # a contender's tunes in a row without a gain before its evidence may say it cannot reach the best
REACH_FLOOR = 0.1     # ... and never while its gap to the best is under this: the median gain of a kept one-knob tune of
                      # the best (fresh seeds 15151 / 15252 / 15353 on 90dadf3: 8.4% default, 8.6% kernelinfer; p75 17%)
CONTENDER_TIES = 2    # a contender whose tunes land this many times in a row inside the noise of its own point is a tie
                      # with what it is: its parameters do not move it, and it is left (default seed 8181 episode 30:
                      # register_cached tuned and re-measured eight times at -2..-7% of a best a keep needs -6..-8.5% of)
SETTLE_REACH = 1.0    # a close call is re-measured (the best and the candidate once each at most) only while its gain is
                      # within this many standard deviations of what those runs move it from the keep threshold they set
ANSWERS = 0.97        # a rewrite answers the printed bound where it cuts the bound's roofline term by 3% or more (moves_toward)
STAGED = re.compile(r"stages", re.I)   # the pipeline's depth: what a limit failure's repair lowers first (propose_backoff)
LAUNCH_BOUND = 0.5    # a best at most 2x one launch's overhead: the profiler shows the kernel itself is at most
                      # half the time, so launch knobs and tiles cannot move it past the noise; only a rewrite
                      # that launches fewer kernels or moves fewer bytes can


def spilled(m: OpModule, variant: Variant, params: dict, task: Task, regs: int) -> bool:
    """A build of `variant` at `params` that ran at `regs` registers a thread spilled much of them: its code
    holds a thread SPILLS x those registers or more (ptxas -v's spill stores, Triton's n_spills). What its code
    holds is the launch model's demand without `__launch_bounds__`' minimum blocks (the cap they set is what the
    build ran at). Modules that simulate themselves model no spill. Episode.spills; scripts/read_trajectory.py
    reads a step as an unspill only after a measurement this says spilled."""
    if hasattr(m, "simulate"):
        return False
    own = {n: x for n, x in params.items() if n != "min_blocks"}
    return knobs.launch(m, variant, own, task).regs >= SPILLS * regs


@dataclass(frozen=True)
class Candidate:
    variant: Variant
    params: dict
    bug: str | None = None        # a risky transformation written into the code
    typo: int | None = None       # slips pick (kind and site): a compile error the author wrote

    @cached_property
    def key(self):
        return (self.variant.tag, tuple(sorted(self.params.items())))

    def clean(self) -> "Candidate":
        return Candidate(self.variant, self.params)


@dataclass
class Line:
    """A coordinate search around one point (the best, or a contender rung's best measurement):
    which parameters are settled there (both ways lost or closed; the smallest loss seen as the
    margin), which way each one was walked first, the parameter that last paid off."""
    at: Candidate
    ms: float                                   # the point's recorded time
    rank: dict = field(default_factory=dict)    # the engineer's order of the rung's parameters
    settled: dict = field(default_factory=dict)
    lean: dict = field(default_factory=dict)
    focus: str | None = None
    joints: int = 0                             # joint moves tried around this point
    coupled: int = 0                            # joint moves of coupled knobs tried around this point (propose_coupled)
    left: int = 0                               # steps left (a contender's search)
    shut: dict = field(default_factory=dict)    # name -> {direction: loss} of ways that lost beyond the noise (SHUT_SIGMAS)
    ties: int = 0                               # a contender's tunes in a row inside the noise of its point (CONTENDER_TIES)
    dry: int = 0                                # a contender's tunes in a row that did not gain past the noise (out_of_reach)

    def moved(self, to: Candidate, ms: float, reprobe: bool = False, across: bool = False) -> "Line":
        """The search at a better point of the same rung: the parameters that changed are walked
        on (the one that paid first, in the direction that paid); a settled one stays settled
        only if it lost there by more than the step just gained, as a near-tie might now win
        (`reprobe`: none stays settled, every neighbour of the new point is a new configuration,
        except a way of an unchanged parameter that lost beyond the noise, SHUT_SIGMAS sigma: a gain
        on a parameter it does not interact with does not turn that around, and an engineer does not
        walk it again). A way shut while a coupled parameter (`coupled`, `across` as search.across:
        stages with the tile whose buffers they hold, warps with the tile or block they cover) had
        another value is open again (unless it lost by CLIFF_LOSS or more: a cliff, not a balance): the loss was
        measured at a balance the new best no longer has
        (default seeds 9191 / 9292 / 9393 on 3e4e6c8, 900 episodes: 40 stops left a one-value neighbour
        gaining past the noise on a search that had moved it, 16 of them checked with a list at hand --
        of those, 9 a way shut before a coupled parameter moved: num_stages +1 shut at +27% with BLOCK_K
        32, 19% faster at BLOCK_K 64)."""
        gain = self.ms / ms - 1.0
        changed = [n for n in to.params if to.params[n] != self.at.params.get(n)]
        settled = {n: m for n, m in self.settled.items() if n not in changed and m > gain and not reprobe}
        rebalanced = {n for n in self.shut if any(coupled(n, c, across) for c in changed)}
        shut = {n: (ways if n not in rebalanced else {d: x for d, x in ways.items() if x >= CLIFF_LOSS})
                for n, ways in self.shut.items() if ways and n not in changed}
        shut = {n: ways for n, ways in shut.items() if ways}
        return Line(to, ms, self.rank, settled, self.lean, changed[0] if len(changed) == 1 else None,
                    left=self.left, shut=shut)


@dataclass(frozen=True)
class Habits:
    """How one simulated engineer works (drawn per episode from the policy stream)."""
    climb: float        # probability of a climb before the search around the best is settled (a systematic
                        # engineer gets the most out of a version before rewriting it; once settled, it climbs)
    skip: float         # probability of skipping the next rung
    expert_first: bool  # try the top rung right away
    ablate: float       # probability, once tuning stalls, of an ablation (search.ablations at most)
    joint: float        # probability of the joint move once the search around a best is settled
    confirm: float      # probability of settling a close call (re-measuring both) rather than moving on
    patience: int       # steps in a row without a keep, no rung left, before declaring convergence

    @classmethod
    def draw(cls, rng, patience: tuple = (14, 32), skip: tuple = (0.3, 0.7), expert: float = 0.15) -> "Habits":
        return cls(climb=rng.uniform(0.0, 0.1), skip=rng.uniform(*skip), expert_first=rng.random() < expert,
                   ablate=rng.uniform(0.05, 0.35), joint=rng.uniform(0.15, 0.45), confirm=rng.uniform(0.75, 1.0),
                   patience=rng.randint(*patience))


def baseline_rung(module: OpModule, task: Task, search: Search) -> Variant:
    """The rung an episode starts from (tasks.starting_rung): within search.baseline_cap of the
    fastest rung and search.eager_cap of the PyTorch eager reference (a fused program's own).
    Found once a process for each task and pair of caps (_BASELINES)."""
    key = baseline_key(module, task, search.baseline_cap, search.eager_cap)
    found = _BASELINES.get(key)
    if found is None:
        found = keep_baseline(key, module, task, _baseline_rung(module, task, search))
    return found[2]


# (module, task, caps) -> (the module, the task's GPU record, its baseline rung): the same task's baseline is asked
# by the plan (kernelinfer's room checks, plan.has_room: ~4,000 menu tasks), by its episodes (Episode.__init__),
# its held-out row (holdout.holdout_rows) and validate's rebuild, and each asks the simulator of every rung of the
# ladder at its defaults (their answers long evicted from the candidate caches by then). The entry keeps the
# module and the GPU record alive, so their identities in the key are never another object's.
_BASELINES: dict = {}
BASELINES_MAX = 1 << 13       # a profile's menu tasks (kernelinfer's plan asks ~4,000)


def baseline_key(module: OpModule, task: Task, baseline_cap: float, eager_cap: float) -> tuple:
    return id(module), id(task.gpu), task.module, task.dtype, task.shape, baseline_cap, eager_cap


def keep_baseline(key: tuple, module: OpModule, task: Task, rung: Variant) -> tuple:
    """Keep `rung` as the baseline of `key` (baseline_key): baseline_rung's answer, or one a forked worker
    found (plan.rooms_ahead)."""
    if len(_BASELINES) >= BASELINES_MAX:
        _BASELINES.clear()
    found = _BASELINES[key] = (module, task.gpu, rung)
    return found


def _baseline_rung(module: OpModule, task: Task, search: Search) -> Variant:
    """baseline_rung's answer, computed."""
    eager = module.torch_ms(task)[0] if hasattr(module, "torch_ms") else reference_ms(module, task)
    return starting_rung(module, task, search.baseline_cap, eager, search.eager_cap)


def draw_steps(rng, lo: int, hi: int, mean: float) -> int:
    """Steps per episode: lo + Gamma(k=2.5) with the requested mean, capped at hi."""
    extra = rng.gammavariate(2.5, (mean - lo) / 2.5) if mean > lo else 0.0
    return int(min(hi, lo + round(extra)))


def _offsets(n: int, dist: int, most: int = 3):
    """Integer vectors of length n with |o|_1 == dist and at most `most` nonzero entries.

    >>> sorted(_offsets(2, 1))
    [(-1, 0), (0, -1), (0, 1), (1, 0)]
    """
    if n == 0:
        if dist == 0:
            yield ()
        return
    yield from ((0, *rest) for rest in _offsets(n - 1, dist, most))
    if most:
        for d in range(1, dist + 1):
            for rest in _offsets(n - 1, dist - d, most - 1):
                yield (d, *rest)
                yield (-d, *rest)


def coupled(a: str, b: str, across: bool = True) -> bool:
    """Two parameter names whose balance interacts: one profiler group (POINTS_AT), or (`across`) a pair ACROSS them."""
    return any(p.search(a) and p.search(b) for p in POINTS_AT.values()) \
        or across and any(x.search(a) and y.search(b) or x.search(b) and y.search(a) for x, y in ACROSS)


def moves_toward(m: OpModule, task: Task, here: Candidate, there: Candidate, bound: str) -> bool:
    """`there` gains on `here` on the side `bound` names (Episode.bottleneck): more CTAs (occupancy), fewer
    launches or ANSWERS less of the model's memory term (memory), ANSWERS less of its compute term (compute), the
    terms of the roofline without calibration (sim.roofline_terms: the technique's own bytes, bytes in flight,
    datapath and tiles, what the engineer reads off the code)."""
    a, b = modelled_launch(m, here.variant, here.params, task), modelled_launch(m, there.variant, there.params, task)
    if bound == "occupancy":
        return b.grid > a.grid
    (ca, ma, _), (cb, mb, _) = roofline_terms(m, here.variant, a, task), roofline_terms(m, there.variant, b, task)
    if bound == "memory":
        return mb <= ANSWERS * ma or b.launches < a.launches
    return cb <= ANSWERS * ca


def moves_against(m: OpModule, task: Task, here: Candidate, there: Candidate, bound: str) -> bool:
    """`there` asks more of what `bound` names than `here` does: fewer CTAs (occupancy); as many launches or more
    and more of the memory term by 1 / ANSWERS (memory: more bytes, fewer in flight); more of the compute term by
    1 / ANSWERS (compute). A rewrite that makes the printed bottleneck worse on its own roofline terms (a split-row
    softmax writing partials, 1.2-1.8x the bytes of a memory-bound whole-row best), the reverse of moves_toward."""
    a, b = modelled_launch(m, here.variant, here.params, task), modelled_launch(m, there.variant, there.params, task)
    if bound == "occupancy":
        return b.grid < a.grid
    (ca, ma, _), (cb, mb, _) = roofline_terms(m, here.variant, a, task), roofline_terms(m, there.variant, b, task)
    if bound == "memory":
        return ANSWERS * mb > ma and b.launches >= a.launches
    return ANSWERS * cb > ca


def kind_of(cand: Candidate, best: Candidate, late: bool) -> str:
    """What changed relative to the best (schema.KINDS)."""
    if cand.variant.tag != best.variant.tag:
        return "structural"
    changed = [k for k in cand.params if cand.params[k] != best.params.get(k)]
    if not changed:
        return "rebench"
    if len(changed) > 1:
        return "joint"
    p = knobs.param(cand.variant, changed[0])
    adjacent = abs(p.values.index(cand.params[changed[0]]) - p.values.index(best.params[changed[0]])) == 1
    return "endgame" if late and adjacent else "param_sweep"


class Episode:
    """One trajectory on one task; `run()` returns its Steps and why it ended."""

    def __init__(self, module: OpModule, task: Task, streams: dict, budget: int, p_compile: float,
                 p_wrong: float, min_steps: int = 1, search: Search = Search(), clock: Clock | None = None):
        self.m, self.task = module, task
        self.rng, self.noise, self.clock, self.wording = (streams[s] for s in STREAMS)
        self.budget, self.min_steps = budget, min_steps
        self.p_compile, self.p_wrong = p_compile, p_wrong
        self.search, self.timing = search, clock or Clock()
        self.habits = Habits.draw(self.rng, (search.patience_min, search.patience_max),
                                  (search.skip_min, search.skip_max), search.expert_first)
        if search.thorough:          # a long session settles every close call it sees
            self.habits = replace(self.habits, confirm=1.0)
        gpu = task.gpu
        self.ladder = [knobs.extend(v, module.impl, module.render(v, v.defaults(), task), search.knobs, gpu)
                       for v in module.variants] if search.knobs else list(module.variants)
        base = self.ladder[module.variants.index(baseline_rung(module, task, search))]
        above = [v for v in self.ladder[self.ladder.index(base):] if v.offered(task.dtype)]
        # a rung whose accesses the task's rows cannot align is no rung here (feasibility.violation)
        self.rungs = [v for v in above if not (v.needs - gpu.features)
                      and feasibility.violation(module, v, v.defaults(), task) is None]
        self.gated = [v for v in above if v.needs - gpu.features]
        self.pos = {v.tag: i for i, v in enumerate(self.ladder)}
        self._true_ms, self._codes, self._grids, self._limits, self._needs, self._floors = {}, {}, {}, {}, {}, {}
        self._configs, self._near, self._scanned, self._host = {}, {}, {}, {}
        self.base = Candidate(base, base.defaults())
        self.baseline_code = self.code(self.base)
        self.baseline_ms = round(measure(self.true_ms(self.base), self.noise), 6)
        self.book = Ledger(self.baseline_code, self.baseline_ms)
        self.best = self.base
        self.measured: set = {self.baseline_code}     # codes benchmarked at least once
        self.tried: set = {self.base.key}              # configs built (ok or failed to build)
        self.rung_tried: set = {base.tag}
        self.fixed: set = set()                        # bugs made (and fixed): never made again, on any rung
        self.rung_ms: dict = {base.tag: self.baseline_ms}    # fastest measurement of each rung
        self.sane_ms: dict = {}                        # fastest measurement of each rung at a config that did not spill
        self.spilled_at: dict = {}                     # rung -> its fastest spilled config, while no other measured it
        self.unspilled: set = set()                    # rungs written again once after spilled measurements (unspill)
        self.raised: set = set()                       # rungs first measured at a limit failure's back-off (retile)
        self.retiled: set = set()                      # rungs written again once at the best's tiles (retile)
        self.looks: Counter = Counter()                # ok measurements of each rung so far
        self.last_ok: str | None = None                # the rung the last step measured (None: it failed)
        self.ablated: set = set()                      # rungs below the best tried (search.ablations at most, but for
                                                       # the rungs a descent wrote, which fill it too: descended)
        self.descended: set = set()                    # rungs written by a descent (Episode.descent): not ablations
        self.line = self.new_line(self.base, self.baseline_ms)   # the coordinate search around the best
        self.contender: Line | None = None             # a rung that came close: tuned before it is judged
        self.shelved: list = []                        # contenders whose steps ran out unsettled (search.revisits)
        self.lost_at: dict = {}                        # rung above the best -> (its first time, the best's then, the
                                                       # best's params then): a climb that lost (propose_retry)
        self.retried: set = set()                      # rungs retried at the best's new parameters (once each)
        self.knob_gain: dict = {}                      # rung -> the largest gain a single knob step gave on it (knob_step)
        self.pending: Candidate | None = None          # a failed slip/bug attempt to fix
        self.over: tuple | None = None                 # (candidate, resource) of the last limit failure
        self.limits = Limits()                         # what failed a limit, features missing here
        self.slip_memory = SlipMemory()                # (kind, line) of each slip made: not made again
        self.slipped = set()                           # bound / optin slips made (the engineer learns each once)
        self.close: Candidate | None = None            # faster than the best, inside the noise: being settled
        self.calls: set = set()                        # (the best's key, a rung) close calls settled: each pair once
        self.resettled: set = set()                    # sides of the close call re-measured (True: the best)
        self.last_ms: float | None = None              # the last measured candidate's time
        self.restored = False                          # the best restored and re-run at the end (Episode.restore)
        self.descending = False                        # the best was found below the rung before it (Episode.descent)
        self.last_failed = False                       # the last step failed to build or to check
        self.failed_code = ""                          # the code of the last step that failed (Episode.fix_lines)
        self.leaps: bool | None = None                 # stepwise: this engineer writes the ceiling-raising rung straight away (Episode.leap)
        self.stale = 0
        self.trend: tuple | None = None                # (parameter, direction) of the last keep on the best's rung
        self.owed = 0                                  # limit-type compile failures still to make
        self.bugs_owed = 0                             # bugs drawn on tunes with none on their lines: the next rewrite's
        self.slips_owed = 0                            # slips drawn on tunes with no site on their lines: the next rewrite's
        self.pace = self.timing.session_pace(self.clock)
        self.elapsed = self.timing.setup_seconds(self.clock)     # reading the task, profiling the baseline
        self.end = "budget"
        self.stop: str | None = None                   # the rule that ended the search (stop_rule, or `exhausted`)
        self.time_budget_s = search.time_budget_h * 3600    # 0: no time budget

    # -- helpers --------------------------------------------------------------------
    def code(self, c: Candidate) -> str:
        key = (c.key, c.bug)
        if key not in self._codes:
            self._codes[key] = knobs.render(self.m, c.variant, c.params, self.task, c.bug)
        return self._codes[key]

    def sim(self, c: Candidate):
        return simulate(self.m, c.variant, c.params, self.task)

    def true_ms(self, c: Candidate) -> float | None:
        if c.key not in self._true_ms:
            r = self.sim(c)
            self._true_ms[c.key] = r.time_ms if r.ok else None
        return self._true_ms[c.key]

    def fresh(self, c: Candidate) -> bool:
        """Untried, builds and runs here, and its code is new."""
        return c.key not in self.tried and self.writable(c) and self.true_ms(c) is not None \
            and self.code(c) not in self.measured

    def writable(self, c: Candidate) -> bool:
        """An engineer would write `c` for this task (sim.writable): no register tile too big to build."""
        return writable(self.m, c.variant, c.params, self.task)

    def grid(self, variant: Variant) -> list[Candidate]:
        """Every config of a rung an engineer would write for this task."""
        if variant.tag not in self._grids:
            self._grids[variant.tag] = [c for c in self.configs(variant) if self.writable(c)]
        return self._grids[variant.tag]

    def configs(self, variant: Variant) -> list[Candidate]:
        """Every config of a rung, writable here or not (no model asked: see grid)."""
        if variant.tag not in self._configs:
            # (made as asked: a scan by groups or a near set asks a few of a grid's configs)
            self._configs[variant.tag] = Made(lambda p: Candidate(variant, p), rung_grid(variant).dicts)
        return self._configs[variant.tag]

    def near(self, v: Variant) -> list[Candidate]:
        """The configs of the best's rung `v` at most search.spread value-steps from the best's
        (distance), from each config's positions along the tunable parameters' values, found once."""
        key = (v.tag, self.best.key)
        if key not in self._near:
            grid = rung_grid(v)        # (grids.RungGrid: the positions and near sets, found once a process)
            at = tuple(vals.index(self.best.params[n]) for n, vals in zip(grid.names, grid.values))
            configs = self.configs(v)
            self._near[key] = [configs[i] for i in grid.near(at, self.search.spread)]
        return self._near[key]

    def carry(self, variant: Variant) -> dict:
        """Params for a new rung: keep the best's value where the name and value exist."""
        return carry(variant, self.best.params)

    def late(self, k: int) -> bool:
        return k > 0.75 * self.budget

    # -- proposals ------------------------------------------------------------------
    def ups(self) -> list[Variant]:
        """Runnable rungs above the best's, not tried yet, that could beat it: their technique's
        roofline (memory, or the compute path they use) plus one launch is more than
        search.roofline_near under the best; at the launch floor, only a rewrite that launches
        fewer kernels or moves fewer bytes than the best."""
        here = self.pos[self.best.variant.tag]
        return [v for v in self.rungs if self.pos[v.tag] > here and v.tag not in self.rung_tried and self.could_beat(v)]

    def could_beat(self, v: Variant) -> bool:
        """A rewrite onto `v` could beat the best: its floor is more than search.roofline_near
        under the best and, at the launch floor, it launches fewer kernels or moves fewer bytes.
        (An arch-gated rung on a datapath this GPU lacks, fp8 on an A100, has no floor here: the
        engineer reaching for it does not know that yet.)"""
        if self.task.gpu.peak_tflops.get(v.path) and self.near_floor(v):
            return False
        if self.traffic_floor_ms(v) >= self.book.best_ms and not self.answers(v):
            return False
        if self.host_bound():
            return self.m.host_us(v.tag) < self.m.host_us(self.best.variant.tag)
        return not self.launch_bound() or self.cuts_launches_or_bytes(v)

    def traffic_floor_ms(self, v: Variant) -> float:
        """The least time `v`, written as a climb writes it (the best's parameters carried over), could take: the bytes
        its own code moves (the op's bytes x Launch.traffic, what its profile's throughput line prints) at the GPU's
        DRAM peak, plus one launch. At or over the best's time, the rewrite cannot beat it whatever its efficiency:
        reader, seed 16161 on 90dadf3, moe_scatter_cuda on the MI300X, redundant_rank_one_launch (every block re-reads
        the routing table: 8.65 GB against the best's 336 MB) written at 22x the best; fresh seeds 15151 / 15252 on
        90dadf3, 34 climbs whose own traffic at peak was over the best's time, 1 of them ever kept. (floor_ms counts
        the op's least bytes, which every rung shares.) A rung that answers the printed bound is climbed whatever its
        carried traffic (could_beat): its other configurations may move fewer bytes, and the profile points at it (full
        seed 0 of cf2dd90, kernelstrain-s0-000013, gemm_int8_cuda RTX 4090: cp_async_split_k at the carried BM 32 was
        over the floor on a 64-CTA grid-bound best, and the climb went to a rung with fewer CTAs first)."""
        key = ("traffic_floor", v.tag, self.best.key)
        if key not in self._needs:
            launch = modelled_launch(self.m, v, self.carry(v), self.task)
            moved = op_cost(self.m, self.task).bytes * launch.traffic
            self._needs[key] = moved / (self.task.gpu.bw_tbs * 1e12) * 1e3 + self.launch_ms()
        return self._needs[key]

    def near_floor(self, v: Variant) -> bool:
        """The best runs within search.roofline_near of `v`'s floor: `v` cannot gain much on it."""
        return self.book.best_ms <= self.search.roofline_near * self.floor_ms(v)

    def floor_ms(self, v: Variant) -> float:
        """`v`'s roofline (memory, or the compute path it uses) plus one launch's overhead."""
        if v.path not in self._floors:
            self._floors[v.path] = roofline_floor_ms(self.m, self.task, v.path) + self.launch_ms()
        return self._floors[v.path]

    def launch_ms(self) -> float:
        """The overhead of one kernel launch on this GPU (what an empty kernel measures)."""
        return FIT.overhead_us(self.task.gpu.vendor, 1) * 1e-3

    def launch_bound(self) -> bool:
        """One launch's overhead is at least LAUNCH_BOUND of the best's time (SPEC §10: the
        engineer reads the profiler's kernel duration beside the measured time), or the best is a
        fused program's call that its host issues slower than its kernels run (host_bound)."""
        return self.launch_ms() >= LAUNCH_BOUND * self.book.best_ms or self.host_bound()

    def host_bound(self) -> bool:
        """A fused program's best call is host-bound (fused/timing.call_ms): its host issues it slower than
        its kernels run back to back, so the profile shows the GPU idle between them and no kernel
        parameter can move the call; only a rewrite whose call issues less (fewer launches, fewer PyTorch
        calls: host_us) can. Fused seed 8181 (60 episodes, abca2a0): the tail, 0.343 of the steps, was
        mostly one probe of each kernel parameter of such a best (up to seven), each inside the noise."""
        if not hasattr(self.m, "host_us"):
            return False
        key = self.best.key
        if key not in self._host:
            tag, gap = self.best.variant.tag, FIT.extra_launch_us[self.task.gpu.vendor] * 1e-3
            kernels = sum(t + gap for t in self.m.kernels_ms(tag, self.best.params, self.task))
            self._host[key] = self.m.host_us(tag) * 1e-3 >= kernels
        return self._host[key]

    def cuts_launches_or_bytes(self, v: Variant) -> bool:
        """`v` (at the parameters a climb carries over) launches fewer kernels or moves fewer
        bytes than the best: the two things that shorten a launch-bound kernel."""
        here = knobs.launch(self.m, self.best.variant, self.best.params, self.task)
        there = knobs.launch(self.m, v, self.carry(v), self.task)
        return there.launches < here.launches or there.traffic < here.traffic

    def rung_candidate(self, v: Variant) -> Candidate:
        c = Candidate(v, self.carry(v))
        if self.fresh(c):
            return c
        fallback = c if self.writable(c) else Candidate(v, v.defaults())
        return next((o for o in (Candidate(v, v.defaults()), *self.grid(v)) if self.fresh(o)), fallback)

    def propose_structural(self, k: int) -> Candidate | None:
        """A climb: the top rung first for an expert-first engineer, else the next rung up (or,
        skipping, any rung further up). A rung with nothing new to write is given up. Where the
        best's profile shows most of the GPU idle (at most a quarter as many CTAs as SMs), the climb is
        among the rungs up that launch at least twice its CTAs (busier), if any: a rewrite that
        leaves as many SMs idle does not answer what the profiler says (a split-KV decode kernel
        before an exp2 rewrite of the one CTA per batch row: 8 CTAs on 132 SMs)."""
        h, rng = self.habits, self.rng
        while self.ups():
            ups = self.climbable()
            if h.expert_first and k <= 2:
                pick = self.leap_target(ups)
            else:           # the next rung, or (skipping) any rung further up: engineers start differently
                pick = rng.choice(ups[1:]) if len(ups) > 1 and rng.random() < h.skip else ups[0]
            c = self.rung_candidate(pick)
            if self.fresh(c):
                return c
            self.rung_tried.add(pick.tag)
        return None

    def climbable(self) -> list[Variant]:
        """The rungs up a climb picks among: where the best leaves most of the GPU idle, those that launch at least
        twice its CTAs (busier), if any; of them, those that answer the bound the best's profile printed (answers),
        if any; else those that do not make it worse (against), if any: the climb's order follows the bottleneck."""
        ups = self.ups()
        if 4 * self.ctas(self.best) <= self.task.gpu.sms:
            ups = [v for v in ups if self.busier(v)] or ups
        return [v for v in ups if self.answers(v)] or [v for v in ups if not self.against(v)] or ups

    def against(self, v: Variant) -> bool:
        """A rewrite onto `v`, as a climb writes it (rung_candidate), makes the bound the best's profile printed worse
        on its own roofline terms (moves_against: more bytes where memory binds, more compute time where compute
        does, fewer CTAs where the grid leaves SMs idle). Where no rung up answers the bound, such a rung is climbed
        after the rungs that leave it alone: fresh seeds 15151 / 15252 / 15353 on 90dadf3 (300 default episodes,
        150 kernelinfer sessions each), climbs that answered the bound won later 87% of the time, those that left it
        alone 48%, those that made it worse 23% (39 of 168: rmsnorm_triton's persistent rung at 10x the memory term
        of a memory-bound multi-row best, 12x its time; split-row softmaxes after whole-row bests). A rung whose build
        fails here is not judged (the failure shows the engineer)."""
        key = ("against", v.tag, self.best.key)
        if key not in self._needs:
            c = self.rung_candidate(v)
            self._needs[key] = self.sim(c).ok and moves_against(self.m, self.task, self.best, c,
                                                                self.bottleneck(self.best))
        return self._needs[key]

    def leap_target(self, ups: list) -> Variant:
        """An expert-first engineer's first leap: the top rung of `ups` that writes kernels. A rung that
        captures another rung's call (OpModule.captures: a fused plan replayed from a CUDA graph) is
        recorded once the kernels it replays work, as a real engineer does, not written first."""
        kernels = [v for v in ups if v.tag not in self.m.captures]
        return kernels[-1] if kernels else ups[-1]

    def ctas(self, c: Candidate) -> int:
        """The CTAs `c` launches (what a profile shows beside the SM count)."""
        return knobs.launch(self.m, c.variant, c.params, self.task).grid

    def answers(self, v: Variant) -> bool:
        """A rewrite onto `v`, as a climb writes it (rung_candidate), answers what the best's profile printed as its
        bound (bottleneck, profiler.verdict): more CTAs where the grid leaves SMs idle; where memory binds, less
        time moving its bytes (fewer bytes, more of them in flight: the model's memory term) or fewer launches;
        where compute binds, less time on its FLOPs (a faster datapath, better tiles: the compute term), each by
        ANSWERS or more. A climb among the rungs up that answer it comes first: on a794ac7, 13% (default seed 8181)
        and 22% (kernelinfer) of climbs went to a rung that did not (a split-row softmax, two launches and
        partials, after a profile of 2,048 CTAs bound by memory), and such a climb won half as often as one
        that did. A rung whose build fails here is not judged (it answers: the failure shows the engineer)."""
        key = ("answers", v.tag, self.best.key)
        if key not in self._needs:
            c = self.rung_candidate(v)
            self._needs[key] = not self.sim(c).ok or moves_toward(self.m, self.task, self.best, c,
                                                                  self.bottleneck(self.best))
        return self._needs[key]

    def starves(self, at: Candidate, c: Candidate) -> bool:
        """`c`, a tune of `at`'s rung, launches fewer CTAs than `at` while `at`'s profile printed a grid that leaves
        SMs idle (bottleneck `occupancy`): the move goes against what the profiler says, and an engineer does not
        make it. Fresh seeds 9191 / 9292 / 9393 on 3e4e6c8: such tunes of a grid-bound best, 0 of 39 kept (default)
        and 0 of 26 (kernelinfer), beside 49 of 83 and 25 of 49 of those that raised the CTA count (gemm_int8_cuda on
        the H200: BN 128 -> 256 on a 64-CTA profile, 32 CTAs on 132 SMs)."""
        key = ("starves", at.key, c.key)
        if key not in self._needs:
            self._needs[key] = self.bottleneck(at) == "occupancy" and self.ctas(c) < self.ctas(at)
        return self._needs[key]

    def busier(self, v: Variant) -> bool:
        """`v`, at the parameters a climb carries over, launches at least twice the best's CTAs."""
        return self.ctas(Candidate(v, self.carry(v))) >= 2 * self.ctas(self.best)

    def propose_raise(self, k: int | None = None) -> Candidate | None:
        """A climb before any tuning: a rung up whose technique raises the ceiling, its floor (the
        roofline of the compute path it uses, e.g. tensor cores for a GEMM on CUDA cores) at least
        RAISES under the floor of the best's own path. Tuning a technique whose ceiling another
        rung lifts is tuning the wrong kernel (a GEMM swept on CUDA cores before the tensor-core
        rung is tried). Memory-bound tasks share one floor: no rung raises it. Which rung, as on any
        climb, is the engineer's habit: the nearest raising rung; an expert-first engineer's top one
        at its first steps (`k`, Habits.expert_first); with search.stepwise the way there goes one
        rung at a time, each technique on the way (coalescing, staging, register tiles) measured
        before the next is written, as a long session builds a kernel up, unless this engineer
        leaps (Episode.leap) straight onto any of the raising rungs (tensor cores with or without
        the pipelined copies). The rung above a new best is the next climb, its tuning waits until
        the ceiling is raised, but for the parameters the best's profile points at (POINTS_AT: the
        tiles of a compute-bound rung, the loads in flight of a memory-bound one), walked while
        they pay: each rung's own gain is had before the next is written."""
        here = self.floor_ms(self.best.variant)
        ups = self.ups()
        raising = [v for v in ups if self.floor_ms(v) * RAISES <= here]
        if not raising:
            return None
        raising = [v for v in raising if self.answers(v)] or raising
        if self.search.stepwise and self.best.variant.tag != self.base.variant.tag:
            c = self.propose_coordinate(self.line, POINTS_AT[self.bottleneck(self.best)])
            if c is not None:
                return c
        if self.habits.expert_first and k is not None and k <= 2:
            order = [self.leap_target(raising), *raising]
        elif not self.search.stepwise:
            order = raising
        elif not self.leap():
            order = ups[:ups.index(raising[-1]) + 1]
        else:
            order = [self.rng.choice(raising) if len(raising) > 1 else raising[0], *raising]
        # the rungs that answer the best's printed bound first (answers): a rung on the way that does not is passed
        order = sorted(order, key=lambda v: (not self.answers(v), self.against(v)))
        for u in order:
            c = self.rung_candidate(u)
            if self.fresh(c):
                return c
            self.rung_tried.add(u.tag)
        return None

    def leap(self) -> bool:
        """Whether this engineer, building its kernel up one rung at a time (search.stepwise),
        rewrites straight onto a rung that raises the ceiling instead (a GEMM onto tensor cores
        without the CUDA-core register tiles first, or onto the pipelined tensor-core rung): its habit of skipping rungs (Habits.skip),
        asked once, the first time a ceiling-raising rung is in sight. Engineers differ here as
        on any climb, and a ladder walked the same way in every session teaches one path."""
        if self.leaps is None:
            self.leaps = self.rng.random() < self.habits.skip
        return self.leaps

    def new_line(self, at: Candidate, ms: float, left: int = 0) -> Line:
        """A coordinate search starting at `at`: the rung's own parameters before the generic launch knobs
        (knobs.KNOBS: min_blocks, main_unroll, evict, which an engineer leaves for last: fresh seeds 9191 / 9292 /
        9393 on 3e4e6c8, one-parameter tunes of the best kept 22.8% of the time on a rung's own parameter, 8.6% on a
        generic knob; kernelinfer 22.3% / 7.8%; on a rewrite too, where a knob the best's search never reached is no
        guess of the rewrite's: default seed 9393 episode 14 spent its one probe at the roofline on min_blocks of
        the fp8 conversion rung), the parameters the profile of `at` points at first
        (POINTS_AT[bottleneck]), each group in an order of this engineer's; on a rung other than the best's, the
        values a climb carried from the best's settled search last (tuned_there)."""
        names, points = self.tunable(at.variant), POINTS_AT[self.bottleneck(at)]
        tuned = self.tuned_there(at)
        order = sorted(self.rng.sample(names, len(names)),
                       key=lambda n: (n in knobs.KNOBS, n in tuned, points.search(n) is None))
        return Line(at, ms, {n: i for i, n in enumerate(order)}, left=left)

    def tuned_there(self, at: Candidate) -> set:
        """The parameters of `at`, a rewrite onto another rung than the best's, that hold the value the best's
        search settled (measured both ways, or its mirror flat) and carried over: tuned already, where the
        rung's own additions (a split count, a stage count) and the values the carry could not keep are
        the rewrite's guesses, and an engineer tunes those first. Contender tunes of default seeds
        7575 / 7676 (kernelinfer 7575) on 7b6c786 moved such a guess first in 34 of 113 / 39 of 115 (44 of
        125) rungs, and a guess's tune beat its point by 2% 33% / 27% (21%) of the time, an inherited
        value's 20% / 24% (13%): default seed 7575 episode 3 tuned a split-KV rewrite's stages, warps and
        block (12-15) before its split count (16-17), the one parameter that moved it."""
        if at.variant.tag == self.best.variant.tag:
            return set()
        return {n for n in at.params if n in self.line.settled and at.params[n] == self.best.params.get(n)}

    def bottleneck(self, c: Candidate) -> str:
        """What a profile of `c` shows limits it (profiler.bound, the verdict its feedback prints): `occupancy`
        (fewer CTAs than SMs), else `compute` or `memory`, whichever of its roofline terms on its path is larger:
        the op's FLOPs, the bytes `c` moves (its traffic: a GEMM that re-reads its operands, scores written out
        and read back)."""
        return bound_of(self.m, c.variant, c.params, self.task)

    def contend(self, cand: Candidate, time_ms: float) -> None:
        """A measurement of another rung than the best's: a climb within search.contender of the
        best becomes the contender, and so does a runner-up below it (an ablation) within
        search.runner_up whose gap one knob step could close (within_a_step); a tune of the contender that beats its point moves its search there, and
        renews its search.contender_steps only if it beats it beyond the noise (a gain inside the
        noise is no evidence that the rung is closing in)."""
        if cand.variant.tag == self.best.variant.tag or cand.bug is not None:
            return
        line, ms = self.contender, self.measured_ms(cand)
        if line is not None and cand.key == line.at.key:
            # its point re-measured (a close call settled against the best): its tunes are judged from the mean of
            # its runs, as the best's are (default seed 8181 episode 30: warp_shuffle's point ran 6,967 then 7,246 ns,
            # and a tune at 7,415 ns, 4.3% off the mean inside a 6% noise band, read as a loss from the first run)
            line.ms = ms
            return
        if line is not None and cand.variant.tag == line.at.variant.tag:
            gained = beats(ms, 1, line.ms, 1)
            if len(self.book.runs[self.code(cand)]) == 1:       # a tune (a close call's re-measure is no new config)
                line.ties = 0 if gained or abs(ms / line.ms - 1.0) > 2 * noise_cv(line.ms) else line.ties + 1
                line.dry = 0 if gained else line.dry + 1
            if ms < line.ms:        # its search goes on from there; only a gain beyond the noise renews its steps
                left = self.search.contender_steps if gained else line.left
                self.contender = replace(line.moved(cand, ms, across=self.search.across), left=left, ties=line.ties,
                                         dry=line.dry)
        elif ms <= self.factor(cand.variant) * self.book.best_ms \
                and (self.above(cand.variant) or self.within_a_step(cand, ms)):
            # a climb that came close, or a runner-up below whose gap one knob step could close
            self.contender = self.new_line(cand, ms, self.search.contender_steps)

    def above(self, v: Variant) -> bool:
        """`v` is a rung above the best's."""
        return self.pos[v.tag] > self.pos[self.best.variant.tag]

    def factor(self, v: Variant) -> float:
        """How far from the best a measurement of `v` may be for `v` to be tuned as a contender: search.contender for a
        rung above the best, search.runner_up for one below (a revisit too: a contender the best has since climbed past
        is a rung below it)."""
        return self.search.contender if self.above(v) else self.search.runner_up

    def within_a_step(self, cand: Candidate, ms: float) -> bool:
        """A rung below the best, measured at `ms` (an ablation: the best's parameters on it), is worth tuning: its gap
        to the best is no more than the largest gain a single knob step gave on it or on the best's rung (knob_gain),
        or inside the noise or REACH_FLOOR. An ablation that lost by more has taught what the best's technique buys, and a walk of its
        neighbours would need a step larger than any this kernel has shown (reader, seed 16161 on 90dadf3: gemv_cuda
        on the A100, warp_per_row ablated at 1.44x the best, then tuned three steps at 1.42-1.98x)."""
        gains = (self.knob_gain.get(cand.variant.tag, 0.0), self.knob_gain.get(self.best.variant.tag, 0.0))
        return ms / self.book.best_ms - 1.0 <= max(*gains, 2 * noise_cv(self.book.best_ms), REACH_FLOOR)

    def slow(self, tag: str) -> bool:
        """The rung was measured at SLOW_RUNG x the best or worse: nothing to learn going back. What
        judges a rung is its fastest measurement at a config the compiler did not spill, where it has
        one (a spilled build times the spill, not the technique: Episode.unspill)."""
        return self.sane_ms.get(tag, self.rung_ms.get(tag, 0.0)) >= SLOW_RUNG * self.book.best_ms

    def spills(self, c: Candidate) -> bool:
        """The compiler spilled much of `c`'s registers (ptxas -v's spill stores, Triton's n_spills):
        what its code holds a thread is SPILLS x the cap its block size, or `__launch_bounds__`'
        minimum blocks (min_blocks), leave it, or more; the profile shows its registers pinned at that
        cap. (A few registers over the cap are common in a rung's fastest tiles: that is the rung.)"""
        r = self.sim(c)
        return r.ok and spilled(self.m, c.variant, c.params, self.task, r.regs)

    def unspill_due(self) -> list[Variant]:
        """Rungs above the best whose every measurement spilled, that could beat the best, not written
        again yet (Episode.unspill)."""
        here = self.pos[self.best.variant.tag]
        return [v for v in self.rungs if v.tag in self.spilled_at and v.tag not in self.unspilled
                and self.pos[v.tag] > here and self.could_beat(v)]

    def unspill(self) -> Candidate | None:
        """A rewrite measured only at a config that spilled (a back-off from a shared-memory failure that
        kept `__launch_bounds__(T, 4)`: 40 registers, 3.7x the best) says how slow the spill is, not
        the technique: the engineer reads the compiler's report and writes the rung once more, at the
        next step, at a config that does not spill: the best's parameters carried over (what a climb
        writes), else the rung's config nearest the one that spilled (fewest value-steps) that builds,
        runs and does not spill. Then its measurement judges the rung (slow, contend)."""
        for v in self.unspill_due():
            self.unspilled.add(v.tag)
            carried = Candidate(v, self.carry(v))
            if self.sane(carried):
                return carried
            at = self.spilled_at[v.tag]
            options = [c for c in self.grid(v) if self.sane(c)]
            if options:
                return min(options, key=lambda c: self.steps_apart(at, c))
        return None

    def retile_due(self) -> list[Variant]:
        """Rungs above the best first measured at the back-off of a rewrite that overflowed, not written again
        at the configuration a climb writes (carry) yet, that could beat the best (Episode.retile)."""
        here = self.pos[self.best.variant.tag]
        return [v for v in self.rungs if v.tag in self.raised and v.tag in self.rung_ms and v.tag not in self.retiled
                and v.tag == self.last_ok and self.looks[v.tag] == 1
                and self.pos[v.tag] > here and self.could_beat(v) and self.retile_at(v) is not None]

    def retile_at(self, v: Variant) -> Candidate | None:
        """Where a raised rung `v` is written again (retile): the best's parameters carried over (what a climb writes)
        where they build, run and do not spill (sane); where they overflow this GPU's shared memory or register file, the
        nearest configuration that fits, found as a limit failure's back-off finds it (propose_backoff: along each
        parameter the nearest value asking less of what overflowed, the pipeline's depth first, then the one keeping
        the most of it), from the carried tiles, never from the raised ones the back-off left. Full seed 0 of 90dadf3,
        kernelstrain-s0-006989 (gemm_fp16_triton, RTX 4090): persistent_tma written at BN 256 and 5 stages over the
        best's BN 128 and 4, backed off to 2 stages (the raised tile kept), ran 7.1x the best; the carried BN 128 at 4
        stages asks 112 KB of the 4090's 99 and was never written, where BN 128 at 3 stages (80 KB) runs 0.97x the best.
        None: nothing near the carry fits. Asked without a draw (the stop rule asks it, through retile_due)."""
        carried = Candidate(v, self.carry(v))
        if self.sane(carried):
            return carried
        hit = self.overflow(carried) if self.writable(carried) else None
        if hit is None:
            return None
        resource, fits = hit[0], []
        need = self.need(carried)[resource]
        for i, name in enumerate(self.tunable(v)):
            for d in (-1, 1):
                fit = next((o for o in self.lowered(carried, name, d, resource, need) if self.sim(o).ok), None)
                if fit is not None and self.sane(fit):
                    fits.append((STAGED.search(name) is None, -self.need(fit)[resource], i, d, fit))
        return min(fits, key=itemgetter(0, 1, 2, 3))[-1] if fits else None

    def above_carry(self, c: Candidate, resource: str) -> bool:
        """`c`, a back-off of a rewrite that overflowed `resource`, still departs from the configuration a climb writes
        (carry) in a parameter that asks more of it: put back alone at the carried value, it asks less (a tile raised
        past the best's). Where none does, the back-off is the carry or under it (the carried tiles with fewer stages):
        its measurement judges the rung, and a retile would be a tune of it, not a second look (default seed 15151
        episode 235, gemm_fp16_cuda on the RTX 4090: cp_async_pipeline written at its own 4 stages over the best's
        tiles, backed off to 2, would have been retiled at BM 64 and 3 stages)."""
        carried, need = self.carry(c.variant), self.need(c)[resource]
        return any(self.need(Candidate(c.variant, {**c.params, n: carried[n]}))[resource] < need
                   for n in c.params if n in carried and c.params[n] != carried[n])

    def retile(self) -> Candidate | None:
        """A rewrite written with what its technique asks for raised past the cap (bigger tiles, more stages than the
        best's: departs_to_overflow) failed to build, and its back-off lowered one of them (propose_backoff) and lost:
        that measurement times the raised tiles, not the technique. The engineer writes the rung once more, at the
        next step, at the best's parameters carried over (what a climb writes), and that measurement judges it (slow,
        contend), as a rewrite measured only spilled is written again (unspill). Fresh seeds 13131 / 13232 / 13333
        on 8eb865d: gemm_fp4_cuda on the H100 at M 16 wrote its wgmma rung at BM 256 BN 256 6 stages (over the
        cap), backed off to 3 stages, ran 2.4x the best and was never written again; at the best's BM 128 BN 64 it
        runs 2.1x faster than the best (kernelinfer session 45 of seed 13131). Only at the step right after the
        back-off's measurement, its one look (retile_due): later, once the best has moved and its tiles fit, the rung
        is known-slow code (>= 2x the best: qa's slow_rung_returns), not a measurement to correct (full seed 0 of
        d1e7580: five such returns, e.g. kernelstrain-s0-006989, gemm_fp16_triton on the RTX 4090, persistent_tma at
        7x written again nine steps after its back-off, once the best's stages dropped to 3)."""
        for v in self.retile_due():
            self.retiled.add(v.tag)
            return self.retile_at(v)
        return None

    def sane(self, c: Candidate) -> bool:
        """`c` is new, builds and runs here without spilling, and asks no limit more than a config of
        its rung that failed it."""
        return self.fresh(c) and self.sim(c).ok and not self.spills(c) and not self.known_to_fail(c)

    def steps_apart(self, a: Candidate, b: Candidate) -> int:
        """Value-steps between two configs of one rung, summed over its tunable parameters."""
        v = a.variant
        return sum(abs(knobs.param(v, n).values.index(a.params[n]) - knobs.param(v, n).values.index(b.params[n]))
                   for n in self.tunable(v))

    def propose_ablation(self) -> Candidate | None:
        """An ablation: the best's parameters on the nearest rung below it that was skipped or measured
        within SLOW_RUNG x the best, to learn what the best's technique buys. Not past a rung below measured
        at SLOW_RUNG x the best: what the techniques above it buy is known, and a rung further down takes
        away more of them (kernelinfer seed 8181 session 27, gemm_fp16_cuda on the A100: register_blocked at
        20.7x the best, then an ablation onto smem_tiled, 29x)."""
        here = self.pos[self.best.variant.tag]
        for v in reversed([v for v in self.rungs if self.pos[v.tag] < here]):     # the nearest technique first
            if self.slow(v.tag):
                return None
            c = Candidate(v, self.carry(v))
            if self.fresh(c):
                return c
        return None

    def descent(self) -> Candidate | None:
        """After a step down the ladder won (an ablation kept: the technique the engineer removed cost
        time on this task), the ladder's order does not hold here: the nearest rung below the new best
        that was skipped, never written, is written next at the best's parameters (gemm_fp4_triton on
        the H100: the block-scaled dot without its pipelining beat the pipelined one, and the
        cp.async-pipelined dequantize-then-dot rung below both, skipped on the way up, is the fastest).
        On down, each skipped rung once, whether the one above it won or lost: a loss one rung down says
        that technique costs here, not that the order holds again further down (kernelinfer, 300 sessions a
        fresh seed: 23 with a won ablation ended with a skipped rung below the best never written)."""
        if not self.descending:
            return None
        here = self.pos[self.best.variant.tag]
        for v in reversed([v for v in self.rungs if self.pos[v.tag] < here and v.tag not in self.rung_tried]):
            if self.could_beat(v):
                c = Candidate(v, self.carry(v))
                if self.fresh(c):
                    self.descended.add(v.tag)
                    return c
        self.descending = False
        return None

    def descent_due(self) -> bool:
        """A descent is open (Episode.descent), asked by the stop rule without a draw."""
        here = self.pos[self.best.variant.tag]
        return self.descending and any(self.pos[v.tag] < here and v.tag not in self.rung_tried and self.could_beat(v)
                                       and self.fresh(Candidate(v, self.carry(v))) for v in self.rungs)

    def worth_tuning(self, at: Candidate, name: str) -> bool:
        """A profile of `at` says `name` can move it: __launch_bounds__' minimum blocks per SM
        (`min_blocks`) only where its occupancy is limited by registers (ncu's register block
        limit the lowest; the knob caps registers to raise it) or it was set already."""
        if name != "min_blocks" or at.params.get(name):
            return True
        launch, gpu = knobs.launch(self.m, at.variant, at.params, self.task), self.task.gpu
        by_regs = gpu.regs_per_sm // max(1, launch.threads * launch.regs)
        return by_regs < blocks_per_sm(replace(launch, regs=0), gpu)

    def tunable(self, variant: Variant) -> list[str]:
        return [p.name for p in variant.params if len(p.values) > 1 and p.name not in knobs.SLIPS]

    def neighbours(self, around: Candidate, dist: int) -> list[Candidate]:
        """Configs of `around`'s rung `dist` value-steps from its own (summed over the tunable
        parameters, at most three of them changed): one parameter `dist` values away, or two or
        three moved together (tile and warps, block and unroll interact)."""
        v, names = around.variant, self.tunable(around.variant)
        values = [knobs.param(v, n).values for n in names]
        at = [vals.index(around.params[n]) for n, vals in zip(names, values)]
        out = []
        for offsets in _offsets(len(names), dist):
            moved = [i + o for i, o in zip(at, offsets)]
            if all(0 <= j < len(vals) for j, vals in zip(moved, values)):
                out.append(Candidate(v, {**around.params, **{n: vals[j] for n, vals, j in zip(names, values, moved)}}))
        return out

    def distance(self, c: Candidate) -> int:
        """Value-steps from the best's configuration to `c` (same rung), summed over the tunable parameters."""
        v = self.best.variant
        return sum(abs(knobs.param(v, n).values.index(c.params[n]) - knobs.param(v, n).values.index(self.best.params[n]))
                   for n in self.tunable(v))

    def measured_ms(self, c: Candidate) -> float | None:
        """The recorded (mean) time of `c`'s code, None if it was never measured."""
        code = self.code(c)
        return self.book.mean(code) if code in self.book.runs else None

    def along(self, line: Line, name: str, d: int) -> tuple[Candidate | None, float | None]:
        """Walk `name` from the line's point in direction `d`: the first config not measured yet,
        past configs measured faster than the point (the trend goes on: up to search.spread
        value-steps), else (None, the relative loss of the first config measured no faster). A
        way whose walk ends (the list's end, a config that cannot run, search.spread) past
        configs measured faster than the point but not kept (inside the noise) gives that
        measured gain as a negative loss: the parameter is a tie there, not a settled loss, and
        a joint move of it may still pay (propose_joint's ties, interacting)."""
        around = line.at
        p = knobs.param(around.variant, name)
        here, ref = p.values.index(around.params[name]), self.measured_ms(around)
        faster = None                # the fastest measurement walked past: a near-tie win
        for j in range(1, self.search.spread + 1):
            i = here + d * j
            if not 0 <= i < len(p.values):
                break
            c = Candidate(around.variant, {**around.params, name: p.values[i]})
            if self.starves(around, c):     # the profile says this way cannot pay: closed, as a list's end
                break
            if self.fresh(c):
                return c, None
            ms = self.measured_ms(c)
            if ms is None:           # not writable here, or it failed: this way is closed
                break
            if ms >= ref:
                return None, ms / ref - 1.0
            faster = ms if faster is None else min(faster, ms)
        return None, None if faster is None or not self.search.tie_wins else faster / ref - 1.0

    def propose_coordinate(self, line: Line, only: re.Pattern | None = None) -> Candidate | None:
        """The next step of a coordinate search around the line's point: the parameter that just
        improved first (on in the direction that paid), then the others in the engineer's order;
        each walked one way, and the other way once that loses. A parameter both of whose ways
        are closed is settled, with the smallest loss seen as its margin. None: all settled
        (`only`: all the parameters whose names it matches)."""
        names = [n for n in self.tunable(line.at.variant) if only is None or only.search(n)]
        order = sorted(names, key=lambda n: (n != line.focus, line.rank.get(n, 0)))
        for name in order:
            if name in line.settled or not self.worth_tuning(line.at, name):
                continue
            first = line.lean.setdefault(name, self.rng.choice((1, -1)))
            losses, shut = [], line.shut.setdefault(name, {})
            for d in (first, -first):
                c, loss = (None, shut[d]) if d in shut else self.along(line, name, d)
                if c is not None:
                    return c
                if loss is not None:
                    losses.append(loss)
                    if loss > SHUT_SIGMAS * noise_cv(line.ms):
                        shut[d] = loss
                    if self.search.flat_stop and abs(loss) <= 2 * noise_cv(line.ms):
                        break       # flat: the first way moved nothing past the noise, the mirror is a blind probe
            line.settled[name] = min(losses, default=float("inf"))
        return None

    def propose_joint(self) -> Candidate | None:
        """Once every parameter of the best is settled, up to search.joints joint moves there, each
        as the engineer's habit leans: two parameters one value each, both of which came within
        the noise of the best (a tie on each alone may hide a gain together, as tile and warps or
        block and unroll interact), or with search.interact an interacting pair (interacting)."""
        line = self.line
        if line.joints >= self.search.joints:
            return None
        ties = {n for n, m in line.settled.items() if m <= 2 * noise_cv(self.book.best_ms)}
        pairs = self.interacting(line) if self.search.interact else set()
        if len(ties) < 2 and not pairs:
            return None
        if line.joints == 0 and not self.search.thorough and self.rng.random() >= self.habits.joint:
            # not this engineer's habit here (a long session walks them whatever its habit)
            line.joints = self.search.joints
            return None
        line.joints += 1
        tie = 2 * noise_cv(self.book.best_ms)
        options = self.joint_moves(line, lambda moved: INTERACT_LOSS if moved in pairs else tie if moved <= ties else None)
        return self.rng.choice(options) if options else None

    def joint_moves(self, line: Line, allowed) -> list[Candidate]:
        """Fresh configs two parameters of the line's point away, one value each, whose pair of
        moved names (a frozenset) `allowed` accepts: it gives the most either move may have lost
        alone (None: the pair is not tried). With search.joint_ways that is asked of each move's
        own direction (the single move to the same value, measured from the point), not of the
        parameter's smaller loss of its two ways: a joint move combines ways that each came
        close alone, never one that lost clearly (warps 4 -> 8 at 1.7x beside 4 -> 2 at 1.17x)."""
        out = []
        for c in self.neighbours(line.at, 2):
            moved = frozenset(n for n in c.params if c.params[n] != line.at.params[n])
            if len(moved) != 2:
                continue
            limit = allowed(moved)
            if limit is not None and self.fresh(c) and not self.starves(line.at, c) and (not self.search.joint_ways or all(
                    (loss := self.way_loss(line, n, c.params[n])) is not None and loss <= limit for n in moved)):
                out.append(c)
        return out

    def way_loss(self, line: Line, name: str, value) -> float | None:
        """How much the line's point with `name` at `value` alone lost to the point as measured
        (negative: it measured faster); None if that single move was never measured."""
        ms = self.measured_ms(Candidate(line.at.variant, {**line.at.params, name: value}))
        ref = self.measured_ms(line.at)
        return None if ms is None or ref is None else ms / ref - 1.0

    def interacting(self, line: Line) -> set:
        """Pairs of settled parameters of the line's point that interact (the same group of what
        a profile points at, POINTS_AT: tile M x N, warps x stages, vector width x unroll), each
        of which lost alone by under INTERACT_LOSS: one may pay for the other (a wider tile with
        fewer stages fits where each alone spilled or starved occupancy)."""
        near = [n for n, m in line.settled.items() if m <= INTERACT_LOSS]
        return {frozenset((a, b)) for i, a in enumerate(near) for b in near[i + 1:]
                if coupled(a, b, self.search.across)}

    def coupled_pairs(self, at: Candidate) -> set:
        """Pairs of `at`'s parameters worth tuning that are coupled (one profiler group, POINTS_AT:
        tile M x N, stages x tile, vector width x unroll; or warps x the block a CTA covers, ACROSS),
        one of them in the group `at`'s profile points at (bottleneck): the knobs whose balance
        sets what limits it, where one alone can lose what the two together gain."""
        names = [n for n in self.tunable(at.variant) if self.worth_tuning(at, n)]
        pointed = POINTS_AT[self.bottleneck(at)]
        return {frozenset((a, b)) for i, a in enumerate(names) for b in names[i + 1:]
                if (pointed.search(a) or pointed.search(b)) and coupled(a, b)}

    def coupled_moves(self) -> list[tuple[float, Candidate]]:
        """Joint moves of a coupled pair of the best (coupled_pairs), one value each, with the
        evidence for each: while the profile says a gain is there (the best at COUPLED_HEADROOM x its
        floor or more) and fewer than search.coupled were tried around it, every fresh such
        move whose two halves were each measured alone and lost by at most INTERACT_LOSS (one pays
        for the other: a wider tile with more warps, fewer stages beside a bigger tile). A half never
        measured leaves the move blind (paired, default seed 5151, 200 episodes: with one half
        unmeasured allowed, 9 of 143 such moves kept; both measured, 8 of 81, as the single tunes'
        ~12%). Each with the sum of its halves' losses, the engineer's order (smallest first)."""
        line = self.line
        if line.coupled >= self.search.coupled or self.at_roofline() \
                or self.book.best_ms < COUPLED_HEADROOM * self.floor_ms(self.best.variant):
            return []
        pairs = self.coupled_pairs(line.at)
        out = []
        for c in self.neighbours(line.at, 2) if pairs else ():
            moved = frozenset(n for n in c.params if c.params[n] != line.at.params[n])
            if moved not in pairs or not self.fresh(c) or self.starves(line.at, c):
                continue
            losses = [self.way_loss(line, n, c.params[n]) for n in moved]
            if None not in losses and max(losses) <= INTERACT_LOSS:
                out.append((sum(losses), c))
        return out

    def propose_coupled(self) -> Candidate | None:
        """The joint move of coupled knobs the evidence ranks first (coupled_moves), counted on the
        best's line; None when none is open."""
        moves = self.coupled_moves()
        if not moves:
            return None
        self.line.coupled += 1
        return min(moves, key=itemgetter(0))[1]

    def propose_contender(self) -> Candidate | None:
        """A rung that lost by less than search.contender at the parameters it inherited: its own
        best parameters may differ, so it is tuned by the same coordinate search before it is
        judged: lost, once its search is settled or search.contender_steps steps in a row did
        not improve it, or CONTENDER_TIES tunes in a row moved it nothing past the noise (a tie: its
        parameters do not move it, and tuning it on is flailing inside the noise)."""
        line = self.contender
        if line is not None and (line.ties >= CONTENDER_TIES or self.out_of_reach(line)):
            self.contender = None
            return None
        if line is None or line.left <= 0 or self.slow(line.at.variant.tag) \
                or line.ms > self.factor(line.at.variant) * self.book.best_ms:
            if line is not None and line.left <= 0 and len(self.shelved) < self.search.revisits:
                self.shelved.append(line)
            self.contender = None
            return None
        line.left -= 1
        c = self.propose_coordinate(line)
        if c is None:
            self.contender = None
        return c

    def out_of_reach(self, line: Line) -> bool:
        """The contender `line`'s own measurements say it cannot reach the best: its last REACH_TUNES tunes gained
        nothing past the noise (a contender still closing in is left to close), and the gain its point still needs to
        tie the best is more than any single knob step has given on its rung (knob_gain: from a search's point to a
        config one parameter away, the best's or a contender's), more than the noise and REACH_FLOOR (a contender
        closer than a typical kept knob step is left to its search: default seed 15353 episode 61, flash_prefill_cuda
        on the A100, cp_async_pipeline at 1.09x after two dry tunes gained 30% at its third). Seed 15151 on 90dadf3:
        kernelinfer session 0 (top_p_cuda, A100) tuned vectorized_float4 at 1.34x the best four times (0.39x, 1.8x,
        then two within 0.5% of its point); default episode 87 (sliding_window_attn_triton, A100) tuned
        persistent_tiles at 1.28x four times, each losing 2.2-3.7x the best, where no knob step on that rung had
        gained anything."""
        tag = line.at.variant.tag
        return line.dry >= REACH_TUNES and line.ms / self.book.best_ms - 1.0 > max(
            self.knob_gain.get(tag, 0.0), 2 * noise_cv(self.book.best_ms), REACH_FLOOR)

    def knob_step(self, cand: Candidate, ms: float) -> None:
        """Record what `cand`, measured at `ms`, gained as a single knob step: from the point of the search on its rung
        (the best's, or the contender's) to a config of that rung one parameter away (knob_gain, out_of_reach)."""
        for line in (self.line, self.contender):
            if line is None or line.at.variant.tag != cand.variant.tag:
                continue
            moved = [n for n in self.tunable(cand.variant) if cand.params.get(n) != line.at.params.get(n)]
            if len(moved) == 1:
                tag = cand.variant.tag
                self.knob_gain[tag] = max(self.knob_gain.get(tag, 0.0), line.ms / ms - 1.0)

    def propose_move(self, k: int) -> Candidate | None:
        """The next idea: tune a contender, climb, ablate once when tuning stalls, else the next
        step of the coordinate search around the best, then one joint move there; None when
        nothing is left worth a step (no rung to climb, every parameter settled)."""
        h, rng = self.habits, self.rng
        c = self.propose_contender()
        if c is not None:
            return c
        c = self.descent()
        if c is not None:
            return c
        c = self.propose_raise(k)
        if c is not None:
            return c
        if self.stale >= 1 and self.host_bound():     # one probe said a tune cannot move the call: a leaner call only
            return self.propose_structural(k)
        ideas = self.open_ideas() + self.retries() if not self.ups() and self.stale >= self.patience() else []
        if ideas:                   # patience spent, but the evidence points at an untried neighbour
            if ideas[0].variant.tag != self.best.variant.tag:      # a climb written again (retries)
                self.retried.add(ideas[0].variant.tag)
            return ideas[0]
        if not self.ups() and (self.stale >= self.patience() or self.stale >= 1 and self.flat()):
            c = self.propose_coupled()      # one knob at a time is exhausted, the profile still points at a pair
            if c is not None:
                return c
        if self.ups() and (k == 1 or rng.random() < h.climb):
            c = self.propose_structural(k)
            if c is not None:
                return c
        if len(self.ablated) < self.search.ablations and self.stale >= 2 and rng.random() < h.ablate:
            c = self.propose_ablation()
            if c is not None:
                return c
        return self.propose_coordinate(self.line) or self.propose_structural(k) or self.propose_retry() \
            or self.propose_joint() or self.propose_coupled() or self.propose_revisit()

    def retries(self) -> list[Candidate]:
        """Climbs worth writing again (search.retry): a rung above the best that lost when it was
        first written, by less than search.contender against the best of that moment, whose
        parameters shared with the best (the ones a climb carries over) have changed since: the
        best's tuning found better values of them (its tiles, its threads), and the rung lost at
        the old ones. Written once more at the best's values, once per rung; not a rung measured
        at SLOW_RUNG x the best, nor one being tuned as the contender."""
        if not self.search.retry:
            return []
        out, here = [], self.pos[self.best.variant.tag]
        busy = self.contender.at.variant.tag if self.contender is not None else None
        for v in self.rungs:
            if v.tag not in self.lost_at or v.tag in self.retried or v.tag == busy or self.pos[v.tag] <= here \
                    or self.slow(v.tag):
                continue
            ms, best_then, params_then = self.lost_at[v.tag]
            shared = [n for n in self.tunable(v) if n in self.best.params and n in params_then]
            if ms > self.search.contender * best_then \
                    or all(self.best.params[n] == params_then[n] for n in shared):
                continue
            c = Candidate(v, self.carry(v))
            if self.fresh(c):
                out.append(c)
        return out

    def propose_retry(self) -> Candidate | None:
        """The first climb worth writing again (retries), marked retried."""
        for c in self.retries()[:1]:
            self.retried.add(c.variant.tag)
            return c
        return None

    def propose_revisit(self) -> Candidate | None:
        """Once the best's neighbourhood is settled and no rung is left to climb: the search of a
        contender whose search.contender_steps ran out while it was still finding its way (its
        search not settled) is taken up again, if it is still within search.contender of the best."""
        while self.shelved:
            line = self.shelved.pop(0)
            if line.at.variant.tag != self.best.variant.tag:
                self.contender = replace(line, left=self.search.contender_steps)
                c = self.propose_contender()
                if c is not None:
                    return c
        return None

    # -- failures -------------------------------------------------------------------
    def plausible_gated(self) -> list[Variant]:
        """Arch-gated rungs an engineer would reach for now: the next technique up the
        ladder from the best (or anything above once the runnable rungs are done), whose
        technique could beat the best (could_beat: a TMA copy of a kernel already at its DRAM
        floor is no idea worth a step, even on a GPU that has TMA)."""
        here, ups = self.pos[self.best.variant.tag], self.ups()
        nxt = self.pos[ups[0].tag] if ups else len(self.ladder)
        reach = 0 if self.search.stepwise else max(2, self.search.limit_rungs)
        return [v for v in self.gated if v.tag not in self.rung_tried and here < self.pos[v.tag] <= nxt + reach
                and not v.needs & self.limits.missing and self.could_beat(v)]

    def reach(self) -> list[Variant]:
        """The rungs up a rewrite that fails on a limit may be aimed at: search.limit_rungs of
        them; with search.stepwise the next one alone, the climb the engineer would make anyway
        (a failure never decides which rung is written)."""
        return self.climbable()[:1 if self.search.stepwise else self.search.limit_rungs]

    def over_limit(self, error_class: str, tune: bool = True) -> list[Candidate]:
        """Configs of the best's rung (a sweep too far) or of the next rungs up (a rewrite with
        tiles too big; search.limit_rungs of them) that overflow shared memory (clear overflows: near the cap the model
        is an estimate) or the register file."""
        # a sweep too far goes the way a tune would (never toward fewer CTAs on a grid-bound best: starves)
        out = [c for c in self._over_limit(self.best.variant, error_class, near=True)
               if not self.starves(self.best, c)] if tune else []
        for v in self.reach():
            knobs_carried = self.knobs_carried(v)
            out += [c for c in self._over_limit(v, error_class)
                    if all(c.params[n] == x for n, x in knobs_carried.items()) and self.departs_to_overflow(c)]
        return out

    def departs_to_overflow(self, c: Candidate) -> bool:
        """A rewrite onto `c`'s rung that overflows is the config a climb writes (carry: the best's tuned
        values, the rung's defaults for what it adds) with what the new technique asks for raised past
        the cap: each parameter where `c` departs from that config, put back alone, lowers the demand
        that overflowed (more stages, a bigger tile). A departure that does not (a rewrite at 8 warps
        where the best runs 4 and the overflow is shared memory, a smaller tile) is no reason the
        engineer had: default seed 7575 episode 3 wrote its pipelined rung at 8 warps, which two steps
        before had lost 13.5% on the best, and spent a step of the back-off's tuning taking it back."""
        key = ("departs", c.key, self.best.key)
        if key not in self._needs:
            carried, over = self.carry(c.variant), self.overflow(c)
            self._needs[key] = over is not None and all(
                self.need(Candidate(c.variant, {**c.params, n: carried[n]}))[over[0]] < over[1]
                for n in c.params if c.params[n] != carried.get(n, c.params[n]))
        return self._needs[key]

    def knobs_carried(self, v: Variant) -> dict:
        """The generic launch knobs (knobs.KNOBS: `__launch_bounds__`' minimum blocks, the main loop's
        unroll) of rung `v` as a climb from the best writes them (carry): a rewrite onto a new rung that
        overflows does so on its own tiles and stages, not on a `min_blocks 4` the best never set
        (kernelinfer seed 7272 session 237: a warp-specialized rewrite drawn at min_blocks 4, backed off
        to 40 registers, 3.7x the best). The launch-bound and opt-in slips are drawn elsewhere."""
        return {n: x for n, x in self.carry(v).items() if n in knobs.KNOBS and n not in knobs.SLIPS}

    def _over_limit(self, v: Variant, error_class: str, near: bool = False) -> list[Candidate]:
        """`near`: only those within search.spread value-steps of the best (v is the best's rung)."""
        if grid_limits.clear(self.m, v, self.task, error_class, self.margin()):
            return []        # the grid's corners fit: no config of the rung fails so here (none asked)
        key = (v.tag, error_class)
        if near and key not in self._limits:
            # the distance first: the model is asked of the configs near the best alone, not of the
            # rung's whole grid (the same list as below: each filter is a pure test of one config)
            at = (v.tag, error_class, self.best.key)      # asked at every compile-error draw until the best moves
            if at not in self._limits:
                fails = self._failing_test(v, error_class)
                self._limits[at] = [c for c in self.near(v) if fails(c)]
            found = self._limits[at]
        else:
            if key not in self._limits:
                # grid(v)'s configs that fail, the failure asked first: of a class the launch decides,
                # its answer skips the code's access checks that `writable` makes of every config
                task = (self.task.module, self.task.gpu.name, self.task.dtype, self.task.shape)
                self._limits[key] = rung_failing((self.m.name, v.tag, v.params, task, error_class), self.configs(v),
                                                 self._failing_test(v, error_class))
            found = [c for c in self._limits[key] if not near or self.distance(c) <= self.search.spread]
        # a limit hit unprompted once per rung and resource: after it the engineer knows the cap (until a limit of
        # the rung has failed, no config of it is known to: its demand, a simulation, is asked only after)
        learned = self.limits.learned(v.tag)
        return [c for c in found if c.key not in self.tried and kind_of(c, self.best, False) != "rebench"
                and not (learned and (self.limits.hit(v.tag, self.overflow(c)[0]) or self.known_to_fail(c)))]

    def _failing_test(self, v: Variant, error_class: str):
        """_over_limit's test of one config of rung `v`'s grid: clear_failure and writable. On an
        NVIDIA GPU a CUDA rung's tuning knobs (knobs.KNOBS, the slips at 0 in a grid) change the
        launch's registers alone, and sim.cap_registers keeps a block's registers within the SM's
        file: whether the launch fails, its class and its shared memory are those of the config with
        the same own parameters at any knob setting (tests/test_caches.py checks it registry-wide).
        So the launch is asked once per own parameters, not once per knob setting (20 a config
        with the default knobs: the grid scans were ~45% of the engine's time); `writable` is still
        asked of each config that fails."""
        def plain(c):
            return self.scan_failure(c, error_class) and self.writable(c)
        tuned = [p.name for p in v.params if p.name in knobs.KNOBS and p.name not in knobs.SLIPS]
        if not tuned or self.m.impl != "cuda" or self.task.gpu.vendor != "nvidia" or hasattr(self.m, "simulate"):
            return plain
        seen: dict = {}
        # a grid config's params are the rung's, in its order (configs, param_grid): its own values by position
        own_at = [i for i, p in enumerate(v.params) if p.name not in knobs.KNOBS]
        own_of = itemgetter(*own_at or [slice(0)])

        def shared(c):
            own = own_of(tuple(c.params.values()))
            fails = seen.get(own)
            if fails is None:
                fails = seen[own] = self.scan_failure(c, error_class)
            return fails and self.writable(c)
        # a whole grid's scan (limits.rung_failing) by the groups of configs that share their own values
        shared.groups, shared.keep = rung_grid(v).groups(tuple(own_at)), self.writable
        shared.launch = lambda c: self.scan_failure(c, error_class)
        return shared

    def scan_failure(self, c: Candidate, error_class: str) -> bool:
        """clear_failure of a config the limit scans ask (_failing_test): its launch's answer found once an
        episode, for both classes the scans ask of a rung in turn (smem, resources), and kept nowhere else
        (sim.scan_failure: a whole grid in the candidate caches only evicts what the episode asks again)."""
        if error_class not in LAUNCH_CLASSES:
            return self.clear_failure(c, error_class)
        found = self._scanned.get(id(c))        # (the config itself kept beside its answer: its id stays its own)
        if found is None:
            found = self._scanned[id(c)] = (c, scan_failure(self.m, c.variant, c.params, self.task))
        return self.is_clear(found[1], c, error_class)

    def clear_failure(self, c: Candidate, error_class: str, near: bool = False) -> bool:
        """`c` fails with `error_class`, clearly where the class is a shared-memory overflow
        (near the cap the model is an estimate); `near`: CUDA's overflows count from the cap
        (its bytes are the declared arrays or the host's request, exact)."""
        # simulate's, untimed (asked of whole grids); launch_failure's where it is the same answer
        r = (launch_failure if error_class in LAUNCH_CLASSES else failure)(self.m, c.variant, c.params, self.task)
        return self.is_clear(r, c, error_class, near)

    def is_clear(self, r, c: Candidate, error_class: str, near: bool = False) -> bool:
        """clear_failure's test of `c`'s failure `r` (sim.failure's answer)."""
        return r is not None and r.error_class == error_class and (
            error_class != "smem" or r.smem_bytes >= self.margin(near) * smem_cap(c.variant, self.m, self.task.gpu))

    def margin(self, near: bool = False) -> float:
        """How many times the cap a shared-memory overflow asks for to fail clearly (is_clear)."""
        if near and self.m.impl == "cuda":
            return 1.0
        return 1.6 if self.m.impl == "triton" and self.task.is_hip else 1.25

    def bound_slips(self, tune: bool = True) -> list[Candidate]:
        """A move of the best to bigger blocks written with __launch_bounds__ still at the
        best's block size, as a number (knobs `bound`): the launch fails."""
        v = self.best.variant
        if "bound" in self.slipped or "bound" not in {p.name for p in v.params} \
                or knobs.bound_expression(self.code(self.best)) is None:
            return []
        old = knobs.launch(self.m, v, self.best.params, self.task).threads
        if old not in knobs.KNOBS["bound"].values[1:]:
            return []
        moves = [Candidate(v, {**self.best.params, name: value}) for name in self.tunable(v)
                 for value in knobs.param(v, name).values[knobs.param(v, name).values.index(self.best.params[name]) + 1:]
                 [:self.search.spread] if tune]
        moves = [c for c in moves if not self.starves(self.best, c)]       # as a tune goes (starves)
        moves += [self.rung_candidate(u) for u in self.reach()
                  if "bound" in {p.name for p in u.params}]
        out = []
        for c in moves:
            if self.fresh(c) and knobs.launch(self.m, c.variant, c.params, self.task).threads > old \
                    and knobs.bound_expression(self.code(c)) is not None:
                slip = Candidate(c.variant, {**c.params, "bound": old})
                if slip.key not in self.tried:
                    out.append(slip)
        return out

    def optin_slips(self) -> list[Candidate]:
        """A rewrite onto a rung up that needs more than 48 KB of shared memory, its host code
        written without the opt-in (knobs `optin`) where the best's code had none to copy."""
        if "optin" in self.slipped or knobs.has_optin(self.code(self.best)):
            return []
        out = []
        for v in self.reach():
            if "optin" in {p.name for p in v.params}:
                c = self.rung_candidate(v)
                slip = Candidate(v, {**c.params, "optin": 1})
                if self.fresh(c) and self.sim(c).smem_bytes > knobs.OPTIN_FREE and slip.key not in self.tried:
                    out.append(slip)
        return out

    def limit_modes(self, k: int) -> dict:
        """Failures a hardware limit makes near here. At the first step the engineer rewrites
        (climbs); tuning the baseline's own parameters is not its move, so none fails there."""
        tune = k > 1
        modes = {"arch": self.plausible_gated(), "smem": self.over_limit("smem", tune),
                 "resources": self.over_limit("resources", tune), "bound": self.bound_slips(tune),
                 "optin": self.optin_slips()}
        return {m: v for m, v in modes.items() if v}

    def propose_compile_error(self, k: int, owed: bool = False) -> tuple[Candidate, str, str] | None:
        """(candidate, failure class, tool text). A rewrite that hits a hardware limit needs
        the ladder or the tile sizes to be near one; until then the failure may be owed (made
        at the next chance) rather than always being a typo."""
        rng = self.rng
        modes = self.limit_modes(k)
        weights = {"arch": 4, "smem": 3, "resources": 2, "bound": 3, "optin": 3}
        pool = list(modes)
        if owed and not pool:
            return None
        if not pool and rng.random() < self.search.owed_share:
            self.owed += 1
            return None
        slip = self.search.typo_weight + sum(w for _, w in self.search.slip_weights)
        mode = rng.choices(pool + ["slip"], [weights[m] for m in pool] + [0.0 if owed else slip])[0]
        if owed:
            self.owed -= 1
        if mode == "arch":
            v = rng.choice(modes[mode])
            c = Candidate(v, self.carry(v))
            if any(knobs.settings(c.params).values()) and not messages.arch_recorded(self.m, self.task, self.code(c)):
                # the rewrite without the best's tuning knobs: the tool's text for it is known
                c = Candidate(v, {**c.params, **{k: knobs.OFF for k in knobs.settings(c.params)}})
            return c, "arch", messages.arch_error(v.needs - self.task.gpu.features, self.task, self.m,
                                                  self.code(c))
        if mode != "slip":
            c = rng.choice(modes[mode])
            return c, self.sim(c).error_class, self.sim(c).error
        base = self.propose_move(k)
        if base is None:
            return None
        edited = self.edited(base)
        got = self.with_slip(base, edited)
        if got is None and edited is not None:     # a tune with no slip site on what it writes: made right, and
            self.slips_owed += 1                   # the slip is the next rewrite's (Episode.step)
            return base, None, None
        return got

    def edited(self, c: Candidate) -> set | None:
        """The lines a tune of a rung already written changes (of the best's code, or the contender's
        point it tunes): a slip's site is on one of them. None: `c` is a rewrite (a rung written the
        first time), all of it new code. A one-value change rarely breaks the build: kernelinfer's
        syntax slips fell on tunes as often as on rewrites (one per 8-9 of each), most on lines the
        tune never touched."""
        if c.variant.tag not in self.rung_tried:
            return None
        line = self.contender
        at = line.at if line is not None and line.at.variant.tag == c.variant.tag else self.best
        if at.variant.tag != c.variant.tag:
            return None                           # a rung written before, written again (a retry, an ablation)
        return set(self.code(c).split("\n")) - set(self.code(at).split("\n"))

    def fix_lines(self, fix: Candidate) -> set:
        """The lines a repair writes: those of the fixed code that the failed code lacked (the line
        the compiler or the checker pointed at, the launch bounds, the bug's lines)."""
        return set(self.code(fix).split("\n")) - set(self.failed_code.split("\n"))

    def with_slip(self, base: Candidate, within: set | None = None) -> tuple[Candidate, str, str] | None:
        """`base` written with a slip that breaks the build (kernelstrain/slips): a typo, or a
        kind of the profile's slip_weights that has a site in this code, drawn by weight, a kind
        with a site on a line this change wrote (not in the best's code) SLIP_TIE times likelier,
        and such a site first, as an engineer's slips are in what they just edited. `within`: a
        repair's slip (search.refail), only at a site on the lines the repair writes (fix_lines): an
        engineer fixing a launch bound does not break an untouched helper's shuffle mask (reader,
        kernelinfer seed 8181: 60 of 234 repairs failed again, most on lines the fix never touched)."""
        hip_arch = self.task.gpu.arch if self.task.is_hip else ""
        code = self.code(base)
        if not self.search.slip_weights:          # the typo alone: the default profile's draws
            c = replace(base, typo=self.rng.randrange(slips.SITE))
            typo = find_typo(code, self.m.impl, c.typo)
            if typo is None:
                return None
            lines = code.split("\n")
            if ("identifier", lines[typo.decl].strip()) in self.slip_memory.made \
                    or within is not None and lines[typo.decl] not in within:   # slipped there before, or off the repair
                at = slip_sites("identifier", code, self.m.impl)
                free = [i for i in self.slip_memory.free("identifier", code, self.m.impl)
                        if within is None or lines[at[i]] in within]
                if not free:
                    return None
                c = replace(base, typo=self.typo_pick(self.rng.choice(free), code))
                typo = find_typo(code, self.m.impl, c.typo)
            return c, "syntax", messages.typo_error(typo, self.m.impl, hip_arch)
        old = set(self.code(self.best).split("\n"))
        lines = code.split("\n")
        kinds, weights, free, fresh = [], [], {}, {}
        for kind, w in (("identifier", self.search.typo_weight), *self.search.slip_weights):
            if w <= 0 or not slips.offered(kind, self.m.impl, hip_arch, self.task.dtype, self.task.shape):
                continue
            free[kind] = self.slip_memory.free(kind, code, self.m.impl)
            if within is not None:
                at = slip_sites(kind, code, self.m.impl)
                free[kind] = [i for i in free[kind] if lines[at[i]] in within]
            if not free[kind]:
                continue
            sites = slips.site_lines(kind, code)          # none listed for a typo: it is never tied
            fresh[kind] = [i for i in free[kind] if sites and lines[sites[i]] not in old]
            kinds.append(kind)
            weights.append(w * (SLIP_TIE if fresh[kind] else 1))
        if not kinds:
            return None
        kind = self.rng.choices(kinds, weights)[0]
        site = self.rng.choice(fresh[kind] or free[kind])
        c = replace(base, typo=self.typo_pick(site, code) if kind == "identifier" else slips.encode(kind, site))
        got = with_typo(code, self.m.impl, c.typo, hip_arch, self.task.dtype, self.task.shape)
        return None if got is None else (c, slips.failure(kind), got[1])

    def typo_pick(self, i: int, code: str) -> int:
        """A typo pick (under slips.SITE) that renames the i-th declaration find_typo lists."""
        n = len(typo_sites(code, self.m.impl))
        return i + n * self.rng.randrange((slips.SITE - i + n - 1) // n)

    def propose_wrong(self, k: int) -> Candidate | None:
        """The change the engineer was about to make, written with a risky transformation that
        compiles but is wrong (or crashes), where that change can carry one not made before."""
        c = self.propose_move(k)
        if c is None:
            return None
        bugs, edited = self.bugs(c.variant, c.params), self.edited(c)
        if edited is not None:
            # a tune rewrites its own lines only: a bug whose site is elsewhere (a dropped scale, a softmax rescale
            # beside a launch bound) is not made there (reader, default seed 8383: 18 of 46 wrong results), it is the
            # next rewrite's, and the tune is written right
            on = [b for b in bugs if self.bug_lines(c, b) & edited]
            if bugs and not on:
                self.bugs_owed += 1
                return c
            bugs = on
        return replace(c, bug=self.rng.choice(bugs)) if bugs else None

    def bug_lines(self, c: Candidate, bug: str) -> set:
        """The lines of `c`'s code that writing it with `bug` changes (the bug's site)."""
        return set(self.code(c).split("\n")) - set(self.code(replace(c, bug=bug)).split("\n"))

    def propose_backoff(self) -> Candidate | None:
        """After a limit failure: the failed config with one parameter lowered in what overflowed
        (shared memory, threads, or registers x threads), as an engineer reading the log would
        write it next. Along each parameter, the nearest value that fits (the tool's text gives
        the bytes asked and the cap: the engineer counts how far to go, not one value per build);
        of those fits, the pipeline's depth first (STAGED: stages cost some latency hiding, a
        smaller tile costs the reuse the rewrite was written for, and Triton's text names
        `num_stages` beside the block sizes), then the one that keeps the most of the resource.
        None fits along any one parameter: one value smaller, which may still not fit, and then
        the build or launch fails again. (A wgmma_ws rewrite at BN 256 and 6 stages, 296 KB,
        was backed off to BN 128 at 6 where 4 stages keep BN 256 in 198 KB: the H100 ran BN 256
        at 4 stages fastest, 397 us against 475 at BN 128, roomC j1.)"""
        (c, resource), self.over = self.over, None
        what = "smem" if resource == "smem" else "resources"
        need, fits, moves = self.need(c)[resource], [], []
        for name in self.tunable(c.variant):
            for d in (-1, 1):
                walk = list(self.lowered(c, name, d, resource, need))
                fit = next((o for o in walk if self.sim(o).ok), None)
                if fit is not None:
                    fits.append((STAGED.search(name) is None, -self.need(fit)[resource], fit))
                elif walk and self.clear_failure(walk[0], what, near=True):
                    moves.append(walk[0])         # the nearest value: may still not fit
        if fits:
            first = min(f[:2] for f in fits)
            moves = [o for *rank, o in fits if tuple(rank) == first]
        return self.rng.choice(moves) if moves else None

    def lowered(self, c: Candidate, name: str, d: int, resource: str, need: int):
        """The configs of `c`'s rung with `name` walked from `c`'s value in direction `d`, one value at a time, each
        asking less of `resource` than `need` and new (not built, its code not measured, not the best's own), until
        one of them is not: a walk past the configs that overflow too, never past one already tried."""
        values = knobs.param(c.variant, name).values
        j = values.index(c.params[name]) + d
        while 0 <= j < len(values):
            o = Candidate(c.variant, {**c.params, name: values[j]})
            if o.key in self.tried or not self.writable(o) or self.code(o) in self.measured \
                    or kind_of(o, self.best, False) == "rebench" or self.need(o)[resource] >= need \
                    or self.known_to_fail(o):
                return
            yield o
            j += d

    def need(self, c: Candidate) -> dict:
        """What `c` asks of each per-block limit (limits.demand)."""
        if c.key not in self._needs:
            self._needs[c.key] = demand(self.m, c.variant, c.params, self.task)
        return self._needs[c.key]

    def overflow(self, c: Candidate) -> tuple[str, int] | None:
        key = ("overflow", c.key)
        if key not in self._needs:
            self._needs[key] = overflow(self.m, c.variant, c.params, self.task)
        return self._needs[key]

    def known_to_fail(self, c: Candidate) -> bool:
        """`c` asks at least as much of a limit as a config of its rung that already failed it."""
        return self.limits.known_to_fail(c.variant.tag, self.need(c))

    def bugs(self, v: Variant, params: dict | None = None) -> list[str]:
        """The bugs not made yet that `v` can carry here (with `params`: that break these params
        at this task's shape)."""
        return [b for b in v.bugs_for(self.task.dtype, params) if b not in self.fixed
                and (params is None or v.breaks_at(b, self.task, params))]

    # -- the loop -------------------------------------------------------------------
    def run(self) -> list[Step]:
        steps = []
        for k in range(1, self.budget + 1):
            if self.out_of_time(k):
                self.end = "time"
                break
            step = self.step(k)
            if step is None:
                self.end = "converged"
                break
            steps.append(step)
        return steps

    def time_spent(self) -> bool:
        return self.time_budget_s > 0 and self.elapsed >= self.time_budget_s

    def out_of_time(self, k: int) -> bool:
        """The session's time budget is spent: no new step starts past it. A repair that is due
        still runs (a session never ends on a slip it was about to fix), and so do the first
        min_steps steps."""
        return self.time_spent() and k > self.min_steps and self.pending is None

    def converged(self) -> bool:
        """Nothing open (a repair, a close call, a contender) and either the best runs within
        search.roofline_near of its floor or is launch-bound (at_roofline), or no rung is left
        worth climbing, its neighbourhood was probed and `patience` steps in a row found nothing.
        No step is taken to reach a step count: min_steps only lets the first steps run past a
        time budget."""
        return self.stop_rule() is not None

    def stop_rule(self, repair: bool = True) -> str | None:
        """Which of converged()'s rules holds now: `roofline` (the best near its floor), `launch`
        (launch-bound), `patience` (no rung left, the neighbourhood probed, patience spent), `flat` (no rung
        or retry left, the neighbourhood of the best measured flat: Episode.flat); None:
        something is open or worth a step (`repair`: a limit failure's back-off counts as open)."""
        if self.pending is not None or self.close is not None or self.contender is not None \
                or (repair and self.over is not None) or self.unspill_due() or self.retile_due() or self.descent_due():
            return None
        host = self.host_bound()
        if (self.stale >= 1 or host) and self.at_roofline() and not (host and self.ups()):
            # a host-bound call first takes the rewrites whose calls issue less (could_beat); with none left it is
            # over at once: the new best's profile (clock.profile_best) shows the GPU idle, no probe is needed to see it
            return "roofline" if self.near_floor(self.best.variant) else "launch"
        if not self.ups() and self.stale >= self.patience() and self.probed() and not self.open_ideas() \
                and not self.retries() and not self.coupled_moves():
            return "patience"
        if self.stale >= 1 and not self.ups() and self.flat() and not self.retries() and not self.shelved \
                and not self.coupled_moves():
            return "flat"
        return None

    def flat(self) -> bool:
        """The best's one-value neighbourhood says nothing is left to tune (search.flat_stop): for every
        parameter of the best worth tuning, each neighbour one value either way was measured (or cannot be
        written), or the one the other way was measured inside the noise of the best (within 2 sigma either side: moving
        that parameter does nothing a benchmark can see, and the mirror move is a blind probe). Past that,
        patience only buys blind search."""
        if not self.search.flat_stop:
            return False
        v, at, best = self.best.variant, self.best.params, self.book.best_ms
        band = 2 * noise_cv(best)
        for name in self.tunable(v):
            if not self.worth_tuning(self.best, name):
                continue
            values = knobs.param(v, name).values
            i = values.index(at[name])
            near = [Candidate(v, {**at, name: values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(values)]
            open_ = [c for c in near if self.writable(c) and self.true_ms(c) is not None and not self.starves(self.best, c)]
            ms = [self.measured_ms(c) for c in open_]
            if None in ms and not any(m is not None and abs(m / best - 1) <= band for m in ms):
                return False
        return True

    def open_ideas(self) -> list[Candidate]:
        """Untried neighbours of the best that the engineer's own evidence says could pay, which
        patience does not leave behind (search.open_ideas): the parameter whose move made the last
        keep on this rung, one value on in the direction that paid (the trend may go on); a
        parameter walked one way from the best's value that lost there, the other way (the
        coordinate search's own next move); a parameter of the best's rung never moved on it in
        this session, one value either way (the way the engineer leans first). Not the generic
        launch knobs (knobs.KNOBS: min_blocks, main_unroll), which an engineer leaves for last
        (paired, 300 default episodes: 1 of 27 such probes kept, against 16 of 135 of the rungs'
        own parameters). Asked without a draw: the stop rule asks it at every step."""
        if not self.search.open_ideas:
            return []
        v, at, out = self.best.variant, self.best.params, []
        if self.trend is not None:
            name, d = self.trend
            c = self.moved(name, d)
            if c is not None:
                out.append(c)
        names = [n for n in self.tunable(v) if n not in knobs.KNOBS and n not in self.line.settled]
        moved_here = {n for tag, params in self.tried if tag == v.tag for n, value in params if at.get(n) != value}
        for name in names:
            if name in moved_here:
                # walked one way from the best's value and lost there: the other way (the coordinate
                # search's next move, which patience would leave behind)
                lost = [d for d in (1, -1) if self.neighbour_lost(name, d)]
                c = self.moved(name, -lost[0]) if len(lost) == 1 else None
            else:
                d = self.line.lean.get(name, 1)
                c = self.moved(name, d) or self.moved(name, -d)
            if c is not None:
                out.append(c)
        return out

    def neighbour_lost(self, name: str, d: int) -> bool:
        """The best's neighbour one value of `name` in direction `d` was measured no faster than the best."""
        values = knobs.param(self.best.variant, name).values
        i = values.index(self.best.params[name]) + d
        if not 0 <= i < len(values):
            return False
        ms = self.measured_ms(Candidate(self.best.variant, {**self.best.params, name: values[i]}))
        return ms is not None and ms >= self.book.best_ms

    def moved(self, name: str, d: int) -> Candidate | None:
        """The best with `name` one value on in direction `d`, if that is a fresh config."""
        values = knobs.param(self.best.variant, name).values
        i = values.index(self.best.params[name]) + d
        if not 0 <= i < len(values):
            return None
        c = Candidate(self.best.variant, {**self.best.params, name: values[i]})
        return c if self.fresh(c) and not self.starves(self.best, c) else None

    def probed(self) -> bool:
        """Patience never ends a search before the neighbourhood of the best was looked at: a
        neighbour (one parameter one value either way) was tried, or none can be written; with
        search.probe_all, every tunable parameter of the best is settled or was probed both ways
        (each neighbour tried, or one that cannot be written or was measured as another code)."""
        v, at = self.best.variant, self.best.params
        looked = []
        for name in self.tunable(v):
            values = knobs.param(v, name).values
            i = values.index(at[name])
            near = [Candidate(v, {**at, name: values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(values)]
            left = any(self.fresh(c) and not self.starves(self.best, c) for c in near)
            looked.append(name in self.line.settled or not self.worth_tuning(self.best, name) or not left
                          or (not self.search.probe_all and any(c.key in self.tried for c in near)))
        if self.search.probe_all:
            return all(looked) and not self.joints_open()
        return any(looked) or not looked

    def joints_open(self) -> bool:
        """A joint move of interacting parameters of the best is still to try (propose_joint:
        the engineer's habit not yet asked, or moves of it left)."""
        line = self.line
        if line.joints >= self.search.joints or not self.search.interact:
            return False
        pairs = self.interacting(line)
        return bool(pairs) and bool(self.joint_moves(line, lambda moved: INTERACT_LOSS if moved in pairs else None))

    def patience(self) -> int:
        """Fruitless steps in a row the engineer gives the best before converging: the habit's
        patience where the profiler shows HEADROOM x the floor or more left to gain, fewer as
        the best nears its floor (a kernel at 70% of its roofline has at most 1.4x left), down
        to one probe at search.roofline_near."""
        ratio, near = self.book.best_ms / self.floor_ms(self.best.variant), self.search.roofline_near
        if HEADROOM <= near:
            return self.habits.patience
        share = math.log(max(ratio, near) / near) / math.log(HEADROOM / near)
        return max(1, round(self.habits.patience * min(1.0, share)))

    def at_roofline(self) -> bool:
        """The best is near its floor, or launch-bound: tuning it cannot gain past the noise."""
        return self.near_floor(self.best.variant) or self.launch_bound()

    def restore(self, k: int) -> Step | None:
        """The search is over. If the last candidate measured lost by more than RESTORE x the best,
        or the last step failed to build or check (an arch failure, a limit no change could fit),
        the file being edited is not the best: the engineer puts the best back and runs it once
        more, the time it finishes on (a re-measure of the best, never kept). Once; not past the
        time budget."""
        if self.restored or self.time_spent() or not self.last_failed and (
                self.last_ms is None or self.last_ms <= RESTORE * self.book.best_ms):
            return None
        self.restored = True
        return self.evaluate(k, self.best)

    def finish(self, k: int) -> Step | None:
        """The search is over: a long session (search.thorough) first ablates one technique of the
        best, if it ablated none yet (propose_ablation: the best's parameters on the nearest rung
        below not measured slow), to learn what that technique buys; then restore."""
        if self.search.thorough and not self.ablated and not self.time_spent():
            c = self.propose_ablation()
            if c is not None:
                return self.evaluate(k, c)
        return self.restore(k)

    def step(self, k: int) -> Step | None:
        rng = self.rng
        if self.restored:           # the best was put back and re-run: the session is over (its re-measure may move
            return None             # the best's time, and with it patience, but it opens nothing new)
        if self.converged():
            self.stop = self.stop_rule()
            return self.finish(k)
        if self.pending is not None:
            fix, self.pending = self.pending, None
            # an engineer fixes their own slip before anything else, however often the fix itself
            # fails to build (a new slip while repairing the old one)
            again = self.with_slip(fix, self.fix_lines(fix)) if self.search.refail and rng.random() < self.search.refail \
                else None
            if again:
                return self.evaluate(k, again[0], failure=again[1], error=again[2])
            return self.evaluate(k, fix)
        # a rewrite onto a new rung that overflowed is repaired on that rung (smaller tiles, fewer
        # stages) and measured; a tuning move of the best's rung that overflowed, as the profile
        # leans, and always where the search would otherwise end on it (a limit hit is never the
        # session's last word while a change that fits is there to make)
        if self.over is not None:
            if self.over[0].variant.tag not in self.rung_ms:      # a rewrite's first build: its back-off is raised (retile)
                self.raised.add(self.over[0].variant.tag)
            resource = self.over[1]
            c = self.propose_backoff() if self.over[0].variant.tag not in self.rung_ms \
                or (self.search.backoff and rng.random() < self.search.backoff) \
                or self.stop_rule(repair=False) is not None else None
            self.over = None
            if c is not None and c.variant.tag in self.raised and not self.above_carry(c, resource):
                # the back-off lands on the best's own parameters (what a climb writes), or under them in what overflowed:
                # that measurement judges the rung, and there is nothing to write again (kernelinfer s14141-000102 on
                # m22, sliding_window_attn_triton RTX 5090: persistent_tiles backed off 4 -> 3 stages onto the best's
                # config ran 2.3x the best, and was written again, a slow rung's return, once the best's BLOCK_M moved)
                self.retiled.add(c.variant.tag)
            if c is not None:
                return self.evaluate(k, c)
            if self.converged():            # no change that fits: the search ends here
                self.stop = self.stop_rule()
                return self.finish(k)
        if self.close is not None:
            c = self.settle()
            if c is not None:
                return self.evaluate(k, c)
            if self.converged():            # the call just decided was the last thing open
                self.stop = self.stop_rule()
                return self.finish(k)
        c = self.unspill()
        if c is not None:                   # a rewrite measured only spilled: written again, not to spill
            return self.evaluate(k, c)
        c = self.retile()
        if c is not None:                   # a rewrite measured only at tiles raised past the cap: at the best's
            return self.evaluate(k, c)
        u = rng.random()
        expert = self.habits.expert_first and k <= 2 and bool(self.ups())
        if self.owed and u > 0.3:
            got = self.propose_compile_error(k, owed=True)
            if got:
                return self.evaluate(k, got[0], failure=got[1], error=got[2])
            u = rng.random()
        if u < self.p_compile or (expert and u < 0.15):
            got = self.propose_compile_error(k)
            if got:
                return self.evaluate(k, got[0], failure=got[1], error=got[2])
        elif u < self.p_compile + self.p_wrong or (expert and u < 0.5):
            c = self.propose_wrong(k)
            if c is not None:
                return self.evaluate(k, c)
        c = self.propose_move(k)
        if c is None:                        # no rung to climb, the neighbourhood exhausted
            self.stop = "exhausted"
            return self.finish(k)
        if self.slips_owed and self.edited(c) is None:      # a rewrite: the slip a tune did not make (edited)
            got = self.with_slip(c)
            if got is not None:
                self.slips_owed -= 1
                return self.evaluate(k, got[0], failure=got[1], error=got[2])
        if self.bugs_owed and self.edited(c) is None:       # a rewrite: the bug a tune did not make (propose_wrong)
            bugs = self.bugs(c.variant, c.params)
            if bugs:
                self.bugs_owed -= 1
                return self.evaluate(k, replace(c, bug=self.rng.choice(bugs)))
        return self.evaluate(k, c)

    def worth_settling(self, code: str) -> bool:
        """A close call (faster than the best, inside the noise) that re-measuring the pair could
        still decide (could_cross, both sides open); smaller gains are read as ties. At the
        launch floor none is: what the launch knobs move there is the noise."""
        return not self.launch_bound() and self.book.close(code) and self.could_cross(code, (True, False))

    def could_cross(self, code: str, sides: tuple) -> bool:
        """One more run of each of `sides` (True: the best, False: the candidate `code`) could
        still carry the candidate's gain past the keep threshold those runs set: the gain is at
        most SETTLE_REACH standard deviations of what they move the difference of the means
        short of it (a run added to n moves their mean by sigma sqrt(1 + 1/n) / (n + 1)).

        1 run each: a gain of 1 sigma is re-measured (the threshold after both, 2 sigma, is one
        sd of the two runs' move away); after the best's, the candidate's run moves 0.71 sigma."""
        runs, best_runs = len(self.book.runs[code]), self.book.best_runs()
        cv = noise_cv(self.book.best_ms)
        need = required_gain(self.book.best_ms, runs + (False in sides), best_runs + (True in sides))
        move = math.sqrt(sum((1 + 1 / n) / (n + 1) ** 2 for n in (best_runs if b else runs for b in sides)))
        return 1.0 - self.book.mean(code) / self.book.best_ms >= need - SETTLE_REACH * cv * move

    def settle(self) -> Candidate | None:
        """The next re-measure of an open close call: of the best and the candidate, each at most
        once for this pair, the one with fewer runs first (the best on a tie), while the pair's
        runs left could still decide it (could_cross). None once the call is decided: the
        candidate kept, or (a tie, the best stays) nothing left that could cross the threshold."""
        code = self.code(self.close)
        left = tuple(side for side in (True, False) if side not in self.resettled)
        if not self.book.close(code) or not left or not self.could_cross(code, left):
            self.close, self.resettled = None, set()
            return None
        runs, best_runs = len(self.book.runs[code]), self.book.best_runs()
        side = min(left, key=lambda b: (best_runs if b else runs, not b))
        self.resettled.add(side)
        return self.best if side else self.close

    def climbed(self, cand: Candidate) -> None:
        """`cand` is the new best: the search moves there (on the same rung, or from the
        contender's search when the contender won), or starts afresh on a new rung."""
        ms, line = self.book.best_ms, self.contender
        self.trend = None
        # a step down that wins opens the descent; a tune of the new best does not close it (Episode.descent)
        self.descending = self.descending or self.pos[cand.variant.tag] < self.pos[self.best.variant.tag]
        if cand.variant.tag == self.best.variant.tag:
            changed = [n for n in self.tunable(cand.variant) if cand.params[n] != self.best.params.get(n)]
            if len(changed) == 1:
                values = knobs.param(cand.variant, changed[0]).values
                up = values.index(cand.params[changed[0]]) > values.index(self.best.params[changed[0]])
                self.trend = (changed[0], 1 if up else -1)
            self.line.ms = self.measured_ms(self.best)
            self.line = self.line.moved(cand, ms, self.search.reprobe, self.search.across)
        elif line is not None and cand.variant.tag == line.at.variant.tag:
            self.line = line.moved(cand, ms, self.search.reprobe, self.search.across)
        else:
            self.line = self.new_line(cand, ms)
        self.best, self.stale, self.contender, self.close, self.resettled = cand, 0, None, None, set()

    def evidence(self, cand: Candidate, time_ms: float, spilled: bool) -> None:
        """What a measurement says of its rung: a config that did not spill judges it (sane_ms); one
        that spilled only until the rung has such a measurement (spilled_at: Episode.unspill)."""
        tag = cand.variant.tag
        if not spilled:
            self.sane_ms[tag] = min(self.sane_ms.get(tag, time_ms), time_ms)
            self.spilled_at.pop(tag, None)
        elif tag not in self.sane_ms and (tag not in self.spilled_at or time_ms < self.measured_ms(self.spilled_at[tag])):
            self.spilled_at[tag] = cand.clean()

    def evaluate(self, k: int, cand: Candidate, failure: str | None = None, error: str | None = None) -> Step:
        kind = kind_of(cand, self.best, self.late(k))
        # the clock charges a rewrite for a rung written the first time; a tune or a repair of a rung
        # already written (a contender, an ablation, a failed climb) is an edit of that code
        write = "param_sweep" if kind == "structural" and cand.variant.tag in self.rung_tried else kind
        code = self.code(cand)
        if cand.typo is not None:
            self.slip_memory.learn(code, self.m.impl, cand.typo)
            code = with_typo(code, self.m.impl, cand.typo, self.task.gpu.arch if self.task.is_hip else "",
                             self.task.dtype, self.task.shape)[0]
        r = self.sim(cand)
        time_ms, kept, status = None, False, "ok"
        if self.pos[cand.variant.tag] < self.pos[self.best.variant.tag]:
            self.ablated.add(cand.variant.tag)        # a repair of an ablation is the same one
        self.tried.add(cand.key)
        self.rung_tried.add(cand.variant.tag)
        if failure is None and not r.ok:           # the build or launch fails on this GPU
            failure, error = r.error_class, r.error
            if failure == "arch":
                error = messages.arch_error(cand.variant.needs - self.task.gpu.features, self.task, self.m, code)
        if failure is None and cand.bug is not None:
            # a read past an input's end: the first check in a fresh process read wrong values at every
            # no_bounds_check shape and configuration (labels j2, session 12: 107 of 107 on an H100), so a fault is
            # declared only where the rung says so (gemv's over-read, at the shapes whose W has no slack after it)
            fault = cand.variant.faults_at(cand.bug, self.task, cand.params)
            failure = "fault" if fault else "mismatch"
            error = messages.fault_text(cand.bug, self.m, self.task, self.wording) if fault else \
                messages.mismatch_text(cand.bug, self.m, self.task, self.wording, cand.variant, cand.params)
        if failure is not None:
            status = "wrong_result" if failure in ("mismatch", "fault") else "compile_error"
            self.failed_code = code
            undo = {k: knobs.OFF for k in knobs.SLIPS if cand.params.get(k)}
            if undo:                                   # a launch-bound or opt-in slip: write it right next
                self.slipped |= set(undo)
                self.pending = Candidate(cand.variant, {**cand.params, **undo})
            elif failure in ("smem", "resources"):     # a limit hit: learnt, and backed off from next
                hit = self.overflow(cand)
                if hit is not None and self.search.learn_limits:
                    self.limits.learn(cand.variant.tag, *hit)
                if hit is not None:                    # step() decides whether it is backed off
                    self.over = (cand.clean(), hit[0])
            elif failure == "arch" and self.search.learn_limits:
                self.limits.missing |= cand.variant.needs - self.task.gpu.features
            if failure in AUTHOR_FAILURES or cand.typo is not None:     # the author's own slip: fix it next
                self.pending = cand.clean()
                if cand.bug is not None:
                    self.fixed.add(cand.bug)
            self.stale += 1
            self.last_failed = True
        else:
            self.last_failed = False
            self.looks[cand.variant.tag] += 1
            time_ms = self.last_ms = round(measure(r.time_ms, self.noise), 6)
            again = code in self.book.runs              # a re-measure settling a close call: no new idea failed
            if not again:
                self.knob_step(cand, time_ms)
            kept = self.book.record(code, time_ms, k)
            self.measured.add(code)
            tag = cand.variant.tag
            self.rung_ms[tag] = min(self.rung_ms.get(tag, time_ms), time_ms)
            spilled = self.spills(cand)
            self.evidence(cand, time_ms, spilled)
            if not kept and tag not in self.lost_at and self.pos[tag] > self.pos[self.best.variant.tag] \
                    and not spilled:
                self.lost_at[tag] = (time_ms, self.book.best_ms, dict(self.best.params))
            if kept:
                self.climbed(cand)
            else:
                self.contend(cand, time_ms)
                self.stale += not again
                # a close call between the best and another rung is settled once: the next config of that rung
                # inside the noise is read as the tie the first settled (the best's own tunes are each their own call)
                call = (self.best.key, tag) if tag != self.best.variant.tag else None
                if self.close is None and call not in self.calls and self.worth_settling(code) \
                        and self.rng.random() < self.habits.confirm:
                    self.close, self.resettled = cand, set()
                    if call is not None:
                        self.calls.add(call)
        self.last_ok = cand.variant.tag if status == "ok" else None
        self.elapsed += self.timing.step_seconds(self.clock, write, status, self.m.impl, code, kept) * self.pace
        return Step(step=k, kind=kind, tag=cand.variant.tag, params=dict(cand.params), code=code, status=status,
                    failure=failure, bug=cand.bug, typo=cand.typo, time_ms=time_ms, smem_bytes=r.smem_bytes,
                    regs=r.regs, error=error, kept=kept, best_ms=self.book.best_ms, elapsed_s=round(self.elapsed))
