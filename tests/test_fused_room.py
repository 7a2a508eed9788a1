"""Room in the fused rungs (issue 35): several rows a CUDA block for short rows, and the Triton GEMM
epilogue's tile space with a size-aware start; each changes the code and the modelled time."""
from __future__ import annotations

from kernelstrain.fused.kernels import kernels_of
from kernelstrain.fused.module import MAX_BLOCK_THREADS, fused_module, module_name
from kernelstrain.fused.timing import triton_gemm_ms
from kernelstrain.gpus import GPUS
from kernelstrain.tasks import make_task


def _task(m, gpu="H100"):
    return make_task(m, gpu, m.dtypes[0], m.shapes[0])


def _rung(m, tag):
    return next((v for v in m.variants if v.tag == tag), None)


def _short_row_module():
    for index in range(60):
        m = fused_module(module_name(0, index, "cuda"))
        v = _rung(m, "vectorized_loads")
        if v is not None and any(p.name == "rows_per_block" for p in v.params):
            rows = [m.view.kernel_geometry(k) for k in kernels_of(m._plans["vectorized_loads"]) if k.kind == "row"]
            if rows and max(g.C for g in rows) <= 256:
                return m, v
    raise AssertionError("no CUDA program with short rows in the first 60")


def test_rows_per_block_packs_short_rows_into_one_block():
    m, v = _short_row_module()
    task = _task(m)
    one = {**v.defaults(), "row_threads": 32, "rows_per_block": 1}
    eight = {**one, "rows_per_block": 8}
    code1, code8 = m.render(v, one, task), m.render(v, eight, task)
    assert "_ROWS = 8;" in code8 and "_ROWS" not in code1
    assert "if (live" in code8 and "block_sum<K" in code8
    assert m.simulate(v, one, task).ok and m.simulate(v, eight, task).ok
    # the kernels' time changes (a short program's call may stay host-bound: the same measured time)
    assert sum(m.kernels_ms(v.tag, eight, task)) != sum(m.kernels_ms(v.tag, one, task))
    # a block of more threads than the GPU allows builds, and its launch is refused
    big = m.simulate(v, {**one, "row_threads": 1024, "rows_per_block": 2}, task)
    assert not big.ok and big.error_class == "resources" and "CUDA error: invalid argument" in big.error
    assert v.launch({**one, "row_threads": 1024, "rows_per_block": 2}, task).threads > MAX_BLOCK_THREADS


def test_gemm_epilogue_starts_large_for_a_large_product_and_its_tiles_matter():
    seen_big = seen_small = tiles_matter = 0
    for index in range(300):
        m = fused_module(module_name(0, index, "triton"))
        v = _rung(m, "gemm_epilogue")
        if v is None:
            continue
        d = v.defaults()
        seen_big += d["BLOCK_M"] == 128
        seen_small += d["BLOCK_M"] == 64
        task = _task(m, "H200")
        times = {bm: m.simulate(v, {**d, "BLOCK_M": bm}, task) for bm in (32, 64, 128, 256)}
        # a product too small to leave the host's call floor times the same at every tile
        tiles_matter += len({round(r.time_ms, 9) for r in times.values() if r.ok}) > 1
        if seen_big and seen_small >= 3 and tiles_matter >= 3:
            break
    assert seen_big and seen_small and tiles_matter >= 3


def test_a_tile_whose_accumulator_spills_is_slower():
    gpu = GPUS["H100"]
    fits = triton_gemm_ms(2 * 4096 ** 3, 3 * 4096 * 4096 * 2, 256, 1.0, 128, 128, 3, 8, gpu, "bf16")
    spills = triton_gemm_ms(2 * 4096 ** 3, 3 * 4096 * 4096 * 2, 256, 1.0, 128, 128, 3, 2, gpu, "bf16")
    assert spills > 1.5 * fits
