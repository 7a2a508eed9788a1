"""generate's per-batch QA reports of a sessions dataset, checked in several processes, are the
reports one process writes (validate_sessions.batch_checks)."""
import json
import shutil

from kernelstrain.cli import main
from kernelstrain.sessions import QA_DIR
from kernelstrain.validate_sessions import write_qa_reports


def test_batch_reports_are_the_same_whatever_the_workers(tmp_path):
    data = tmp_path / "d"
    assert main(["generate", "--seed", "2", "--config", "kernelinfer", "--episodes", "9", "--workers", "1",
                 "--out", str(data), "--quiet"]) in (0, 1)
    stats = json.loads((data / "stats.json").read_text())
    stats["batch_size"] = 2          # several batches of a few sessions, shared unevenly between workers
    written = {}
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}"
        shutil.copytree(data, out)
        shutil.rmtree(out / QA_DIR)
        reports = write_qa_reports(out, stats, workers)
        written[workers] = {p.name: p.read_bytes() for p in sorted((out / QA_DIR).iterdir())}
        assert len(reports) == -(-stats["files"]["sessions.jsonl"]["rows"] // 2) >= 3
    assert written[2] == written[1] and written[3] == written[1]
