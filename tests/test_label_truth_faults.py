"""Crash or wrong numbers: what a bug's feedback says it did, against the H100's runs in fresh processes (labels j1 /
j2, session 12: scripts/label_device_check.py with LABELS_FRESH=1, measurements/h100_label_device.json s12_j1 /
s12_j2), and the declarations those runs settled."""
from kernelstrain.engine import Candidate
from kernelstrain.runtime_texts import off_by_one_site
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from test_label_truth import device_rows, episode, rung, shape_of
from test_label_truth import params_of as config_of     # the parameters a device row's configuration label names


def rows_of(job: str, bug: str) -> list:
    """(module, rung, params, shape, row) of a session-12 job's rows of `bug`."""
    out = []
    for r in device_rows()[job]:
        name, tag, label, shape, b = r["id"].split("|")
        if b == bug:
            v = rung(name, tag)
            out.append((name, v, config_of(v, label), shape_of(shape), r))
    return out


def test_no_bounds_check_is_a_mismatch_where_the_first_check_read_wrong_values():
    """A no_bounds_check render reads (and writes) past its row; past the last row it leaves the tensor. In a fresh
    process (a harness's run: inputs, reference, candidate, compare) the first check read wrong values at every
    offered shape and configuration of all five CUDA rungs carrying it (106 cases); a crash came only on a process's
    second run (causal_conv1d at 3 shapes, add_rmsnorm at 1: the caching allocator's blocks laid out by the first run)
    or, in session 11's n8, after other cases in the same worker. So the feedback is the mismatch, never a coin's
    crash (the engine printed a fault for half of these steps at any shape)."""
    rows = rows_of("s12_j2", "no_bounds_check")
    assert len(rows) >= 100 and {n for n, *_ in rows} == {"fp8_quant_cuda", "rmsnorm_cuda", "add_rmsnorm_cuda",
                                                          "layernorm_cuda", "causal_conv1d_cuda"}
    later_faults = 0
    for name, v, params, shape, r in rows:
        assert r["runs"] >= 1 and r["failed_runs"] == r["runs"], r      # the first run finished, and failed
        later_faults += bool(r["error"])
        if shape.get("T") == 1:
            continue
        step = episode(name, shape).evaluate(1, Candidate(v, params, "no_bounds_check"))
        assert step.failure == "mismatch" and step.error.startswith("AssertionError"), (r["id"], step.failure)
    assert later_faults >= 4          # the crash is real, only not the first check's


def test_rmsnorm_vectorized_no_bounds_check_not_offered_at_one_row():
    """With one row the unbounded write pass writes only past y: y matched exactly (rel_l2 0.0) at T 1 in every
    configuration, only gpu-check's guard saw the write. From T 64 every configuration's y was wrong."""
    m, v = REGISTRY["rmsnorm_cuda"], rung("rmsnorm_cuda", "vectorized_uint4")
    rows = [(shape, r) for name, _, _, shape, r in rows_of("s12_j2", "no_bounds_check") if name == "rmsnorm_cuda"]
    assert {r["rel_l2_err"] for shape, r in rows if shape["T"] == 1} == {0.0}
    assert all(r["rel_l2_err"] > 0.1 and r["nbad"] > 30000 for shape, r in rows if shape["T"] > 1)
    for shape in m.shapes:
        for label in ("threads=64", "threads=1024", "default"):
            offered = "no_bounds_check" in episode("rmsnorm_cuda", shape).bugs(v, config_of(v, label))
            assert offered == (shape["T"] >= 2), (shape, label)


def test_state_outer_scan_bad_combine_index_fails_by_its_outputs_at_one_chunk_boundary():
    """At L 256 in 128-step chunks (the default) one chunk boundary carries a state read one step early; its rel_l2
    sat near the 1e-2 bar in the interpreter (1.03e-2), but gpu-check fails a run on any element out of tolerance:
    the H100 failed all 3 runs at every configuration with 1.8-1.9 million of 33.5 million outputs wrong (rel_l2
    0.019-0.020; CHUNK 64: 5.4 million). Offered there; not where the sequence is one chunk (CHUNK 256 / 512)."""
    m, v = REGISTRY["selective_scan_triton"], rung("selective_scan_triton", "state_outer_scan")
    rows = rows_of("s12_j1", "bad_combine_index")
    at256 = [(params, r) for name, _, params, shape, r in rows if name == m.name and shape["L"] == 256]
    assert len(at256) == 6
    for params, r in at256:
        assert r["runs"] == r["failed_runs"] == 3 and r["nbad"] > 1_000_000, r
        task = make_task(m, "H100", "bf16", {"B": 64, "L": 256, "D": 2048, "N": 16})
        assert v.breaks_at("bad_combine_index", task, params)
    task = make_task(m, "H100", "bf16", {"B": 64, "L": 256, "D": 2048, "N": 16})
    assert not any(v.breaks_at("bad_combine_index", task, {**v.defaults(), "CHUNK": c}) for c in (256, 512))


def test_gemm_fp16_wgmma_split_k_bad_combine_index_failed_everywhere_offered():
    """Never run before (queued behind missing_barrier's hang twice): every menu shape x each parameter's extremes
    failed all 3 runs on the H100 (rel_l2 0.35-0.71: the combine leaves the last split's partial out)."""
    v = rung("gemm_fp16_cuda", "wgmma_split_k")
    rows = rows_of("s12_j1", "bad_combine_index")
    gemm = [r for name, _, _, _, r in rows if name == "gemm_fp16_cuda"]
    assert len(gemm) == 42 and "bad_combine_index" in v.bugs
    assert all(r["runs"] == r["failed_runs"] == 3 and r["rel_l2_err"] > 0.3 for r in gemm)


def test_gemv_over_read_faults_where_the_first_check_crashed():
    """gemv_cuda's off_by_one reads past W on its last row. Each offered shape x configuration extremes in a fresh
    process (labels j3, session 12's job run in session 13; 79 cases): the first check died with an illegal address at
    N 8192 K 8192 (all four rungs) and N 4096 K 4096 (split_k_combine), W's two power-of-two sizes past 10 MiB, and
    read wrong values 3 runs of 3 at every other shape. The feedback says which, as PyTorch raises it."""
    rows = rows_of("s12_j3", "off_by_one")
    assert len(rows) == 79 and {n for n, *_ in rows} == {"gemv_cuda"}
    kinds = set()
    for name, v, params, shape, r in rows:
        crashed = r["runs"] is None
        assert (r["error"] or "").startswith("kernel error: cudaErrorIllegalAddress") if crashed \
            else r["failed_runs"] == r["runs"] == 3, r
        ep = episode(name, shape)
        assert "off_by_one" in ep.bugs(v, params), r["id"]
        step = ep.evaluate(1, Candidate(v, params, "off_by_one"))
        assert step.failure == ("fault" if crashed else "mismatch"), (r["id"], step.failure)
        if crashed:
            assert step.error.startswith("torch.AcceleratorError: CUDA error: an illegal memory access was encountered")
        else:         # the wrong values: a lane trip's worth of the next row's products in every sum, at least
            site = off_by_one_site({"cmp": "<="}, shape, params, "gemv", v.tag)    # (the last token's row reads
            assert 0.8 * site[1] ** 0.5 <= r["rel_l2_err"], (r["id"], site)        # past x: garbage on top)
        kinds.add((crashed, shape["N"], shape["K"]))
    assert {k for k in kinds if k[0]} == {(True, 8192, 8192), (True, 4096, 4096)} and len(kinds) == 7
