"""The contamination measure of an early pool (generation.episodes_ahead, issue 32): episodes scanned by a worker
handed the matcher by file and episodes sent unscanned before it came, merged in any order, give the measure
of one process scanning them all."""
import pickle

from kernelstrain import contamination as cont
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def _codes(name: str, gpu: str = "H100") -> tuple:
    m = REGISTRY[name]
    task = make_task(m, gpu, m.dtypes[0], m.shapes[0])
    return m, task, [m.render(v, v.defaults(), task) for v in m.variants if not v.needs - task.gpu.features]


def _row(m, task, base, *steps):
    return {"module": m.name, "gpu": task.gpu.name, "dtype": task.dtype, "shape": dict(task.shape), "impl": m.impl,
            "baseline": {"code": base}, "steps": [{"code": c} for c in steps]}


def _episodes():
    """Rows of two modules (one CUDA, one Triton) whose candidates repeat across rows, and the matcher of
    some of their codes (so exact matches, specific and boilerplate overlaps all occur)."""
    rows, targets = [], []
    for name in ("rmsnorm_cuda", "softmax_triton"):
        m, task, codes = _codes(name)
        lang = cont.LANG[m.impl]
        targets += [(codes[0], lang), (codes[-1], lang)]
        rows += [_row(m, task, codes[0], *codes[1:k]) for k in range(1, len(codes) + 1)]
        rows += [_row(m, task, codes[0], codes[-1], codes[1])]
    return rows, cont.Matcher(targets)


def test_a_handed_over_matcher_scans_as_the_built_one():
    rows, matcher = _episodes()
    handed = pickle.loads(pickle.dumps(matcher, protocol=pickle.HIGHEST_PROTOCOL))
    assert not hasattr(handed, "fresh_ids") or next(handed.fresh_ids) > max(matcher.vocab.values())
    scans = 0
    for ep in rows:
        for code, lang in cont.episode_candidates(ep):
            assert handed.scan(code, lang) == matcher.scan(code, lang)
            scans += 1
    assert scans > 20


def test_waiting_and_scanned_parts_merge_to_one_process_measure():
    rows, matcher = _episodes()
    targets = type("T", (), {"matcher": matcher})()
    alone = cont.Incremental(targets)
    for ep in rows:
        alone.add(alone.part(ep))
    # two workers, alternate rows; each sends its first rows unscanned, then is handed the matcher (pickled)
    parts = []
    for worker, mine in enumerate((rows[0::2], rows[1::2])):
        scan = cont.Unmatched()
        for i, ep in enumerate(mine):
            if i == 2 + worker:
                scan = scan.handed(pickle.loads(pickle.dumps(matcher)))
            parts.append(scan.part(ep))
    waiting = [p for p in parts if isinstance(p, cont.Waiting)]
    assert len(waiting) == 5 and len(parts) - len(waiting) > 5
    assert any(p.candidates for p in waiting)
    for order in (parts, parts[::-1]):
        merged = cont.Incremental(targets)
        for p in order:
            merged.add(p)
        assert merged.keys == alone.keys and len(alone.keys) > 5
        assert merged.tally.part() == alone.tally.part()
        assert merged.train_tasks == alone.train_tasks
    assert alone.tally.exact and alone.tally.specific and alone.tally.raw


def test_a_worker_skips_what_it_sent_unscanned():
    rows, matcher = _episodes()
    scan = cont.Unmatched()
    sent = scan.part(rows[-1])
    handed = scan.handed(matcher)
    again = handed.part(rows[-1])
    assert sent.candidates and again[1] == []
