"""knobs.launch's `min_blocks` (__launch_bounds__(THREADS, N)): ptxas caps the registers a thread so N
blocks fit, but N blocks of THREADS past the SM's thread limit cannot be resident at all, and ptxas
then ignores the bound (nvcc 13, sm_90a: "Value of threads per SM for entry k is out of range.
.minnctapersm will be ignored"; the kernel keeps its registers). The model must do the same."""
from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def _launches(threads: int, blocks: int):
    m = REGISTRY["add_rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", {"T": 16384, "D": 8192})
    v = m.variant("register_cached")
    plain = knobs.launch(m, v, {"threads": threads, "rows_per_block": 1}, task)
    bound = knobs.launch(m, v, {"threads": threads, "rows_per_block": 1, "min_blocks": blocks}, task)
    return plain, bound, task.gpu


def test_a_bound_past_the_sms_thread_limit_is_ignored():
    plain, bound, gpu = _launches(1024, 3)
    assert 3 * 1024 > gpu.max_threads_per_sm
    assert bound == plain            # no register cap, no modelled spill


def test_a_bound_that_fits_still_caps_the_registers():
    plain, bound, gpu = _launches(512, 4)
    assert 4 * 512 <= gpu.max_threads_per_sm
    cap = gpu.regs_per_sm // (4 * 512) // 8 * 8
    assert bound.regs == min(plain.regs, cap)
    if plain.regs > cap:
        assert bound.traffic > plain.traffic     # what the demand holds past the cap spills
