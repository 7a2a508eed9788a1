"""The warp-specialized Hopper rung of flash_prefill_cuda and chunked_prefill_cuda (not an op module itself):
FlashAttention-3's producer/consumer split on _flash_wgmma's kernel. Warpgroup 0 is the producer: one thread
streams Q and then every K/V tile by TMA (cp.async.bulk.tensor, 128-byte swizzle: the [rows][64] chunk layout the
wgmma descriptors read) into a STAGES-deep ring guarded by full/empty mbarriers; the other one or two warpgroups are
the consumers, running the wgmma kernel's S = Q K^T, online softmax and O += P V on their 64 query rows each,
waiting on a tile's full barrier and handing its slot back on the empty one. No cp.async address math and no
__syncthreads on the consumers' path; with two consumers the producer gives its registers up (setmaxnreg). FA3's
ping-pong between the consumers and its intra-warpgroup softmax/wgmma overlap are not here.
"""
import re
from dataclasses import replace

from ..matmul._gemm_ptx import MBAR_TMA_PTX, WGMMA_PTX
from ..matmul._gemm_wgmma import TMA_INCLUDES, tensor_maps
from .flash_prefill_spec import LOG2E

# the cp.async loads of _flash_wgmma.KERNEL and its per-tile barriers, each replaced by the producer/consumer text
ISSUE_FROM, ISSUE_TO = "    auto issue = [&](int j) {", "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n    }\n"
WAIT_FROM = "        if (j + STAGES - 1 < ntiles) issue(j + STAGES - 1);"
WAIT_TO = "__syncthreads();                                        // ... and everyone's\n"
LOAD_FROM, LOAD_TO = "__device__ __forceinline__ void load_tile(", "\n    }\n}\n"
RELEASE = ("        __syncthreads();   // every warp is done with stage j % STAGES before iteration j + 1 refills it",
           "        mbar_arrive(&empty[j % STAGES]);   // this thread's wgmmas are done with the slot: the producer may refill it")
PRODUCER = r"""    __shared__ uint64_t full[STAGES], empty[STAGES], q_full;
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) { mbar_init(&full[i], 1); mbar_init(&empty[i], CONSUMERS); }
        mbar_init(&q_full, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp < 0) {                                             // the producer warpgroup
@DEC@        if (threadIdx.x == 0) {                                 // one thread issues every TMA copy
            mbar_expect_tx(&q_full, BLOCK_M * HEAD_DIM * 2);
            for (int c = 0; c < DC; ++c) tma_load_2d(Qs + c * BLOCK_M * 128, &tq, c * 64, @QROW@, &q_full);
            for (int j = 0; j < ntiles; ++j) {
                uint8_t* st = stage(j);
                if (j >= STAGES) mbar_wait(&empty[j % STAGES], (j / STAGES - 1) & 1);   // the consumers left the slot
                mbar_expect_tx(&full[j % STAGES], 2 * BLOCK_N * HEAD_DIM * 2);
                for (int c = 0; c < DC; ++c) {   // K chunk c, then V chunk c: boxes of [BLOCK_N rows][64 columns]
                    tma_load_2d(st + c * BLOCK_N * 128, &tk, c * 64, @KVROW@ + j * BLOCK_N, &full[j % STAGES]);
                    tma_load_2d(st + (DC + c) * BLOCK_N * 128, &tv, c * 64, @KVROW@ + j * BLOCK_N, &full[j % STAGES]);
                }
            }
        }
        return;
    }
@INC@    mbar_wait(&q_full, 0);                                    // this CTA's Q tile landed
"""
CONSUMER_WAIT = "        mbar_wait(&full[j % STAGES], (j / STAGES) & 1);        // tile j's K and V landed (TMA's bytes counted)\n"
SETMAXNREG = ('        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\\n");    // the producer keeps few registers\n',
              '    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\\n");       // ... two consumer warpgroups take them\n')
MAPS = "const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv"
# the maps of the host: [rows][HEAD_DIM] K-major views of Q, K and V, boxes of 64 columns (one 128-byte swizzled row)
HOST_MAPS = ("#define BK 64                          // TMA boxes: 64 columns, one 128-byte swizzled row\n")


def cut(text: str, start: str, end: str, new: str) -> str:
    """text with [start .. end] (end's first occurrence after start, inclusive) replaced by new."""
    i = text.index(start)
    j = text.index(end, i) + len(end)
    return text[:i] + new + text[j:]


def warp_specialize(kernel: str, signature: tuple, qrow: str, kvrow: str) -> str:
    """_flash_wgmma's kernel text (one or two consumer warpgroups, any dialect of its indexing) as FA3's
    producer/consumer kernel. signature: (its old argument text, the new one); qrow / kvrow: the row of the
    [rows][HEAD_DIM] tensor maps where this CTA's Q tile starts and where its K/V tile 0 starts."""
    consumers = int(re.search(r"constexpr int THREADS = (\d+);", kernel).group(1))
    # two consumers on 128-key tiles: 384 threads cap ptxas at 168 registers, where the consumers' S tile and O
    # would spill; setmaxnreg moves the producer's to them (at 64-key tiles ptxas needs fewer than the cap, and it
    # ignores setmaxnreg when the register count at entry is not the cap: nothing to move)
    two = consumers == 256 and "#define BLOCK_N 128" in kernel
    producer = (PRODUCER.replace("@QROW@", qrow).replace("@KVROW@", kvrow)
                .replace("@DEC@", SETMAXNREG[0] if two else "").replace("@INC@", SETMAXNREG[1] if two else ""))
    swaps = (
        (WGMMA_PTX, MBAR_TMA_PTX + WGMMA_PTX[1:]),
        (f"constexpr int THREADS = {consumers};",
         f"constexpr int CONSUMERS = {consumers};                // consumer warpgroup(s)\n"
         "constexpr int THREADS = CONSUMERS + 128;        // + the producer warpgroup (warps 0-3)"),
        signature,
        ("const int warp = threadIdx.x / 32,", "const int warp = threadIdx.x / 32 - 4,"),   # consumers 0.., producer < 0
        RELEASE,
    )
    for old, new in swaps:
        assert kernel.count(old) == 1, old
        kernel = kernel.replace(old, new)
    kernel = cut(kernel, LOAD_FROM, LOAD_TO, "// TMA's SWIZZLE_128B writes exactly this layout: [rows][64] boxes at 1024-byte-aligned bases\n")
    kernel = cut(kernel, ISSUE_FROM, ISSUE_TO, producer)
    return cut(kernel, WAIT_FROM, WAIT_TO, CONSUMER_WAIT)


def ws_host(kind: str, head: str, kernel: str, grid: str, maps: tuple, args: str) -> str:
    """The host function: three tensor maps (rows of Q; rows of K and V), the smem opt-in and the launch."""
    q_rows, kv_rows = maps
    return f"""
{HOST_MAPS}{tensor_maps(kind)}{head} {{
    const CUtensorMap tq = kmajor_map(q, {q_rows}, HEAD_DIM, BLOCK_M), tk = kmajor_map(k, {kv_rows}, HEAD_DIM, BLOCK_N),
                      tv = kmajor_map(v, {kv_rows}, HEAD_DIM, BLOCK_N);
    const int smem = 1024 + (BLOCK_M + 2 * STAGES * BLOCK_N) * HEAD_DIM * (int)sizeof(scalar_t);   // + alignment slack
    cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    {kernel}<<<{grid}, THREADS, smem, stream>>>(tq, tk, tv, {args});
}}
"""


FLASH_SIG = ("flash_prefill_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,\n"
             "                     scalar_t* __restrict__ o, int S, float scale_log2) {",
             f"flash_prefill_kernel({MAPS},\n                     scalar_t* __restrict__ o, int S, float scale_log2) {{")
FLASH_HEAD = ("void flash_prefill(const scalar_t* q, const scalar_t* k, const scalar_t* v, scalar_t* o, int B, int H, int S,\n"
              "                   float scale, cudaStream_t stream)")


def kind_of(task) -> str:
    return "bf16" if task.dtype == "bf16" else "f16"


def flash_ws_src(p, task, mask=">", m0="-INFINITY", l0="0.f"):
    from ._flash_wgmma import wgmma_kernel
    kernel = warp_specialize(wgmma_kernel(p, task, mask, m0, l0), FLASH_SIG, "blockIdx.x * S + m0", "blockIdx.x * S")
    return kernel + ws_host(kind_of(task), FLASH_HEAD, "flash_prefill_kernel", "dim3(B * H, S / BLOCK_M)",
                            ("B * H * S", "B * H * S"), f"o, S, scale * {LOG2E}f")


# the producer's work leaves the consumers' instruction slots and barriers: the wgmma rung's threads issued every K/V
# tile's cp.async copies with their swizzle math and met at a __syncthreads; here they wait on a barrier. What that buys
# depends on the consumers and the key tile more than on the copies alone; H100, warp_specialized / wgmma_warpgroup
# at the same tiles (scripts/roomA_device.py plans a4, a5, lead's calls 1-2, 2026-12-06, docs/roomA_device_h100_a4/,
# _a5/), D=128: one consumer (BLOCK_M 64) on 64-key tiles 1.23x (flash_prefill_cuda B=1 H=32 S=2048, 110.5 / 136.3 us)
# and 1.26x (S=4096, 399.5 / 504.8); on 128-key tiles 1.13x (chunked_prefill_cuda B=2 H=16 KVH=4 C=512 P=1536,
# 63.6 / 71.7); two consumers (BLOCK_M 128) on 64-key tiles 1.09-1.16x (flash 116.3 / 131.0, 117.0 / 129.8, 399.1 /
# 463.5; chunked 53.4 / 58.4), on 128-key tiles 1.32-1.38x (chunked 41.8 / 55.1, P=3584 75.7 / 104.1; flash's 91.7 us
# is its fastest tile). At D=64 less (B=8 H=16 S=1024: one consumer 78.5 / 87.8 = 1.12x, two 100.4 / 79.1 = 0.79x):
# the gain taken to the power D / 128. FA3 (Shah et al. 2024, Table 3): 570 -> 661 TFLOPs with ping-pong.
WS_GAIN = {(1, 64): 1.24, (1, 128): 1.13, (2, 64): 1.12, (2, 128): 1.33}
# two consumer warpgroups on 128-key tiles give the producer's registers to the consumers (setmaxnreg 40 / 232): the
# register file holds (2 x 128 x 232 + 128 x 40) / 384 = 168 a thread on average, and no consumer spills at 208
# (the wgmma rung's figure at these tiles; the a4 row above ran 1.32x its wgmma twin, not slower)
SETMAXNREG_AVG = 168


def ws_launch(base, power: float = 1.0):
    """A wgmma rung's launch model with a producer warpgroup more (threads) and the copies off the consumers' path;
    power: how far the module's calibration damps a launch gain (the measured gain is WS_GAIN after it)."""
    def launch(p, task):
        out = base(p, task)
        gain = WS_GAIN[out.threads // 128, p["BLOCK_N"]] ** (power * min(task["D"], 128) / 128)
        regs = min(out.regs, SETMAXNREG_AVG) if out.threads == 256 and p["BLOCK_N"] == 128 else out.regs
        return replace(out, threads=out.threads + 128, regs=regs, compute_scale=out.compute_scale * gain)
    return launch


# FA3's ping-pong between two consumer warpgroups (BLOCK_M 128): named barriers 1 and 2 (0 is __syncthreads) hand the
# tensor cores from one warpgroup to the other at every GEMM issue, so one's softmax runs under the other's wgmmas
# instead of both softmaxes at once. Anchors in the consumer loop of warp_specialize's kernel (both dialects).
PINGPONG_PTX = """// ping-pong: bar.sync waits for the other consumer warpgroup's bar.arrive (256 threads: 128 of each)
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\\n" :: "r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\\n" :: "r"(id) : "memory"); }
"""
TURN = "named_sync(1 + cw);                                     // this warpgroup's turn on the tensor cores\n        "
PASS = "named_arrive(2 - cw);                                   // the other's GEMM next, under this softmax\n        "
PINGPONG = (
    ("    mbar_wait(&q_full, 0);                                    // this CTA's Q tile landed\n",
     "    mbar_wait(&q_full, 0);                                    // this CTA's Q tile landed\n"
     "    const int cw = warp / 4;                                  // consumer warpgroup 0 or 1\n"
     "    if (cw == 1) named_arrive(1);                             // warpgroup 0 issues first\n"),
    ("        float s[BLOCK_N / 2] = {};\n        wgmma_fence();", "        float s[BLOCK_N / 2] = {};\n        " + TURN + "wgmma_fence();"),
    ("        wgmma_commit();\n        wgmma_wait<0>();\n        fence_acc(s);",
     "        wgmma_commit();\n        " + PASS + "wgmma_wait<0>();\n        fence_acc(s);"),
    ("        l_i[1] += rs[1];\n        wgmma_fence();", "        l_i[1] += rs[1];\n        " + TURN + "wgmma_fence();"),
    ("        wgmma_commit();\n        wgmma_wait<0>();\n#pragma unroll\n        for (int c = 0; c < DC; ++c) fence_o(acc[c]);",
     "        wgmma_commit();\n        " + PASS + "wgmma_wait<0>();\n#pragma unroll\n        for (int c = 0; c < DC; ++c) fence_o(acc[c]);"),
    ('extern "C" __global__', PINGPONG_PTX + 'extern "C" __global__'),
)
# H100 (plan a9, roomA j1, 2026-12-07: every config correct, every bug caught), ping-pong against warp_specialized at
# the same 128-key tiles: flash_prefill B=1 H=32 S=2048 D=128 92.8 / 90.2 us, S=4096 309.8 / 311.2 (2 stages), 319.2
# / 309.3 (3), B=2 S=4096 654.2 / 670.4; chunked_prefill C=512 P=1536 39.9 / 41.7, P=3584 72.9 / 75.8: 1.01x geomean,
# not the 1.06 FA3's paper suggested (Shah et al. 2024: 570 -> 620-661 TFLOPs with intra-warpgroup overlap too). At
# 64-key tiles it ran 1.40-1.44x slower (166.1 / 115.6, 75.3 / 53.7): too short a GEMM to hide the other softmax; the
# rung keeps 128-key tiles (FA3's own)
PINGPONG_GAIN = 1.01


def pingpong(render):
    """A warp_specialized render with FA3's ping-pong between its two consumer warpgroups."""
    def out(p, task, **kw):
        src = render(p, task, **kw)
        for old, new in PINGPONG:
            assert src.count(old) == 1, old
            src = src.replace(old, new)
        return src
    return out


def ws_rung(render, base_launch, compute_eff: float, bugs: dict, fit_as: str, power: float = 1.0, **kw) -> tuple:
    """The rungs of both modules: warp_specialized, the wgmma rung's tiles, stages to 4 (TMA's ring costs no consumer
    registers), correct on an H100 (plan a3: 18 configs of both modules at three shapes, rel. L2 2.1e-3 - 2.5e-3 as
    the wgmma rung's; all 18 off_by_one / wrong_init renders caught) and timed there (plan a4, above); and its
    ping-pong form on 128 x 128 tiles (plan a9, PINGPONG_GAIN). fit_as: the calibration its wgmma rung takes (the same kernel with
    the copies moved to a producer); power: ws_launch's."""
    from ..base import Param, Rung
    from ._flash_wgmma import WARPGROUP_ROWS
    tiles = (Param("BLOCK_N", (64, 128), 64), Param("stages", (2, 3, 4), 2))
    needs = frozenset({"wgmma", "tma", "inline_ptx"})
    ws = Rung("warp_specialized", "sm_90a, FA3's producer/consumer split: a producer warpgroup streams Q and the K/V "
              "tiles by TMA into a STAGES-deep mbarrier ring, one or two consumer warpgroups run the wgmma loop",
              (*WARPGROUP_ROWS, *tiles), needs=needs, path="fp16", compute_eff=compute_eff, smem="dynamic",
              launch=ws_launch(base_launch, power), render=render, fit_as=fit_as, bugs=bugs, **kw)
    launch = ws_launch(base_launch, power)
    return (ws, Rung("warp_specialized_pingpong", "sm_90a, FA3's ping-pong: the warp-specialized kernel's two consumer "
                     "warpgroups take turns at the tensor cores (named barriers), one's softmax under the other's GEMMs",
                     (Param("BLOCK_M", (128,), 128), Param("BLOCK_N", (128,), 128), tiles[1]), needs=needs, path="fp16",
                     compute_eff=compute_eff,
                     smem="dynamic", render=pingpong(render), fit_as=fit_as, bugs=bugs,
                     launch=lambda p, task: replace(launch(p, task), compute_scale=launch(p, task).compute_scale
                                                    * PINGPONG_GAIN), **kw))


__all__ = ("TMA_INCLUDES", "flash_ws_src", "pingpong", "warp_specialize", "ws_host", "ws_launch", "ws_rung")
