"""Failing disks and corrupt inputs: one clear line, exit 2, nothing that looks complete."""
import resource
import signal
import subprocess
import sys

from kernelstrain.cli import main


def test_full_disk_is_one_line_and_leaves_nothing_complete(tmp_path):
    """A write that fails (file-size limit standing in for a full disk) -> exit 2, no stats.json."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(out),
                        "--episodes", "60", "--workers", "1", "--quiet"], capture_output=True, text=True,
                       preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelstrain: error: ") and "large" in lines[0].lower()
    assert not (out / "stats.json").exists() and not (out / "episodes.jsonl").exists()


def test_unwritable_out_is_a_clean_error(capsys):
    code = main(["generate", "--seed", "0", "--out", "/proc/kernelstrain-out", "--episodes", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kernelstrain: error: ") and len(err.strip().splitlines()) == 1


def test_corrupt_stats_names_the_file(dataset_copy, capsys):
    (dataset_copy / "stats.json").write_text("{ not json")
    assert main(["stats", str(dataset_copy)]) == 2
    err = capsys.readouterr().err
    assert "stats.json:1" in err and len(err.strip().splitlines()) == 1


def test_corrupt_episode_line_names_file_and_line(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    lines = path.read_text().splitlines()
    lines[4] = lines[4][:100]
    path.write_text("\n".join(lines) + "\n")
    for argv in (["validate", str(dataset_copy)], ["verify", str(dataset_copy), "--sample", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "episodes.jsonl:5: not valid JSON" in err, err


def test_truncated_shard_is_refused_by_merge(tmp_path, capsys):
    dirs = []
    for i in range(2):
        d = tmp_path / f"s{i}"
        assert main(["generate", "--seed", "0", "--out", str(d), "--episodes", "6", "--shard", f"{i}/2", "--quiet"]) == 0
        dirs.append(d)
    steps = dirs[1] / "sft_steps.jsonl"
    steps.write_bytes(steps.read_bytes()[:-10])
    out = tmp_path / "merged"
    assert main(["merge", str(dirs[0]), str(dirs[1]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "sft_steps.jsonl" in err and "truncated" in err
    assert not (out / "stats.json").exists()


def test_merge_needs_every_shard(tmp_path, capsys):
    d = tmp_path / "s0"
    assert main(["generate", "--seed", "0", "--out", str(d), "--episodes", "4", "--shard", "0/2", "--quiet"]) == 0
    assert main(["merge", str(d), "--out", str(tmp_path / "m")]) == 2
    assert "every shard" in capsys.readouterr().err
