"""The speed work's shortcuts give the answers of the plain computation they replace."""
import random

from kernelstrain import contamination


def plain_posting_classes(sources):
    """Matcher's posting classes as first written: each shingle's targets gathered and sorted."""
    postings = {}
    for specific, mine in sources:
        for g in specific:
            postings.setdefault(g, []).extend(mine)
    classes = {}
    index = {g: classes.setdefault(tuple(sorted(ts)), len(classes)) for g, ts in postings.items()}
    return index, classes


def test_posting_classes_equal_the_plain_sort_on_random_sources():
    rng = random.Random(7)
    for _ in range(200):
        targets = list(range(rng.randrange(1, 30)))
        rng.shuffle(targets)
        sources, at = [], 0
        while at < len(targets):           # each target belongs to one source, as in Matcher
            n = rng.randrange(1, 4)
            sources.append(([rng.randrange(40) for _ in range(rng.randrange(0, 12))], targets[at:at + n]))
            at += n
        sources = [(list(dict.fromkeys(g)), mine) for g, mine in sources]     # a source's shingles are distinct
        got, want = contamination.posting_classes(sources), plain_posting_classes(sources)
        assert got == want and list(got[0]) == list(want[0]) and list(got[1]) == list(want[1])


def plain_shingle_seq(matcher, ids):
    """Matcher._shingle_seq as first written: every 13-gram looked up."""
    return tuple(map(matcher.shingle_id.get, contamination.windows(ids)))


def test_shingle_seq_after_any_candidate_equals_every_13_gram_looked_up():
    """The 13-grams a candidate shares, as a prefix or a suffix, with the one scanned before it are taken
    from that one's: pairs of token lists with common prefixes and suffixes of every length around
    NGRAM (shorter lists too), each against the plain lookup."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    codes = [m.render(v, v.defaults(), task) for v in m.variants[:3]]
    matcher = contamination.Matcher([(code, "cuda") for code in codes])
    base = matcher._known_ids(contamination.tokens(codes[0], "cuda"))
    rng = random.Random(11)
    pool = sorted(set(base)) + [-1]
    cases = 0
    for _ in range(400):
        head, tail, mid_old, mid_new = (rng.choice([0, 1, 5, 11, 12, 13, 14, 25, 60]) for _ in range(4))
        start = rng.randrange(0, len(base) - head - tail)
        prefix, suffix = base[start:start + head], base[start + head:start + head + tail]
        old = prefix + tuple(rng.choice(pool) for _ in range(mid_old)) + suffix
        new = prefix + tuple(rng.choice(pool) for _ in range(mid_new)) + suffix
        matcher._last = None
        assert matcher._shingle_seq(old) == plain_shingle_seq(matcher, old)
        assert matcher._shingle_seq(new) == plain_shingle_seq(matcher, new), (head, tail, mid_old, mid_new)
        cases += 1
    # the renders one after another, as an episode's candidates come: the same scans as with no last one
    for code in codes + codes[::-1]:
        got = matcher.scan(code, "cuda")
        matcher._last = None
        assert got == matcher.scan(code, "cuda")
    assert cases == 400



def test_line_shingle_seq_equals_every_13_gram_looked_up(monkeypatch):
    """A line-lexed candidate's 13-grams, taken once a (line, next 12 ids) pair: the plain lookup
    of every 13-gram of its ids, for renders edited line by line (lines dropped, doubled, emptied,
    cut to a few tokens, moved to the end: 13-grams that span lines, lines shorter than 12 ids,
    sources shorter than 13 ids), each asked twice (the second answer from the cache), with a
    cache bound of 50 pairs (cleared on the way)."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    monkeypatch.setattr(contamination, "LINES_KEPT", 50)
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    codes = [m.render(v, v.defaults(), task) for v in m.variants[:3]]
    matcher = contamination.Matcher([(code, "cuda") for code in codes[:2]])     # codes[2]'s own lines: unknown ids
    rng = random.Random(3)
    lines = [line for code in codes for line in code.split("\n") if "/*" not in line and "\\" not in line]
    cases = 0
    for _ in range(300):
        start = rng.randrange(len(lines))
        picked = lines[start:start + rng.choice([1, 2, 5, 40, 200])]
        picked = [rng.choice(["", line[:rng.randrange(12)], line, line + " " + line]) if rng.random() < 0.2 else line
                  for line in picked]
        code = "\n".join(picked)
        for _ in range(2):
            ids, parts = matcher._code_ids(code, "cuda")
            if parts is None:
                continue
            assert ids == matcher._known_ids(contamination.tokens(code, "cuda"))
            assert matcher._line_shingle_seq(ids, parts) == plain_shingle_seq(matcher, ids)
            cases += 1
    assert cases > 500 and matcher._line_shingles


def test_counts_after_any_candidate_equal_a_count_afresh():
    """Matcher._counts updated from the last candidate's counts (the shingles that left and came
    between a common prefix and suffix) equals the count of the candidate alone: sequences of
    shingle ids (None: no target has it) with repeats, edits of every size, and empty ones."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    codes = [m.render(v, v.defaults(), task) for v in m.variants[:3]]
    matcher = contamination.Matcher([(code, "cuda") for code in codes])
    rng = random.Random(5)
    ids = list(range(len(matcher.entry))) + [None] * 20
    seq = tuple(rng.choice(ids) for _ in range(400))
    matcher._counts(seq)
    updated = 0
    for _ in range(600):
        cut = rng.randrange(len(seq) + 1)
        drop = rng.choice([0, 1, 3, 10, 60, 400])
        pool = ids[:40] if rng.random() < 0.5 else ids          # repeats of a few shingles, or any
        new = seq[:cut] + tuple(rng.choice(pool) for _ in range(rng.choice([0, 1, 2, 7, 50]))) + seq[cut + drop:]
        if rng.random() < 0.05:
            new = ()
        last = matcher._counted
        got = matcher._counts(new)
        updated += matcher._counted[1] is last[1]       # its occurrences updated in place: the update's path
        kept, matcher._counted = matcher._counted, None
        assert got == matcher._counts(new)
        matcher._counted = kept
        seq = new
    assert updated > 200


def test_tokens_digit_count_on_bytes_equals_the_ten_str_counts():
    """messages.tokens counts digits on the UTF-8 bytes: the same count as str.count of "0".."9"
    over texts mixing ASCII digits, other scripts' digits (Arabic-Indic, fullwidth, superscripts),
    multi-byte characters whose bytes are >= 0x80, and lone surrogates."""
    import math
    from kernelstrain.messages import PER_CHAR, PER_DIGIT, tokens
    rng = random.Random(11)
    alphabet = "0123456789abc xyz_{}();\n\t\u0660\u0663\uff11\u00b2\u00e9\u4e2d\U0001f600\ud800"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        plain = math.ceil(len(text) * PER_CHAR + sum(map(text.count, "0123456789")) * PER_DIGIT)
        assert tokens(text) == plain, repr(text)


def _episodes(config: str, count: int, want=lambda e: True):
    """Engines (not run) of the first plan episodes of `config` (seed 0) that `want`."""
    from kernelstrain.engine import Episode
    from kernelstrain.episodes import episode_streams
    from kernelstrain.ops import REGISTRY
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(config), 0)
    prof, found, i = plan.profile, [], 0
    while len(found) < count:
        task = plan.task(i)
        e = Episode(REGISTRY[task.module], task, episode_streams(plan, i), 20, 0.1, 0.1, 1, prof.search, prof.clock)
        if want(e):
            found.append(e)
        i += 1
    return found


def test_rung_grid_near_sets_equal_the_distance_filter_over_every_config():
    """grids.RungGrid.near (Episode.near): the configs within search.spread value-steps of a best,
    as the filter of every config by its summed distance gives them, for every rung of 12 default
    episodes' ladders (knobs included) and best positions across each grid (fails with the distance
    off by one or a parameter's positions left out)."""
    from kernelstrain import knobs
    from kernelstrain.grids import rung_grid
    rng = random.Random(5)
    checked = 0
    for e in _episodes("kernelstrain", 12):
        for v in e.ladder:
            names = [p.name for p in v.params if len(p.values) > 1 and p.name not in knobs.SLIPS]
            values = [knobs.param(v, n).values for n in names]
            configs = e.configs(v)
            positions = [[vals.index(c.params[n]) for n, vals in zip(names, values)] for c in configs]
            grid = rung_grid(v)
            assert grid.names == names and [dict(c.params) for c in configs] == list(grid.dicts)
            for best in rng.sample(range(len(configs)), min(6, len(configs))):
                at = positions[best]
                for spread in (1, 2, 3):
                    plain = [i for i, pos in enumerate(positions) if sum(abs(p - q) for p, q in zip(pos, at)) <= spread]
                    assert list(grid.near(tuple(at), spread)) == plain, (v.tag, at, spread)
                    checked += 1
    assert checked > 100


def test_a_grid_scan_by_groups_equals_every_config_asked():
    """limits.rung_failing by the groups of configs that share their own parameters (a CUDA rung on
    an NVIDIA GPU: Episode._failing_test) finds the configs that clear_failure and writable find
    asked of each config of the grid, in order, for every rung of 10 such default episodes and both
    classes (fails where a group's verdict is taken from another group, or the groups are cut by the knobs)."""
    from kernelstrain import limits
    episodes = _episodes("kernelstrain", 10, lambda e: e.m.impl == "cuda" and e.task.gpu.vendor == "nvidia")
    grouped = failing = 0
    for n, e in enumerate(episodes):
        for v in e.ladder:
            for error_class in ("smem", "resources"):
                test = e._failing_test(v, error_class)
                if getattr(test, "groups", None) is None:
                    continue
                configs = e.configs(v)
                plain = [c for c in configs if e.clear_failure(c, error_class) and e.writable(c)]
                got = limits.rung_failing(("test_speed_caches", n, v.tag, error_class), configs, test)
                assert got == plain, (e.m.name, v.tag, error_class)
                grouped += 1
                failing += bool(plain)
    assert grouped > 20 and failing > 3, (grouped, failing)


def test_made_makes_each_item_once_when_asked():
    from kernelstrain.memo import Made
    calls = []
    made = Made(lambda x: calls.append(x) or [x], (3, 1, 2))
    assert made[1] == [1] and made[1] is made[1] and calls == [1]
    assert list(made) == [[3], [1], [2]] and len(made) == 3 and calls == [1, 3, 2]
