"""scripts/message_audit.py (issue 28 items 2, 4, 6) finds what it is for: texts that are not
assert_close's, figures that cannot be, off-by-ones away from a row's tail, impossible fault
addresses; and passes the generator's own texts."""
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import message_audit  # noqa: E402

from kernelstrain import runtime_texts  # noqa: E402

GOOD = ("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 64 / 4096 (1.6%)\n"
        "Greatest absolute difference: 1.4609375 at index (3, 63) (up to 0.01 allowed)\n"
        "Greatest relative difference: 0.8125 at index (17, 63) (up to 0.01 allowed)")


def test_a_good_report_passes_and_bad_ones_fail():
    assert message_audit.check_mismatch(GOOD, (64, 64), "fp16", "off_by_one", Counter()) == []
    assert message_audit.check_mismatch(GOOD.replace("(17, 63)", "(17, 20)"), (64, 64), "fp16", "off_by_one", Counter())
    assert message_audit.check_mismatch(GOOD.replace("1.4609375", "1.460938"), (64, 64), "fp16", "", Counter())
    assert message_audit.check_mismatch(GOOD.replace("AssertionError: ", ""), (64, 64), "fp16", "", Counter())
    assert message_audit.check_mismatch(GOOD, (64, 65), "fp16", "", Counter())          # 64 / 4096 of 4160
    assert message_audit.check_mismatch(GOOD, (4, 64), "fp16", "", Counter())           # index 17 of 4 rows
    nan = GOOD.replace("1.4609375 at index (3, 63)", "nan at index (1, 0)").replace("0.8125 at index (17, 63)", "nan at index (1, 0)")
    assert message_audit.check_mismatch(nan, (64, 64), "fp16", "", Counter()) == []     # NaN passes no tolerance


def test_generated_mismatches_and_faults_pass():
    rng = random.Random(5)
    for bug in ("off_by_one", "no_bounds_check", "missing_barrier", "half_accumulator", "missing_scale"):
        for shape, dtype in (((128, 4096), "fp16"), ((7, 33), "bf16"), ((1000,), "fp32")):
            text = runtime_texts.mismatch_text(bug, shape, dtype, 3.0, rng)
            assert message_audit.check_mismatch(text, shape, dtype, bug, Counter()) == [], (bug, shape, text)
    for _ in range(50):
        assert message_audit.check_fault(runtime_texts.fault_text("no_bounds_check", True, rng)) == []
    assert message_audit.check_fault("Memory access fault by GPU node-2 (Agent handle: 0x55) on address "
                                     "0x7f12345678901000. Reason: Unknown.")
