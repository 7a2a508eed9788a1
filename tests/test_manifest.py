"""The run manifest (SPEC §13): a dataset carries its resolved profile, so a profile changed,
renamed or moved after the run still validates clean, and nothing guesses a profile by name."""
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kernelstrain.cli import main
from kernelstrain.manifest import MANIFEST, Manifest, dumps_manifest, parse_manifest, read_manifest
from kernelstrain.profiles import load_profile, profile_from_tables, profile_tables


def toml_value(v) -> str:
    """A value of a profile table as TOML (strings, numbers, booleans, lists, inline tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"


def write_toml(tables: dict, path: Path) -> None:
    lines = []
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_tables_round_trip_both_bundled_profiles(tmp_path):
    """profile_tables -> TOML -> load_profile gives the same profile and the same key."""
    for name in ("kernelstrain", "kernelinfer"):
        p = load_profile(name)
        write_toml(profile_tables(p), tmp_path / f"{name}.toml")
        back = load_profile(tmp_path / f"{name}.toml")
        assert replace(back, path=p.path) == p and back.key == p.key


def test_key_is_content_not_name():
    """Two profiles with one name but different settings draw different streams; a renamed
    copy, or one whose [output] or description differs, draws the same."""
    p = load_profile("kernelstrain")
    assert replace(p, name="other", description="x", episodes=7).key == p.key
    assert replace(p, output=replace(p.output, max_context_tokens=9000, timestamps=True)).key == p.key
    assert replace(p, steps=replace(p.steps, mean=20.0)).key != p.key
    assert replace(p, holdout=replace(p.holdout, frac=0.1)).key != p.key


def test_manifest_refuses_a_hand_edited_key(tmp_path):
    raw = json.loads(dumps_manifest(Manifest(load_profile("kernelstrain"), 3)))
    raw["profile"]["steps"]["mean"] = 20.0
    with pytest.raises(Exception, match="profile_key or layout does not match"):
        parse_manifest(raw, "m.json")


def variations(base: str):
    """Any valid change to a bundled profile's tables (and a new name)."""
    tables = profile_tables(load_profile(base))

    @st.composite
    def change(draw):
        t = json.loads(json.dumps(tables))
        t["profile"]["name"] = draw(st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True))
        t["output"]["max_context_tokens"] = draw(st.sampled_from([0, 6000, 9000, 20000, 48000]))
        t["output"]["timestamps"] = draw(st.booleans())
        t["output"]["validation_frac"] = draw(st.sampled_from([0.0, 0.05, 0.3]))
        t["output"]["layout"] = draw(st.sampled_from(["episodes", "sessions"]))
        t["output"]["batch_size"] = draw(st.integers(1, 5))
        t["holdout"]["frac"] = draw(st.sampled_from([0.0, 0.02, 0.08, 0.15]))
        lo = draw(st.integers(3, 12))
        hi = draw(st.integers(lo, 40))
        t["steps"].update(min=lo, max=hi, mean=float(draw(st.integers(lo, hi))))
        t["search"]["patience_max"] = draw(st.integers(t["search"]["patience_min"], 6))
        return t
    return change()


def generate_and_validate(tables: dict, tmp: Path, episodes: int) -> None:
    """Generate from a profile file, then rename and move the file and move the dataset:
    validate reads the manifest alone and finds nothing."""
    config = tmp / "mine.toml"
    write_toml(tables, config)
    out = tmp / "data"
    assert main(["generate", "--seed", "5", "--out", str(out), "--config", str(config), "--episodes", str(episodes),
                 "--workers", "1", "--quiet"]) == 0
    config.rename(tmp / "renamed.toml")
    shutil.move(tmp / "renamed.toml", tmp / "elsewhere.toml")
    moved = tmp / "moved"
    shutil.move(out, moved)
    assert read_manifest(moved).profile.key == load_profile(tmp / "elsewhere.toml").key
    assert main(["validate", str(moved), "--workers", "1", "--quiet"]) == 0


@pytest.mark.parametrize("base", ["kernelstrain", "kernelinfer"])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                               HealthCheck.too_slow])
@given(data=st.data())
def test_a_varied_profile_generates_and_validates(base, data, tmp_path_factory):
    tables = data.draw(variations(base))
    generate_and_validate(tables, tmp_path_factory.mktemp("v"), episodes=3)


@pytest.mark.slow
@pytest.mark.parametrize("base", ["kernelstrain", "kernelinfer"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(data=st.data())
def test_many_varied_profiles_generate_and_validate(base, data, tmp_path_factory):
    tables = data.draw(variations(base))
    generate_and_validate(tables, tmp_path_factory.mktemp("v"), episodes=12)


def test_a_dataset_without_its_manifest_is_refused(dataset_copy, capsys):
    """A dataset written before manifests: exit 2, one line saying to regenerate it."""
    (dataset_copy / MANIFEST).unlink()
    assert main(["validate", str(dataset_copy), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "written before run manifests" in err and "regenerate" in err


def test_validate_finds_a_manifest_that_disagrees(dataset_copy, capsys):
    """A manifest of another run (another seed) beside the files: findings, exit 1."""
    m = read_manifest(dataset_copy)
    (dataset_copy / MANIFEST).write_text(dumps_manifest(replace(m, seed=m.seed + 1)), encoding="utf-8")
    assert main(["validate", str(dataset_copy), "--workers", "1"]) == 1
    assert "manifest.json: seed 1 differs from stats.json's 0" in capsys.readouterr().out


def test_profile_from_tables_names_the_source(tmp_path):
    t = profile_tables(load_profile("kernelstrain"))
    t["steps"]["min"] = 0
    with pytest.raises(Exception, match="manifest.json: key 'steps'"):
        profile_from_tables(t, "manifest.json")
