"""chunked_prefill_cuda cp_async_pipeline visits every key tile through the causal diagonal, whatever BLOCK_M and
BLOCK_N: with the tile count rounded down, a 64-row query tile under 128-key tiles skipped its diagonal tile
(an H200 gpu-check, seed 50505: BLOCK_M=64 BLOCK_N=128 at B=8 C=256 P=1792, an ok label, rel_l2 0.094 with 2.5M
wrong outputs). The render's own expression is evaluated (C integer division) at every tile pair and query tile."""
import itertools
import re

from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def test_the_pipelined_rung_reaches_each_query_tiles_diagonal():
    m = REGISTRY["chunked_prefill_cuda"]
    v = m.variant("cp_async_pipeline")
    shape = {"B": 8, "H": 32, "KVH": 8, "C": 256, "P": 1792, "D": 128}
    task = make_task(m, "H100", "bf16", shape)
    sizes = v.param("BLOCK_M").values, v.param("BLOCK_N").values
    for bm, bn in itertools.product(*sizes):
        code = m.render(v, {**v.defaults(), "BLOCK_M": bm, "BLOCK_N": bn}, task)
        expr = re.search(r"const int ntiles = ([^;]+);", code).group(1).replace("/", "//")
        for m0 in range(0, shape["C"], bm):
            ntiles = eval(expr, {"P": shape["P"], "m0": m0, "BLOCK_M": bm, "BLOCK_N": bn})
            last_key = shape["P"] + m0 + bm - 1                  # the tile's last query row sees keys through here
            assert ntiles * bn > last_key, (bm, bn, m0)
            assert ntiles * bn <= shape["P"] + shape["C"], (bm, bn, m0)   # and never past the keys there are
