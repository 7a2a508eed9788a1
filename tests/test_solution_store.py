"""The on-disk store of held-out solutions (kernelstrain/solution_store.py) never changes an answer:
a stored solution is the searched one, a file is read only for its own key and package digest,
and a dataset generated with a warm store is byte for byte the one generated without a store."""
import json
import os

import pytest

from kernelstrain import contamination, generation, solution_store
from kernelstrain.cli import main
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile
from kernelstrain.tasks import best_config, make_task

KEY = ("rmsnorm_cuda", "H100", "fp16", (("T", 4096), ("D", 4096)))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path / "store"))
    monkeypatch.setattr(contamination, "_SOLUTIONS", {})
    return tmp_path / "store"


def searched(key) -> str:
    module = REGISTRY[key[0]]
    task = make_task(module, key[1], key[2], dict(key[3]))
    _, variant, params = best_config(module, task)
    return module.render(variant, params, task)


def test_a_stored_solution_is_the_searched_one(store):
    assert solution_store.get(KEY) is None
    cold = contamination._solution(*KEY)                 # searched, then stored
    assert cold == searched(KEY)
    files = list(store.glob("*/*.json"))
    assert len(files) == 1 and files[0].parent.name == solution_store.package_digest()
    assert solution_store.get(KEY) == cold == contamination._solution(*KEY)


def test_a_file_is_read_only_for_its_own_key(store):
    solution_store.put(KEY, "the code")
    path = next(store.glob("*/*.json"))
    other = json.dumps((*KEY[:2], "bf16", KEY[3]))
    path.write_text(json.dumps({"key": other, "code": "another task's code"}), encoding="utf-8")
    assert solution_store.get(KEY) is None
    path.write_text("{not json", encoding="utf-8")         # a damaged file is no answer either
    assert solution_store.get(KEY) is None


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", "off")
    monkeypatch.chdir(tmp_path)
    solution_store.put(KEY, "the code")
    assert solution_store.get(KEY) is None and not any(tmp_path.iterdir())


def test_the_digest_covers_every_file_of_the_package(tmp_path):
    package = tmp_path / "pkg"
    (package / "ops").mkdir(parents=True)
    (package / "sim.py").write_text("A = 1\n")
    (package / "ops" / "table.json").write_text("[1]")
    digest = solution_store.package_digest.__wrapped__
    before = digest(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "sim.cpython-311.pyc").write_bytes(b"\0")
    assert digest(package) == before                      # bytecode is no content
    (package / "ops" / "table.json").write_text("[2]")
    changed = digest(package)
    assert changed != before
    (package / "ops" / "new.py").write_text("")
    assert digest(package) != changed


def test_only_the_newest_digests_are_kept(store, monkeypatch):
    for i in range(solution_store.KEEP + 2):
        monkeypatch.setattr(solution_store, "package_digest", lambda i=i: f"digest{i}")
        solution_store.put(KEY, "code")
        os.utime(store / f"digest{i}", (i, i))           # created in this order
    kept = sorted(p.name for p in store.iterdir())
    assert kept == [f"digest{i}" for i in range(2, solution_store.KEEP + 2)]


def test_a_warm_store_generates_the_same_bytes(store, tmp_path, monkeypatch):
    def generate(out):
        contamination._SOLUTIONS.clear()
        contamination.matcher_of.cache_clear()      # (each run's matcher its own: built, or read from the store)
        assert main(["generate", "--seed", "4", "--episodes", "6", "--workers", "1", "--out", str(out), "--quiet"]) == 0
        return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", "off")
    plain = generate(tmp_path / "plain")
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(store))
    cold = generate(tmp_path / "cold")
    plan = make_plan(load_profile("kernelstrain"), 4)
    held = set(contamination.solution_keys(t for tasks in plan.splits.values() for t in tasks))
    assert held and all(solution_store.get(k) is not None for k in held)
    # the warm run searches nothing: every solution is read from the store, and so are the held-out rows and the
    # contamination matcher (the same for every seed of the profile)
    monkeypatch.setattr(contamination, "best_config", lambda *a: pytest.fail("searched a stored solution"))
    monkeypatch.setattr(generation, "holdout_rows", lambda *a: pytest.fail("held-out rows computed again"))
    monkeypatch.setattr(contamination.Matcher, "__init__", lambda *a: pytest.fail("matcher built again"))
    warm = generate(tmp_path / "warm")
    assert plain == cold == warm


def test_the_stored_boilerplate_is_the_registry_s(store, monkeypatch):
    found = contamination.registry_boilerplate(contamination.NGRAM)
    for _ in range(2):                    # stored, then read back
        contamination.boilerplate.cache_clear()
        assert contamination.boilerplate() == found
    assert solution_store.get(("boilerplate", contamination.NGRAM)) is not None
    monkeypatch.setattr(contamination, "registry_boilerplate", lambda n: pytest.fail("found again"))
    contamination.boilerplate.cache_clear()
    assert contamination.boilerplate() == found
    contamination.boilerplate.cache_clear()
