"""The contamination matcher kept in the solution store (contamination.matcher_of, issue 32): the stored matcher
scans as the built one, and another held-out set is never answered from it."""
import json

from kernelstrain import contamination as cont
from tests.test_speed_handover import _episodes


def _targets():
    rows, _ = _episodes()
    return rows, tuple((code, lang) for ep in rows[:3] for code, lang in cont.episode_candidates(ep))


def test_a_stored_matcher_scans_as_the_built_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path))
    rows, targets = _targets()
    cont.matcher_of.cache_clear()
    built = cont.matcher_of(targets)              # built, then stored
    assert any(tmp_path.rglob("*.json"))
    cont.matcher_of.cache_clear()
    monkeypatch.setattr(cont.Matcher, "__init__", lambda *a: (_ for _ in ()).throw(AssertionError("built again")))
    stored = cont.matcher_of(targets)
    cont.matcher_of.cache_clear()
    assert stored is not built
    scans = 0
    for ep in rows:
        for code, lang in cont.episode_candidates(ep):
            assert stored.scan(code, lang) == built.scan(code, lang)
            scans += 1
    assert scans > 20 and any(built.scan(c, l)[0] for c, l in targets)      # exact matches occur
    assert _fields(stored) == _fields(built)


def _fields(m) -> dict:
    """The matcher's index as JSON reads it."""
    return json.loads(json.dumps(m.state()))


def test_another_held_out_set_is_not_answered_from_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path))
    _, targets = _targets()
    cont.matcher_of.cache_clear()
    cont.matcher_of(targets)
    cont.matcher_of.cache_clear()
    other = targets[:-1]
    built = []
    plain = cont.Matcher.__init__

    def counted(self, t):
        built.append(len(t))
        plain(self, t)
    monkeypatch.setattr(cont.Matcher, "__init__", counted)
    m = cont.matcher_of(other)
    cont.matcher_of.cache_clear()
    assert built == [len(other)]
    assert len(m.sizes) == len(other)


def test_no_store_builds_each_time(monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", "off")
    _, targets = _targets()
    built = []
    plain = cont.Matcher.__init__
    monkeypatch.setattr(cont.Matcher, "__init__", lambda self, t: built.append(1) or plain(self, t))
    for _ in range(2):
        cont.matcher_of.cache_clear()
        cont.matcher_of(targets)
    cont.matcher_of.cache_clear()
    assert len(built) == 2
