"""generate's workers judge an episode's rows (layouts.Layout.judge) as built, not decoded again
from the bytes they write: that is the same judgement only because every row comes back equal
from a JSON round trip (no tuples, no non-str keys, no value JSON changes)."""
import json

from kernelstrain.episodes import dumps
from kernelstrain.layouts import LAYOUTS, streamed_keys
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile
from kernelstrain.qa import report


def test_rows_judged_as_built_are_judged_as_written():
    # (the fused profile's rows are the same layout's; its plan alone takes a minute to build)
    plan = make_plan(load_profile("kernelstrain"), 0)
    layout = LAYOUTS[plan.profile.output.layout]
    assert layout.judge is not None
    built = written = None
    for index in range(12):
        rows, _ = layout.rows(plan, index)
        keys = streamed_keys(layout)
        decoded = {k: [json.loads(dumps(r)) for r in rows.get(k, ())] for k in keys}
        assert decoded == {k: list(rows.get(k, ())) for k in keys}
        mine, theirs = layout.judge({k: list(rows.get(k, ())) for k in keys}), layout.judge(decoded)
        built = mine if built is None else built.merge(mine)
        written = theirs if written is None else written.merge(theirs)
    assert json.dumps(report(built), sort_keys=True) == json.dumps(report(written), sort_keys=True)
    assert report(built)["checks"]
