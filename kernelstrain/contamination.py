"""Contamination of held-out tasks by the training data, measured the way the field does.

For each held-out task three sources are compared with training:
  solution   its best reachable candidate (tasks.best_config, rendered) — the answer;
  baseline   the kernel its prompt starts from;
  reference  its PyTorch reference program.
A source is an *exact* match when its normalized form (comments and whitespace stripped,
as KernelBench hashes sources) equals a training candidate's (solutions and baselines
against every baseline and step code of episodes.jsonl) or a training task's reference.
The *n-gram overlap* of a solution or baseline is the largest share of its distinct
13-grams of normalized tokens found in one training candidate. Every CUDA source shares
a prelude (includes, dtype helpers, launch checks) and every Triton one its imports and
wrapper idioms, so raw overlap is high everywhere; the *specific* overlap leaves out the
boilerplate 13-grams: those found in renders of >= 10% of the registry's modules.

>>> tokens("int x = 1; // note\\n/* block */ x += 2.5f;", "cuda")
['int', 'x', '=', '1', ';', 'x', '+=', '2.5f', ';']
>>> tokens("y = f(x)  # note\\n", "python")
['y', '=', 'f', '(', 'x', ')']
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import progress, solution_store
from .fields import as_dict
from .ops import REGISTRY
from .holdout_search import best_config
from .tasks import make_task
from .writers import record_paths

NGRAM = 13
LINES_KEPT = 1 << 14         # distinct lines whose token ids a Matcher keeps (~0.3 KB each)
BOILERPLATE_SHARE = 0.10    # a 13-gram in renders of >= this share of modules is boilerplate

# C/C++/CUDA/HIP: comments and whitespace are skipped (group 1 empty); string and char
# literals stay whole; numbers follow the C preprocessing-number rule; then operators.
_C = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[A-Za-z_]\w*"""
                r"""|\.?\d(?:[eEpP][+-]|[\w.])*|::|->|<<=|>>=|<<|>>|\+\+|--|&&|\|\||[-+*/%&|^!=<>]=|\S)""", re.S)
# Python (Triton): '#' comments and line continuations are skipped; prefixed and
# triple-quoted strings stay whole.
_PY = re.compile(r"""\s+|\\\n|\#[^\n]*|([rRbBuUfF]{0,2}(?:\"\"\"(?:\\.|.)*?\"\"\"|'''(?:\\.|.)*?'''"""
                 r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|[A-Za-z_]\w*|\.?\d(?:[eE][+-]|[\w.])*"""
                 r"""|\*\*=?|//=?|>>=?|<<=?|->|:=|[-+*/%&|^!=<>@]=|\S)""", re.S)
_LEXERS = {"cuda": _C, "python": _PY}
LANG = {"cuda": "cuda", "triton": "python"}     # a module's impl -> the language of its sources


# What may carry a token across a line break: a block comment, a backslash-newline (in a
# string or a Python continuation), a triple-quoted string. A source without any of them has
# the tokens of its lines one after another.
_MULTILINE = {"cuda": ("/*", "\\\n"), "python": ('"""', "'''", "\\\n")}


def tokens(code: str, lang: str) -> list[str]:
    """The source's tokens without comments and whitespace. Line by line where no token can
    span lines: the candidates of a run share most of their lines, each lexed once."""
    if any(mark in code for mark in _MULTILINE[lang]):
        return list(filter(None, _LEXERS[lang].findall(code)))
    out: list = []
    for line in code.split("\n"):
        out += _line_tokens(line, lang)
    return out


# The lines tokens() lexes: the registry's renders (boilerplate), the held-out sources and the references, at a
# run's set-up and end (a Matcher lexes the candidates' lines itself: _code_ids). Lines recur close together
# (a module's rungs in turn): 512 and 2,048 entries keep 60,304 and 61,937 of the 63,637 hits 8,192 did in
# registry_boilerplate, at the same CPU (0.62-0.69 s), where 8,192 (~0.8 KB an entry) held ~6 MB to the run's end
@functools.lru_cache(maxsize=1 << 10)
def _line_tokens(line: str, lang: str) -> tuple:
    return tuple(filter(None, _LEXERS[lang].findall(line)))


def fingerprint(code: str, lang: str) -> str:
    """sha256 of the normalized source: equal for sources that differ only in comments
    and whitespace.

    >>> fingerprint("a  +b // x", "cuda") == fingerprint("a+\\n b", "cuda")
    True
    """
    return _digest(tokens(code, lang))


def shingles(toks: list, n: int = NGRAM) -> set:
    """The distinct n-grams of a token list, as tuples (one for a list shorter than n)."""
    return set(windows(toks, n))


def windows(toks, n: int = NGRAM):
    """Every n-gram of a token list in order, repeats included (the list itself where shorter than n)."""
    if len(toks) < n:
        return [tuple(toks)] if len(toks) else []
    return zip(*(toks[i:] for i in range(n)))


@functools.cache
def boilerplate(n: int = NGRAM) -> frozenset:
    """13-grams (of string tokens) found in renders of >= BOILERPLATE_SHARE of the registry's
    modules: each module's every variant at its default parameters, for its first menu
    shape and dtype, on every catalog GPU that runs it. A function of the package alone:
    kept in solution_store between runs (found again, ~0.5 s, where none is stored)."""
    stored = solution_store.get(("boilerplate", n))
    if stored is not None:
        return frozenset(map(tuple, json.loads(stored)))
    found = registry_boilerplate(n)
    solution_store.put(("boilerplate", n), json.dumps(sorted(found)))
    return found


def registry_boilerplate(n: int) -> frozenset:
    """boilerplate, found in the registry's renders."""
    from .gpus import GPUS
    seen: dict = {}
    for m in REGISTRY.values():
        codes = set()          # most GPUs render a rung alike (2,706 renders, 503 distinct): each lexed once
        for gpu in GPUS.values():
            dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
            if dtype is None:
                continue
            task = make_task(m, gpu.name, dtype, m.shapes[0])
            codes.update(m.render(v, v.defaults(), task) for v in m.variants if not v.needs - gpu.features)
        grams = set().union(*(shingles(tokens(code, LANG[m.impl]), n) for code in codes))
        for g in grams:
            seen[g] = seen.get(g, 0) + 1
    least = max(2, math.ceil(BOILERPLATE_SHARE * len(REGISTRY)))
    return frozenset(g for g, c in seen.items() if c >= least)


_SOLUTIONS: dict = {}     # (module, gpu, dtype, shape) -> solution code: generate, validate and qa
SOLUTIONS_MAX = 4096      # in one process (the tests) measure the same holdout


def solution_code(module, task) -> str:
    """The rendered best reachable candidate of a task (noise-free)."""
    key = (module.name, task.gpu.name, task.dtype, task.shape)
    if key not in _SOLUTIONS:
        _keep_solutions([(key, _solution(*key))])
    return _SOLUTIONS[key]


def _solution(module_name: str, gpu: str, dtype: str, shape: tuple) -> str:
    """solution_code of a key: from the store of an earlier run of this package, else searched (and stored)."""
    key = (module_name, gpu, dtype, shape)
    code = solution_store.get(key)
    if code is None:
        module = REGISTRY[module_name]
        task = make_task(module, gpu, dtype, dict(shape))
        _, variant, params = best_config(module, task)
        code = module.render(variant, params, task)
        solution_store.put(key, code)
    return code


def _keep_solutions(items) -> None:
    if len(_SOLUTIONS) >= SOLUTIONS_MAX:
        _SOLUTIONS.clear()
    _SOLUTIONS.update(items)


def prefetch(keys: list, workers: int, meanwhile=None) -> None:
    """Search the best candidates of the tasks `keys` ((module, gpu, dtype, shape) of
    solution_code) in `workers` forked processes, the boilerplate meanwhile in this one: a
    held-out set's fixed cost, spread over the cores a run has. `meanwhile()`, where given, runs
    here after the boilerplate, in what would be this process's wait for the search."""
    with solutions_ahead(keys, workers):
        boilerplate()
        if meanwhile is not None:
            meanwhile()


@contextlib.contextmanager
def solutions_ahead(keys: list, workers: int):
    """prefetch's search running in `workers` forked processes while the body runs in this
    one; kept on leaving it (nothing is searched ahead with one worker: solution_code searches
    each when asked)."""
    from .pools import fork_pool, running
    with running(lambda: fork_pool(workers) if workers > 1 and len(unsolved(keys)) > 1 else None) as pool:
        if pool is None:
            yield
            return
        search = searching(pool, keys, workers)
        yield
        keep_searched(search)


def unsolved(keys: list) -> list:
    """The keys (of solution_code) not found in this process yet, each once."""
    return list(dict.fromkeys(k for k in keys if k not in _SOLUTIONS))


def searching(pool, keys: list, workers: int) -> tuple:
    """The unsolved keys' searches handed to `pool` (of `workers` processes, in pools.running): (the keys,
    the pending answers), for keep_searched."""
    from .pools import submitted
    todo = unsolved(keys)
    # small chunks: the searches take 1-80 ms a task, and with 4 chunks a worker the last one left a worker
    # idle for ~0.2 s of the default profile's ~1.1 s a worker (32 a worker: within 0.02 s)
    return todo, submitted(pool.starmap_async, _solution, todo, chunksize=max(1, len(todo) // (32 * workers)))


def keep_searched(search: tuple) -> None:
    """Wait for `searching`'s answers and keep them (solution_code finds them)."""
    from .pools import result
    todo, found = search
    _keep_solutions(zip(todo, result(found)))


def solution_keys(tasks) -> list:
    """The keys of solution_code (and prefetch) of held-out tasks."""
    return [(t.module, t.gpu.name, t.dtype, t.shape) for t in tasks]


@functools.lru_cache(maxsize=2)
def matcher_of(targets: tuple) -> Matcher:
    """The Matcher of a held-out set, built once per process (a Matcher is read-only once built), and kept in
    solution_store between runs, keyed by a digest of its targets: a profile's held-out set is the same for
    every seed (its holdout table draws it), and building it (lexing, 13-grams, posting classes) was the largest
    fixed cost a run with a warm store still paid (~0.45 s on idle cores; reading it back ~2.5x less)."""
    key = None if solution_store.store_dir() is None else (       # (no digest of ~3 MB of sources without a store)
        "matcher", NGRAM, hashlib.sha256(json.dumps(targets).encode()).hexdigest())
    stored = key and solution_store.get(key)
    if stored:
        return Matcher.from_state(json.loads(stored))
    built = Matcher(list(targets))
    if key:
        solution_store.put(key, json.dumps(built.state()))
    return built


class Matcher:
    """The held-out sources, indexed so that one training candidate is compared with all
    of them at once. Tokens become small ints (a per-process vocabulary) for speed."""

    def __init__(self, targets: list[tuple[str, str]]):
        """targets: (code, lang) of each held-out solution or baseline."""
        self.vocab: dict = {}
        self.fresh_ids = itertools.count()
        # ids in a fixed order, so a spawned worker's Matcher numbers everything alike
        plate = {self._ids(g) for g in sorted(boilerplate())}
        self.plate_rank = {g: i for i, g in enumerate(sorted(plate))}
        self.fingerprints: dict = {}        # fingerprint -> target indices
        self.exact: dict = {}               # token ids -> target indices (scan: the same matches, see _code_ids)
        self.sizes, self.specific_sizes, self.plates = [], [], []   # plates: bit masks (see scan)
        # each distinct source indexed once (the default profile's 692 targets are 305 sources:
        # a baseline or a solution serves several held tasks), in the order it first appears
        sources: dict = {}                  # (code, lang) -> (fingerprint, specific shingles, its targets)
        for i, (code, lang) in enumerate(targets):
            if (code, lang) not in sources:
                toks = tokens(code, lang)
                ids = self._ids(toks)
                grams = shingles(ids)
                specific = [g for g in grams if g not in self.plate_rank]
                plated = sum(1 << self.plate_rank[g] for g in grams if g in self.plate_rank)
                sources[code, lang] = toks, _digest(toks), specific, [], len(grams), plated, ids
            else:       # its ids again: _ids draws one fresh id a token, so the vocabulary stays as it was
                self._ids(sources[code, lang][0])
            _, fingerprint, specific, mine, size, plated, ids = sources[code, lang]
            self.fingerprints.setdefault(fingerprint, []).append(i)
            self.exact.setdefault(ids, []).append(i)
            mine.append(i)
            self.sizes.append(size)
            self.specific_sizes.append(len(specific))
            self.plates.append(plated)
        # Shingles with the same targets share one posting class: a candidate's hits are
        # counted per class, then spread to its targets (the same module's held tasks
        # share most shingles, so classes are few and large).
        index, classes = posting_classes([(specific, mine) for _, _, specific, mine, *_ in sources.values()])
        self.members = list(classes)
        # one lookup a candidate's 13-gram: a small int naming the shingle (its hash and equality
        # are the tuple's only once, here), then the shingle's class (>= 0) or its boilerplate rank
        # r as -1 - r (entry)
        lookup = {**index, **{g: -1 - r for g, r in self.plate_rank.items()}}
        self.shingle_id = dict(zip(lookup, range(len(lookup))))
        self.entry = list(lookup.values())
        self._last = None           # the last scan's (token ids, shingle ids): see _shingle_seq
        self._counted = None        # the last scan's counts (shingle ids, occurrences, hits, mask): see _counts
        self._line_ids = {lang: {} for lang in _LEXERS}     # a line -> its token ids (_code_ids)
        self._line_shingles: dict = {}      # (a line's ids, the next NGRAM - 1 ids) -> shingle ids (_line_shingle_seq)

    def state(self) -> dict:
        """The index as JSON's types (a built Matcher's; from_state reads it back): what scan reads, the
        shingle ids as their shingles in id order."""
        return {"vocab": self.vocab, "fingerprints": self.fingerprints, "exact": [[*k, v] for k, v in self.exact.items()],
                "sizes": self.sizes, "specific_sizes": self.specific_sizes, "plates": self.plates,
                "members": self.members, "shingles": list(self.shingle_id), "entry": self.entry}

    @classmethod
    def from_state(cls, state: dict) -> "Matcher":
        """The Matcher whose state() this is (the lists of JSON back to the tuples the look-ups key by)."""
        m = cls.__new__(cls)
        m.__setstate__({"vocab": state["vocab"], "fingerprints": state["fingerprints"],
                        "exact": {tuple(k[:-1]): k[-1] for k in state["exact"]},
                        "sizes": state["sizes"], "specific_sizes": state["specific_sizes"], "plates": state["plates"],
                        "members": list(map(tuple, state["members"])),
                        "shingle_id": dict(zip(map(tuple, state["shingles"]), itertools.count())),
                        "entry": state["entry"]})
        return m

    def __getstate__(self) -> dict:
        """What a worker needs of a built Matcher (generation hands it over by file): the index, without
        the scans' caches (rebuilt as it scans) or the id counter (itertools.count pickles no more in
        Python 3.14; a handed-over Matcher draws no id: scan looks tokens up, _known_ids)."""
        state = dict(self.__dict__)
        for cache in ("fresh_ids", "_last", "_counted", "_line_ids", "_line_shingles"):
            state.pop(cache)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.fresh_ids = itertools.count(max(self.vocab.values(), default=-1) + 1)
        self._last = self._counted = None
        self._line_ids = {lang: {} for lang in _LEXERS}
        self._line_shingles = {}

    def _ids(self, toks) -> tuple:
        """Token ids, new tokens getting fresh ones (held-out sources, boilerplate)."""
        return tuple(map(self.vocab.setdefault, toks, self.fresh_ids))

    def _known_ids(self, toks) -> tuple:
        """Token ids, -1 for tokens no held-out source has: a 13-gram holding one cannot
        match, and the vocabulary stays the held-out sources' size."""
        return tuple(map(self.vocab.get, toks, itertools.repeat(-1)))

    def scan(self, code: str, lang: str) -> tuple[list, int, dict]:
        """(targets this candidate equals after normalization, its boilerplate 13-grams as a bit
        mask of their ranks, {target: specific 13-grams shared}) for one training candidate. A
        mask's size in common with another is (a & b).bit_count(): hundreds of targets' boilerplate
        are compared with every distinct candidate's (as sets of ranks: 0.57 s of 300 episodes'
        tallies, as masks 0.06 s)."""
        ids, parts = self._code_ids(code, lang)
        seq = self._shingle_seq(ids) if parts is None else self._line_shingle_seq(ids, parts)
        plated, hits = self._counts(seq)
        return self.exact.get(ids, []), plated, hits

    def _code_ids(self, code: str, lang: str) -> tuple[tuple, list | None]:
        """(_known_ids of the source's tokens, each line's ids or None), line by line where
        tokens() lexes it so (each distinct line looked up once a process: a run's candidates
        share most of their lines). A candidate's ids equal a target's exactly when their token
        lists are equal (every target token has an id, an unknown token is -1): the exact match
        fingerprint() gives."""
        if any(mark in code for mark in _MULTILINE[lang]):
            return self._known_ids(tokens(code, lang)), None
        lines, lexer = self._line_ids[lang], _LEXERS[lang]
        parts = []
        for line in code.split("\n"):
            ids = lines.get(line)
            if ids is None:
                if len(lines) >= LINES_KEPT:
                    lines.clear()
                ids = lines[line] = self._known_ids(filter(None, lexer.findall(line)))
            parts.append(ids)
        return tuple(itertools.chain.from_iterable(parts)), parts

    def _line_shingle_seq(self, ids: tuple, parts: list) -> tuple:
        """_shingle_seq of a source lexed line by line (`parts`: each line's ids, `ids` them
        joined): the 13-grams that start in a line are those of its ids followed by the next
        NGRAM - 1 ids of the source, so they are looked up once a process for each (line,
        what follows it), and a candidate is a few dozen such look-ups (a run's candidates
        share most lines and most lines' successors: 300 default episodes, 0.82 -> 0.48 s with
        _code_ids; their 13-grams, 3.1 million, are 11,182 (line, next ids) pairs)."""
        if len(ids) < NGRAM:
            return tuple(map(self.shingle_id.get, windows(ids)))
        lookup, known = self.shingle_id.get, self._line_shingles
        seq: list = []
        start = 0
        for part in parts:
            if not part:
                continue
            end = start + len(part)
            after = ids[end:end + NGRAM - 1]
            found = known.get((part, after))
            if found is None:
                if len(known) >= LINES_KEPT:
                    known.clear()
                span = part + after      # its 13-grams: those that start in the line and hold 13 ids
                found = known[part, after] = tuple(map(lookup, zip(*(span[i:] for i in range(NGRAM)))))
            seq += found
            start = end
        return tuple(seq)

    def _counts(self, seq: tuple) -> tuple[int, dict]:
        """(boilerplate mask, {target: specific 13-grams shared}) of a candidate's shingle ids:
        each distinct shingle a target has counted once, for every target of its posting class.
        The candidates of an episode differ in a few places: where this one's sequence differs
        from the last one's only between a common prefix and suffix, in a quarter of its length, the
        last one's counts are updated by the shingles that left and came (their occurrences
        kept, so a shingle counts while it occurs at all); else counted afresh. Taken and put
        back whole, as _shingle_seq's."""
        counted, self._counted = self._counted, None
        entry, members = self.entry, self.members
        if counted is not None:
            old, occ, hits, plated = counted
            head = common_prefix(seq, old)
            tail = common_suffix(seq, old, min(len(seq), len(old)) - head)
            gone, came = old[head:len(old) - tail], seq[head:len(seq) - tail]
            if 4 * (len(gone) + len(came)) <= len(seq):      # (300 default episodes: 0.52 s afresh, 0.31 s so)
                for s in gone:
                    if s is None:
                        continue
                    n = occ[s] - 1
                    if n:
                        occ[s] = n
                        continue
                    del occ[s]
                    e = entry[s]
                    if e < 0:           # a boilerplate shingle: its own entry, its own bit
                        plated &= ~(1 << (-1 - e))
                        continue
                    for i in members[e]:
                        n = hits[i] - 1
                        if n:
                            hits[i] = n
                        else:
                            del hits[i]
                for s in came:
                    if s is None:
                        continue
                    n = occ.get(s, 0)
                    occ[s] = n + 1
                    if n:
                        continue
                    e = entry[s]
                    if e < 0:
                        plated |= 1 << (-1 - e)
                        continue
                    for i in members[e]:
                        hits[i] = hits.get(i, 0) + 1
                self._counted = seq, occ, hits, plated
                return plated, dict(hits)
        occ = Counter(seq)          # its distinct shingles a target has, with their occurrences
        occ.pop(None, None)
        found = Counter(map(entry.__getitem__, occ))
        plated, hits = 0, {}
        for e, shared in found.items():
            if e < 0:
                plated |= 1 << (-1 - e)
                continue
            for i in members[e]:
                hits[i] = hits.get(i, 0) + shared
        self._counted = seq, occ, hits, plated
        return plated, dict(hits)


    def _shingle_seq(self, ids: tuple) -> tuple:
        """shingle_id of each 13-gram of `ids` in order (None where no target has it). The
        candidates of an episode differ from one another in a few places (a parameter's value, a
        rewritten loop): the 13-grams inside the token prefix and suffix a candidate shares with
        the one scanned before it in this process are that one's, so only those between are
        looked up (~a third of them over 150 default episodes). The last scan's (ids, ids) pair
        is one attribute, replaced whole, so threads that share a Matcher read a consistent one."""
        lookup = self.shingle_id.get
        last, self._last = self._last, None
        n = len(ids)
        if last is None or n < NGRAM or len(last[0]) < NGRAM:
            seq = tuple(map(lookup, windows(ids)))
        else:
            old, old_seq = last
            head = common_prefix(ids, old)
            tail = common_suffix(ids, old, min(n, len(old)) - head)
            a, b = max(0, head - NGRAM + 1), max(0, tail - NGRAM + 1)    # 13-grams wholly in the prefix, the suffix
            between = ids[a:n - b]        # >= NGRAM - 1 ids: its 13-grams, none where it holds 12
            seq = old_seq[:a] + tuple(map(lookup, zip(*(between[i:] for i in range(NGRAM))))) + old_seq[len(old_seq) - b:]
        self._last = ids, seq
        return seq


def common_prefix(a: tuple, b: tuple) -> int:
    """The length of the longest common prefix of two tuples (a binary search of slice compares).

    >>> common_prefix((1, 2, 3, 4), (1, 2, 5)), common_prefix((), (1,)), common_prefix((1, 2), (1, 2))
    (2, 0, 2)
    """
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: tuple, b: tuple, most: int) -> int:
    """The length (at most `most`) of the longest common suffix of two tuples.

    >>> common_suffix((1, 2, 3, 4), (9, 3, 4), 3), common_suffix((1, 2, 3, 4), (9, 3, 4), 1), common_suffix((1,), (2,), 1)
    (2, 1, 0)
    """
    lo, hi, n, m = 0, max(0, most), len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[n - mid:n - lo] == b[m - mid:m - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def posting_classes(sources: list) -> tuple[dict, dict]:
    """({shingle: its class}, {class's target indices, sorted: class}) of the held-out sources
    ((specific shingles, target indices) each): a class is the sorted tuple of every target of
    the sources that hold a shingle, numbered as first met (sources in order, each one's
    shingles in order). A shingle's sources are listed first and each distinct list of them is
    sorted into its targets once (the default profile: ~75,000 shingles, a few hundred lists).

    >>> posting_classes([(["a", "b"], [0, 2]), (["b", "c"], [1])])
    ({'a': 0, 'b': 1, 'c': 2}, {(0, 2): 0, (0, 1, 2): 1, (1,): 2})
    """
    held: dict = {}                     # shingle -> the sources (their places in `sources`) holding it
    for s, (specific, _) in enumerate(sources):
        for g in specific:
            held.setdefault(g, []).append(s)
    classes: dict = {}
    of_list: dict = {}                  # a tuple of sources -> its class
    index = {}
    for g, places in held.items():
        places = tuple(places)
        c = of_list.get(places)
        if c is None:
            targets = tuple(sorted(t for s in places for t in sources[s][1]))
            c = of_list[places] = classes.setdefault(targets, len(classes))
        index[g] = c
    return index, classes


def _digest(toks) -> str:
    return hashlib.sha256("\x00".join(toks).encode()).hexdigest()


class Tally:
    """Per target: exact match seen, largest raw and specific shared 13-gram counts. Tallies
    merge (every figure is a max, a union or a count of distinct candidates), so the parts
    workers fold from their episodes add up to the tally of the whole file."""

    def __init__(self, matcher: Matcher):
        self.m = matcher
        self.exact: set = set()
        self.raw: dict = {}               # target -> largest raw shared count
        self.specific: dict = {}          # target -> largest specific shared count
        self.plate_groups: set = set()    # the distinct boilerplate masks of the candidates
        self.candidates = 0

    def add(self, result) -> None:
        equal, plated, hits = result
        self.candidates += 1
        self.exact.update(equal)
        self.plate_groups.add(plated)
        plates, raw, specific = self.m.plates, self.raw, self.specific
        common: dict = {}             # a target's boilerplate mask -> its size in common with this candidate's
        for i, shared in hits.items():
            if shared > specific.get(i, 0):
                specific[i] = shared
            mine = plates[i]
            both = common.get(mine)
            if both is None:
                both = common[mine] = (mine & plated).bit_count()
            both += shared
            if both > raw.get(i, 0):
                raw[i] = both

    def part(self) -> tuple:
        """The figures alone (no matcher), to send from a worker: see merge."""
        return self.exact, self.raw, self.specific, self.plate_groups

    def merge(self, part: tuple) -> None:
        """Fold in another tally's part (candidates are counted by the caller, by key)."""
        exact, raw, specific, plate_groups = part
        self.exact |= exact
        self.plate_groups |= plate_groups
        for mine, theirs in ((self.raw, raw), (self.specific, specific)):
            for i, shared in theirs.items():
                if shared > mine.get(i, 0):
                    mine[i] = shared

    def overlaps(self) -> list[tuple[float, float]]:
        """(raw, specific) overlap share of each target; a candidate sharing no specific
        13-gram still shares its boilerplate, so raw takes the best boilerplate group too."""
        out, best_plate = [], {}
        for i, size in enumerate(self.m.sizes):
            mine = self.m.plates[i]
            if mine not in best_plate:
                best_plate[mine] = max(((mine & g).bit_count() for g in self.plate_groups), default=0)
            plate = best_plate[mine]
            raw = max(self.raw.get(i, 0), plate) / size if size else 0.0
            spec = self.specific.get(i, 0) / self.m.specific_sizes[i] if self.m.specific_sizes[i] else 0.0
            out.append((raw, spec))
        return out


def candidate_key(code: str) -> bytes:
    """What training candidates are deduplicated by: their raw bytes."""
    return hashlib.blake2b(code.encode(), digest_size=16).digest()


def task_key(ep: dict) -> tuple:
    """A training episode's task: (module, gpu, dtype, shape json)."""
    return ep["module"], ep["gpu"], ep["dtype"], json.dumps(ep["shape"])


def episode_candidates(ep: dict):
    """(code, lang) of an episode row's candidates: its baseline, then each step's code."""
    lang = LANG[ep["impl"]]
    for code in [ep["baseline"]["code"]] + [s["code"] for s in ep["steps"]]:
        yield code, lang


def training_candidates(episodes_paths: list, as_episode):
    """(code, lang) of every distinct training candidate (baselines and steps) of files of
    one row per episode (`as_episode`: a row -> its public episode row, layouts.Layout.episode:
    a session's code re-rendered from its trace), deduplicated by raw bytes, and the set of
    training task keys."""
    seen: set = set()
    tasks: set = set()

    def gen():
        for path in episodes_paths:
            yield from lines(path)

    def lines(episodes_path):
        with open(episodes_path, "rb") as fh:
            for line in progress.lines(fh, f"contamination: reading {episodes_path.name}"):
                ep = as_episode(json.loads(line))
                tasks.add(task_key(ep))
                for code, lang in episode_candidates(ep):
                    key = candidate_key(code)
                    if key not in seen:
                        seen.add(key)
                        yield code, lang
    return gen(), tasks


def read_splits(data: Path, split_files: dict) -> dict:
    """{split: its held-out rows} of a dataset directory (split name -> holdout file name)."""
    return {name: [json.loads(line) for line in open(data / f, encoding="utf-8")] for name, f in split_files.items()}


class Targets:
    """The held-out sources of every split's rows (a task's solution and baseline, once per
    task) with their Matcher, and each task's reference fingerprint."""

    def __init__(self, rows: dict, workers: int = 1, meanwhile=None):
        """`meanwhile`: run in this process while the workers search the solutions (prefetch)."""
        # each split's (task id, task key) of its rows: what `figures` reads of them (the decoded rows,
        # prompts and codes, held ~13 MB of a run's peak RSS to the end)
        self.rows = {name: [(r["task_id"], _row_key(r)) for r in split_rows] for name, split_rows in rows.items()}
        tasks = {}                        # task key -> (row, module, task), once per task
        for split_rows in rows.values():
            for r in split_rows:
                key = _row_key(r)
                if key not in tasks:
                    module = REGISTRY[r["module"]]
                    tasks[key] = r, module, make_task(module, r["gpu"], r["dtype"], as_dict(r["shape"]))
        prefetch(solution_keys(t for _, _, t in tasks.values()), workers, meanwhile)
        targets, self.keys, self.references = [], {}, {}
        for key, (r, module, task) in tasks.items():
            self.keys[key] = len(targets)
            targets.append((solution_code(module, task), LANG[module.impl]))
            targets.append((r["baseline"]["code"], LANG[module.impl]))
            self.references[key] = fingerprint(r["reference"], "python")
        self.matcher = matcher_of(tuple(targets))

    def figures(self, tally: Tally, train_tasks: set) -> dict:
        """measure's result from the tally of every training candidate and the training tasks."""
        train_refs = set()
        for module_name, gpu, dtype, shape in train_tasks:
            module = REGISTRY[module_name]
            train_refs.add(fingerprint(module.reference(make_task(module, gpu, dtype, json.loads(shape))), "python"))
        overlaps = tally.overlaps()
        out, details = {}, {}
        for name, split_rows in self.rows.items():
            per_task = []
            for task_id, key in split_rows:
                s, b = self.keys[key], self.keys[key] + 1
                per_task.append({"task_id": task_id, "solution_exact": s in tally.exact,
                                 "baseline_exact": b in tally.exact, "reference_exact": self.references[key] in train_refs,
                                 "solution_ngram": overlaps[s][0], "solution_ngram_specific": overlaps[s][1],
                                 "baseline_ngram": overlaps[b][0], "baseline_ngram_specific": overlaps[b][1]})
            out[name] = summarize(per_task)
            details[name] = per_task
        return {"splits": out, "training_candidates": tally.candidates, "per_task": details,
                "training_tasks": train_tasks}


def _row_key(r: dict) -> tuple:
    """A held-out row's task: (module, gpu, dtype, shape json)."""
    return r["module"], r["gpu"], r["dtype"], json.dumps(r["shape"], sort_keys=True)


def measure(data: Path, split_files: dict, layout, workers: int = 1) -> dict:
    """Contamination of every split (name -> holdout file name) of a dataset directory by
    its training files (the one-row-per-episode file of its layout, a layouts.Layout, and its
    validation file): {"splits": {split: summary (see `summarize`)},
    "training_candidates": distinct count, "per_task": {split: [figures of each task]},
    "training_tasks": {(module, gpu, dtype, shape json)}}. With `workers` > 1, forked
    processes scan chunks of the file (see Incremental) and search the solutions."""
    from .pools import fork_pool, ordered_map, running
    targets = Targets(read_splits(data, split_files), workers)
    training = record_paths(data / layout.episode_file)    # the train split's file, then the validation split's
    global _MEASURING, _AS_EPISODE
    _MEASURING = scan = Incremental(targets)        # set before the fork: the pool's workers hold them
    _AS_EPISODE = layout.episode
    try:
        with running(lambda: fork_pool(workers) if workers > 1 else None) as pool:
            if pool is None:
                candidates, scan.train_tasks = training_candidates(training, layout.episode)
                for code, lang in candidates:
                    scan.tally.add(targets.matcher.scan(code, lang))
                return targets.figures(scan.tally, scan.train_tasks)
            for path in training:
                with open(path, "rb") as fh:       # lines as training_candidates reads them (a \r is no line end)
                    for parts in ordered_map(pool, _scan_lines, _chunks(fh, LINES_A_CHUNK), 4 * workers):
                        for part in parts:
                            scan.add(part)
        return scan.result()
    finally:
        _MEASURING = None


LINES_A_CHUNK = 16
_MEASURING: "Incremental | None" = None
_AS_EPISODE = None       # the layout's row -> public episode row, for the pool's workers


def _chunks(lines, n: int):
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _scan_lines(lines: list) -> list:
    """In a pool worker: the contamination parts of a chunk of training lines."""
    return [_MEASURING.part(_AS_EPISODE(json.loads(line))) for line in lines]


class Incremental:
    """`measure` computed while the episodes are generated: each worker scans its episodes'
    candidates as it builds them (`part`), the parent merges the parts (`add`) and `result`
    equals `measure` on the finished files. Candidates are counted once by their raw bytes
    (as training_candidates does); a worker skips those it has already scanned (merging a
    candidate's figures twice changes nothing). A worker forked before the matcher was built
    sends its episodes' candidates unscanned (Waiting) until it is handed the matcher; `add`
    scans those here."""

    def __init__(self, targets: Targets | None, matcher: Matcher | None = None, scanned: set | None = None):
        self.targets = targets
        self.matcher = targets.matcher if targets is not None else matcher
        self.scanned: set = scanned if scanned is not None else set()     # worker side: keys this process has scanned
        self.tally = Tally(self.matcher)
        self.keys: set = set()             # parent side: distinct candidate keys
        self.train_tasks: set = set()

    def part(self, ep: dict) -> tuple:
        """One episode row's contribution: (its task, its new candidate keys, tally part)."""
        return self.scanned_part(task_key(ep), new_candidates(ep, self.scanned))

    def scanned_part(self, task: tuple, candidates: list) -> tuple:
        """part's tuple of the task's candidates ((key, code, lang) each), scanned here."""
        tally = Tally(self.matcher)
        for _, code, lang in candidates:
            tally.add(self.matcher.scan(code, lang))
        return task, [key for key, _, _ in candidates], tally.part()

    def add(self, part) -> None:
        if isinstance(part, Waiting):     # (those this process merged already change nothing: skipped)
            part = self.scanned_part(part.task, [c for c in part.candidates if c[0] not in self.keys])
        task, keys, figures = part
        self.train_tasks.add(task)
        self.keys.update(keys)
        self.tally.merge(figures)

    def result(self) -> dict:
        self.tally.candidates = len(self.keys)
        return self.targets.figures(self.tally, self.train_tasks)


def new_candidates(ep: dict, scanned: set) -> list:
    """(key, code, lang) of the episode's candidates whose keys are not in `scanned` (added to it)."""
    out = []
    for code, lang in episode_candidates(ep):
        key = candidate_key(code)
        if key not in scanned:
            scanned.add(key)
            out.append((key, code, lang))
    return out


@dataclass(frozen=True)
class Waiting:
    """An episode's contribution from a worker that has no matcher yet: its task and its new
    candidates ((key, code, lang) each), for the parent to scan (Incremental.add)."""
    task: tuple
    candidates: list


class Unmatched:
    """A worker's Incremental before the parent has built the matcher (generation's early pool):
    each episode's new candidates sent unscanned (Waiting); `handed` the matcher, it scans its
    episodes' candidates itself from then on, those it sent already skipped."""

    def __init__(self):
        self.scanned: set = set()

    def part(self, ep: dict) -> Waiting:
        return Waiting(task_key(ep), new_candidates(ep, self.scanned))

    def handed(self, matcher: Matcher) -> Incremental:
        return Incremental(None, matcher, self.scanned)


def summarize(per_task: list[dict]) -> dict:
    """A split's figures: tasks, exact matches by source, n-gram overlap max and mean."""
    def share(key):
        values = [t[key] for t in per_task]
        return {"max": round(max(values, default=0.0), 4), "mean": round(sum(values) / max(1, len(values)), 4)}
    return {
        "tasks": len(per_task),
        "exact": {"solution": sum(t["solution_exact"] for t in per_task),
                  "baseline": sum(t["baseline_exact"] for t in per_task),
                  "reference": sum(t["reference_exact"] for t in per_task),
                  "any": sum(t["solution_exact"] or t["baseline_exact"] or t["reference_exact"] for t in per_task)},
        "ngram": {k: share(k) for k in ("solution_ngram", "solution_ngram_specific",
                                        "baseline_ngram", "baseline_ngram_specific")},
    }


def method(training_candidates: int) -> dict:
    """What the contamination figures measure, for stats.json and the card."""
    least = max(2, math.ceil(BOILERPLATE_SHARE * len(REGISTRY)))
    return {
        "normalization": "comments and whitespace stripped (C/CUDA/HIP: // and /* */; Python: #), "
                         "string literals kept whole; exact = equal sha256 of the token sequence",
        "solution": "the task's best reachable candidate (tasks.best_config), rendered",
        "training": "every distinct baseline and step code of episodes.jsonl; references of its tasks",
        "ngram": NGRAM,
        "ngram_overlap": f"largest share of a source's distinct {NGRAM}-grams of normalized tokens "
                         "found in one training candidate",
        "specific": f"the same without boilerplate {NGRAM}-grams: those in renders of >= {least} of the "
                    f"registry's {len(REGISTRY)} modules ({len(boilerplate())} {NGRAM}-grams)",
        "training_candidates": training_candidates,
    }
