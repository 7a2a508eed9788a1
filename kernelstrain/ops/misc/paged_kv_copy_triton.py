"""Paged KV-cache block copy in Triton: for each (src, dst) pair copy one E-element block of the
K cache and of the V cache (E = P * H * D contiguous elements).

Ladder: flat element blocks (every element looks its pair up) -> a program per (pair, BLOCK tile)
with the mapping read once -> [PAGES, BLOCK] tiles of several pairs with contiguity hints for
16-byte accesses -> persistent programs (#SMs x k) looping over the tiles.
"""
import textwrap

from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, unchecked
from .paged_kv_copy_spec import ENTRY, PagedKvCopySpec, block_elems

WARPS = Param("num_warps", (2, 4, 8), 4)
BLOCK = Param("BLOCK", (512, 1024, 2048, 4096), 2048)


def tile_launch(p, task, grid: int, per_program: int):
    """A program moving per_program elements of K and of V; grid programs."""
    elt, threads = DTYPE_BYTES[task.dtype], p["num_warps"] * task.gpu.warp
    per = max(1, per_program // threads)
    return Launch(grid=grid, threads=threads, regs=min(255, 24 + per * elt // 2),
                  bytes_per_access=min(16, per * elt), lane_util=min(1.0, per_program / threads))


# -- element_blocks ------------------------------------------------------------------------
def element_blocks_launch(p, task):
    launch = tile_launch(p, task, cdiv(task["M"] * block_elems(task), p["BLOCK"]), p["BLOCK"])
    return Launch(**{**launch.__dict__, "bytes_per_access": 2 * DTYPE_BYTES[task.dtype]})   # gathered: no vectors


def element_blocks_src(p, task, total="M * E"):
    return f"""
@triton.jit
def paged_kv_copy_kernel(kc_ptr, vc_ptr, map_ptr, M, E, BLOCK: tl.constexpr):
    # flat over all M * E elements: every element loads its pair's (src, dst) and the
    # address arithmetic defeats vectorization
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = offs < {total}
    pair = offs // E
    within = offs % E
    src = tl.load(map_ptr + 2 * pair, mask=live, other=0)
    dst = tl.load(map_ptr + 2 * pair + 1, mask=live, other=0)
    k = tl.load(kc_ptr + src * E + within, mask=live)
    v = tl.load(vc_ptr + src * E + within, mask=live)
    tl.store(kc_ptr + dst * E + within, k, mask=live)
    tl.store(vc_ptr + dst * E + within, v, mask=live)
"""


PAGE_COPY = """    src = tl.load(map_ptr + 2 * pair) * E
    dst = tl.load(map_ptr + 2 * pair + 1) * E
    k = tl.load(kc_ptr + src + cols, mask=live)
    v = tl.load(vc_ptr + src + cols, mask=live)
    tl.store(kc_ptr + dst + cols, k, mask=live)
    tl.store(vc_ptr + dst + cols, v, mask=live)
"""   # one (pair, tile): scalar mapping loads, then the K and V tile copies


# -- page_tile -----------------------------------------------------------------------------
def page_tile_launch(p, task):
    return tile_launch(p, task, task["M"] * cdiv(block_elems(task), p["BLOCK"]), p["BLOCK"])


def page_tile_src(p, task, bound="E"):
    return f"""
@triton.jit
def paged_kv_copy_kernel(kc_ptr, vc_ptr, map_ptr, M, E, BLOCK: tl.constexpr):
    # program (pair, tile): the mapping is two scalar loads, the tile a contiguous range
    pair = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = cols < {bound}
{PAGE_COPY}"""


# -- multi_page_tile -------------------------------------------------------------------------
def multi_page_launch(p, task):
    pages, bl = p["PAGES"], p["BLOCK"]
    return tile_launch(p, task, cdiv(task["M"], pages) * cdiv(block_elems(task), bl), pages * bl)


def multi_page_tile_src(p, task, pair_bound="M"):
    return f"""
@triton.jit
def paged_kv_copy_kernel(kc_ptr, vc_ptr, map_ptr, M, E, PAGES: tl.constexpr, BLOCK: tl.constexpr):
    # [PAGES, BLOCK] tile: PAGES pairs at once; the hints promise 16-byte aligned runs of 8
    pairs = tl.program_id(0) * PAGES + tl.arange(0, PAGES)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.max_contiguous(tl.multiple_of(cols, 8), 8)
    live = (pairs < {pair_bound})[:, None] & (cols < E)[None, :]
    src = tl.load(map_ptr + 2 * pairs, mask=pairs < M, other=0) * E
    dst = tl.load(map_ptr + 2 * pairs + 1, mask=pairs < M, other=0) * E
    k = tl.load(kc_ptr + src[:, None] + cols[None, :], mask=live)
    v = tl.load(vc_ptr + src[:, None] + cols[None, :], mask=live)
    tl.store(kc_ptr + dst[:, None] + cols[None, :], k, mask=live)
    tl.store(vc_ptr + dst[:, None] + cols[None, :], v, mask=live)
"""


# -- persistent ------------------------------------------------------------------------------
def persistent_launch(p, task):
    tiles = task["M"] * cdiv(block_elems(task), p["BLOCK"])
    return tile_launch(p, task, min(tiles, task.gpu.sms * p["programs_per_sm"]), p["BLOCK"])


def persistent_src(p, task, stop="n_tiles"):
    return f"""
@triton.jit
def paged_kv_copy_kernel(kc_ptr, vc_ptr, map_ptr, M, E, BLOCK: tl.constexpr):
    # persistent: #SMs x PROGRAMS_PER_SM programs loop over the (pair, tile) list
    per = tl.cdiv(E, BLOCK)
    n_tiles = M * per
    for t in range(tl.program_id(0), {stop}, tl.num_programs(0)):
        pair = t // per
        cols = (t % per) * BLOCK + tl.arange(0, BLOCK)
        cols = tl.max_contiguous(tl.multiple_of(cols, 8), 8)
        live = cols < E
{textwrap.indent(PAGE_COPY, "    ")}"""


GRIDS = {
    "element_blocks": "(triton.cdiv(M * E, {BLOCK}),)",
    "page_tile": "(M, triton.cdiv(E, {BLOCK}))",
    "multi_page_tile": "(triton.cdiv(M, {PAGES}), triton.cdiv(E, {BLOCK}))",
    "persistent": "(min(M * triton.cdiv(E, {BLOCK}), "
                  "torch.cuda.get_device_properties(key_cache.device).multi_processor_count * {programs_per_sm}),)",
}


class PagedKvCopyTriton(PagedKvCopySpec):
    impl = "triton"
    variants = (
        Rung("element_blocks", "flat BLOCK-element programs; each element gathers its pair's (src, dst)",
             # memory_eff 0.55: each element also runs an int64 div and mod by E (emulated, tens of
             # integer instructions) and two gathered map loads: issue-bound near half the bandwidth
             (BLOCK, WARPS), memory_eff=0.55, launch=element_blocks_launch, render=element_blocks_src,
             consts=lambda p, task: {"BLOCK": p["BLOCK"]}, bugs={"off_by_one": {"total": "M * E - 1"}}),
        Rung("page_tile", "program per (pair, BLOCK tile): scalar mapping loads, contiguous tile copies",
             (BLOCK, WARPS), memory_eff=0.84, launch=page_tile_launch, render=page_tile_src,
             consts=lambda p, task: {"BLOCK": p["BLOCK"]}, bugs={"off_by_one": {"bound": "E - 1"}}),
        Rung("multi_page_tile", "[PAGES, BLOCK] tiles of several pairs, contiguity hints for 16-byte accesses",
             (Param("PAGES", (1, 2, 4, 8), 2), Param("BLOCK", (256, 512, 1024, 2048), 1024), WARPS),
             memory_eff=0.9, launch=multi_page_launch, render=multi_page_tile_src,
             consts=lambda p, task: {"PAGES": p["PAGES"], "BLOCK": p["BLOCK"]}, bugs={"off_by_one": {"pair_bound": "M - 1"}}),
        Rung("persistent", "#SMs x k persistent programs looping over the (pair, tile) list",
             # 2 warps (roomT, 2026-12-07): correct under TRITON_INTERPRET=1 with its bug failing and built for every target,
             # off the menus: the fitted num_warps bend carried past the 4-16 it was fitted on makes it 0.71x of 4, where
             # the launch model has it 1.3-1.4x slower; the H100 ran it correct and level (roomT/j4, NB=1024 M=8: 2.6 /
             # 2.6 us, modelled 2.3 / 2.4): no gain to offer
             (BLOCK, Param("num_warps", (*unchecked(2), 4, 8, 16), 8), Param("programs_per_sm", (1, 2, 4, 8), 4)), memory_eff=0.92, launch=persistent_launch,
             render=persistent_src, consts=lambda p, task: {"BLOCK": p["BLOCK"]}, bugs={"off_by_one": {"stop": "n_tiles - 1"}}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        consts = variant.consts(params, task)
        sig = {"kc_ptr": ptr, "vc_ptr": ptr, "map_ptr": "*i64", "M": "i32", "E": "i32"}
        return [KernelSpec("paged_kv_copy_kernel", {**sig, **{k: "constexpr" for k in consts}}, consts,
                           num_warps=params["num_warps"], num_stages=1, ints={"E": block_elems(task)})]

    def assemble(self, kernel, variant, params, task) -> str:
        consts = variant.consts(params, task)
        grid = GRIDS[variant.tag].format(**params)
        kw = "".join(f"{k}={v}, " for k, v in consts.items())
        return f"""{TRITON_PRELUDE}
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    M = block_mapping.shape[0]
    E = key_cache[0].numel()                # P * H * D elements per block
    block_mapping = block_mapping.contiguous()
    grid = {grid}
    paged_kv_copy_kernel[grid](key_cache, value_cache, block_mapping, M, E, {kw}num_warps={params['num_warps']})
    return key_cache, value_cache
"""
