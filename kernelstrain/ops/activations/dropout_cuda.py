"""Dropout in CUDA with a counter-based Philox4x32-10 RNG written in device code.

Element e keeps its value (scaled by 1 / (1 - p)) unless u < p, where u takes the top 24
bits of word e % 4 of Philox4x32-10(counter = (e / 4, offset), key = seed). The mask is a
pure function of (seed, offset, e), so backward regenerates it instead of storing it.

Ladder: a full Philox call per element (3/4 of the RNG work thrown away) -> one call per
4 elements with 8-byte loads -> 8 elements per thread with uint4 -> several uint4 chunks per
thread, all loads in flight before the RNG math -> persistent grid (#SMs x resident blocks
per SM, from the occupancy API).
"""
from dataclasses import replace

from ..base import Cost, Launch, OpModule, Param, Rung, Task, DTYPE_BYTES, cdiv, kernelbench_program
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._act import LAST_SLOT

THREADS = Param("threads", (128, 256, 512, 1024), 256)
# 8 chunks: 32 registers of loads in flight a thread, for short grids (PyTorch's fused dropout: 4)
UNROLL = Param("unroll", (1, 2, 4, 8), 2)
P, SEED, OFFSET = 0.1, 0x5EED1234ABCD, 7
ENTRY = Entry("dropout", (Arg("x", "in", ("T", "D")), Arg("y", "out", ("T", "D")), Scalar("n", "long long", value="T * D"),
                          Scalar("p", "float"), Scalar("seed", "unsigned long long"), Scalar("offset", "unsigned")))
SCALE, NO_SCALE = " * scale", {"scale": ""}     # missing_scale drops the 1 / (1 - p)
PACK = """
// 8 x 16-bit elements as one 16-byte uint4 (n is a multiple of 8): two Philox groups.
union Pack { uint4 u; scalar_t h[8]; };

__device__ __forceinline__ uint4 drop8(uint4 in, unsigned long long chunk, unsigned long long seed,
                                       unsigned offset, float p, float scale) {
    Pack v; v.u = in;
    const uint4 r0 = philox_group(2 * chunk, seed, offset), r1 = philox_group(2 * chunk + 1, seed, offset);
    const unsigned w[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) v.h[k] = drop(v.h[k], w[k], p, scale);
    return v.u;
}
"""
OCCUPANCY = """    static int resident = 0;  // #SMs x blocks per SM, asked once
    if (resident == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dropout_kernel, THREADS, 0);
        resident = sms * per_sm;
    }
    const long long need = (n / 8 + THREADS * UNROLL - 1) / (THREADS * UNROLL);
    const int grid = need < resident ? (int)need : resident;
"""
ARGS = ("const scalar_t* __restrict__ x, scalar_t* __restrict__ y, long long n, float p, float scale,\n"
             "               unsigned long long seed, unsigned offset")


def helpers(scale: str) -> str:
    return f"""
// Philox4x32-10 (Salmon et al., SC'11): 10 rounds of two 32x32->64 multiplies and xors.
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {{
#pragma unroll
    for (int round = 0; round < 10; ++round) {{
        const unsigned hi0 = __umulhi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
        const unsigned hi1 = __umulhi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += PHILOX_W0;
        k.y += PHILOX_W1;
    }}
    return c;
}}

// Random words for group g (elements 4g .. 4g+3).
__device__ __forceinline__ uint4 philox_group(unsigned long long g, unsigned long long seed, unsigned offset) {{
    return philox4x32_10(make_uint4((unsigned)g, (unsigned)(g >> 32), offset, 0u),
                         make_uint2((unsigned)seed, (unsigned)(seed >> 32)));
}}

// Keep with probability 1 - p: compare the top 24 bits as a uniform in [0, 1).
__device__ __forceinline__ scalar_t drop(scalar_t v, unsigned word, float p, float scale) {{
    return (float)(word >> 8) * 5.9604645e-8f >= p ? from_float(to_float(v){scale}) : from_float(0.f);
}}
"""


def host(task, grid: str, block: str, prologue: str = "") -> str:
    return f"""
void dropout(const scalar_t* x, scalar_t* y, long long n, float p, unsigned long long seed, unsigned offset,
             cudaStream_t stream) {{
{prologue}    dropout_kernel<<<{grid}, {block}, 0, stream>>>(x, y, n, p, 1.f / (1.f - p), seed, offset);
}}
"""


def int_launch(base):
    """Philox is integer work: its rate relative to the FLOP peak is the catalog's int32_scale."""
    return lambda p, task: replace(base(p, task), compute_scale=task.gpu.int32_scale)


def elements(task) -> int:
    return task["T"] * task["D"]


# -- philox_per_element, philox4_vec4 ------------------------------------------------------
def philox_per_element_launch(p, task):
    return Launch(grid=cdiv(elements(task), p["threads"]), threads=p["threads"], regs=16,
                  bytes_per_access=DTYPE_BYTES[task.dtype])


def philox_per_element_src(p, task, scale=SCALE):
    return helpers(scale) + f"""
#define THREADS {p['threads']}

// One thread per element runs all 10 Philox rounds for its group and keeps one word of four:
// neighbouring threads recompute the same group, so the integer pipe does 4x the needed work.
extern "C" __global__ void
dropout_kernel({ARGS}) {{
    const long long e = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (e >= n) return;
    const uint4 r = philox_group(e / 4, seed, offset);
    const int j = e % 4;
    const unsigned word = j == 0 ? r.x : j == 1 ? r.y : j == 2 ? r.z : r.w;
    y[e] = drop(x[e], word, p, scale);
}}
{host(task, "(unsigned)((n + THREADS - 1) / THREADS)", "THREADS")}"""


def philox4_vec4_launch(p, task):
    n, threads = elements(task), p["threads"]
    return Launch(grid=cdiv(n // 4, threads), threads=threads, regs=16, bytes_per_access=4 * DTYPE_BYTES[task.dtype],
                  lane_util=min(1.0, n / 4 / threads))


def philox4_vec4_src(p, task, bound="n / 4"):
    return helpers(SCALE) + f"""
#define THREADS {p['threads']}
union Pack4 {{ uint2 u; scalar_t h[4]; }};  // 4 x 16-bit elements in one 8-byte access

// One Philox call per thread feeds exactly its 4 elements (n is a multiple of 4).
extern "C" __global__ void __launch_bounds__(THREADS)
dropout_kernel({ARGS}) {{
    const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (g >= {bound}) return;
    const uint4 r = philox_group(g, seed, offset);
    Pack4 v;
    v.u = reinterpret_cast<const uint2*>(x)[g];
    v.h[0] = drop(v.h[0], r.x, p, scale);
    v.h[1] = drop(v.h[1], r.y, p, scale);
    v.h[2] = drop(v.h[2], r.z, p, scale);
    v.h[3] = drop(v.h[3], r.w, p, scale);
    reinterpret_cast<uint2*>(y)[g] = v.u;
}}
{host(task, "(unsigned)((n / 4 + THREADS - 1) / THREADS)", "THREADS")}"""


# -- philox8_uint4, unrolled_ilp, persistent: 16-byte chunks of 8 elements ------------------
def philox8_uint4_launch(p, task):
    chunks, threads = elements(task) // 8, p["threads"]
    return Launch(grid=cdiv(chunks, threads), threads=threads, regs=32, bytes_per_access=16,
                  lane_util=min(1.0, chunks / threads))


def philox8_uint4_src(p, task, pack=PACK, scale=SCALE):
    return helpers(scale) + f"""
#define THREADS {p['threads']}
{pack}
extern "C" __global__ void __launch_bounds__(THREADS)
dropout_kernel({ARGS}) {{
    const long long c = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (c >= n / 8) return;
    reinterpret_cast<uint4*>(y)[c] = drop8(reinterpret_cast<const uint4*>(x)[c], c, seed, offset, p, scale);
}}
{host(task, "(unsigned)((n / 8 + THREADS - 1) / THREADS)", "THREADS")}"""


def unrolled_ilp_launch(p, task):
    chunks, threads, unroll = elements(task) // 8, p["threads"], p["unroll"]
    return Launch(grid=cdiv(chunks, threads * unroll), threads=threads, regs=22 + 4 * unroll,
                  bytes_per_access=16 * unroll, lane_util=min(1.0, chunks / (threads * unroll)))


def unrolled_ilp_src(p, task, last="UNROLL"):
    return helpers(SCALE) + f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}
{PACK}
// Each thread owns UNROLL chunks THREADS apart; the loads go out first so the ~140 integer
// ops of Philox per chunk overlap the DRAM latency instead of waiting behind it.
extern "C" __global__ void __launch_bounds__(THREADS)
dropout_kernel({ARGS}) {{
    const long long chunks = n / 8, base = (long long)blockIdx.x * THREADS * UNROLL + threadIdx.x;
    uint4 v[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k)
        if (base + k * THREADS < chunks) v[k] = reinterpret_cast<const uint4*>(x)[base + k * THREADS];
#pragma unroll
    for (int k = 0; k < {last}; ++k) {{
        const long long c = base + k * THREADS;
        if (c < chunks) reinterpret_cast<uint4*>(y)[c] = drop8(v[k], c, seed, offset, p, scale);
    }}
}}
{host(task, "(unsigned)((n / 8 + THREADS * UNROLL - 1) / (THREADS * UNROLL))", "THREADS")}"""


def persistent_launch(p, task):
    chunks, threads, unroll = elements(task) // 8, p["threads"], p["unroll"]
    gpu, regs = task.gpu, 26 + 2 * unroll   # the host sizes the grid with the occupancy API
    per_sm = min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // threads, gpu.regs_per_sm // (threads * regs))
    grid = min(gpu.sms * per_sm, cdiv(chunks, threads * unroll))
    return Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=16 * unroll,
                  lane_util=min(1.0, chunks / (grid * threads * unroll)))


def persistent_src(p, task, scale=SCALE):
    return helpers(scale) + f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}
{PACK}
// Persistent: every block that fits on the GPU at once stays resident and strides over all
// uint4 chunks, UNROLL loads in flight per thread.
extern "C" __global__ void __launch_bounds__(THREADS)
dropout_kernel({ARGS}) {{
    const long long chunks = n / 8, stride = (long long)gridDim.x * THREADS;
    for (long long base = (long long)blockIdx.x * THREADS + threadIdx.x; base < chunks; base += UNROLL * stride) {{
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k)
            if (base + k * stride < chunks) v[k] = reinterpret_cast<const uint4*>(x)[base + k * stride];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {{
            const long long c = base + k * stride;
            if (c < chunks) reinterpret_cast<uint4*>(y)[c] = drop8(v[k], c, seed, offset, p, scale);
        }}
    }}
}}
{host(task, "grid", "THREADS", OCCUPANCY)}"""


class DropoutCuda(OpModule):
    op, impl, family = "dropout", "cuda", "activations"
    title = "Dropout (Philox4x32-10 counter-based RNG)"
    desc = (f"y = x * keep / (1 - p) with p = {P}; keep[e] = u[e] >= p, u[e] = (w >> 8) * 2^-24 where w is "
            "word e % 4 of Philox4x32-10 with counter (e / 4 as two 32-bit words, offset, 0) and key "
            f"(seed low, seed high); seed = {SEED:#x}, offset = {OFFSET}.")
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 128, "D": 4096}, {"T": 2048, "D": 5120},
              {"T": 4096, "D": 8192}, {"T": 8192, "D": 8192}, {"T": 16384, "D": 12288})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"T": 2048, "D": 5120}
    # compute_eff is against the fp32 FLOP peak, but Philox is 32-bit integer multiply/xor
    # work that issues at about a quarter of that rate: 0.3 is a well-fed integer pipe.
    variants = (
        Rung("philox_per_element", "one thread per element, a full Philox4x32-10 call each, 1 of 4 words used",
             (Param("threads", (64, 128, 256), 64),), compute_eff=0.04, memory_eff=0.45,
             launch=int_launch(philox_per_element_launch), render=philox_per_element_src,
             bugs={"missing_scale": NO_SCALE}),
        Rung("philox4_vec4", "one Philox call feeds 4 elements moved as one 8-byte uint2",
             (THREADS,), compute_eff=0.25, memory_eff=0.8, launch=int_launch(philox4_vec4_launch),
             render=philox4_vec4_src, bugs={"off_by_one": {"bound": "n / 4 - 1"}}),
        Rung("philox8_uint4", "8 elements per thread through 16-byte uint4 loads, two Philox calls",
             (THREADS,), compute_eff=0.31, memory_eff=0.88, launch=int_launch(philox8_uint4_launch),
             render=philox8_uint4_src,
             bugs={"off_by_one": {"pack": PACK.replace("2 * chunk + 1, seed", "2 * chunk, seed")},
                   "missing_scale": NO_SCALE}),
        Rung("unrolled_ilp", "UNROLL uint4 chunks per thread, every load issued before the RNG math",
             (THREADS, UNROLL), compute_eff=0.31, memory_eff=0.9, launch=int_launch(unrolled_ilp_launch),
             render=unrolled_ilp_src, bugs={"off_by_one": {"last": "UNROLL - 1"}}, bug_tasks=LAST_SLOT),
        Rung("persistent", "#SMs x occupancy blocks grid-striding over uint4 chunks, unrolled",
             (THREADS, UNROLL), compute_eff=0.3, memory_eff=0.92, launch=int_launch(persistent_launch),
             render=persistent_src, bugs={"missing_scale": NO_SCALE}),
    )

    def cost(self, task: Task) -> Cost:
        n, e = task["T"] * task["D"], DTYPE_BYTES[task.dtype]
        # ~70 integer ops per Philox4x32-10 call shared by 4 elements, plus convert/compare/scale
        return Cost(flops=24 * n, bytes=2 * n * e)

    def reference(self, task: Task) -> str:
        body = """M = 0xFFFFFFFF
        n = x.numel()
        g = torch.arange((n + 3) // 4, dtype=torch.int64, device=x.device)
        c0, c1, c2, c3 = g & M, g >> 32, torch.full_like(g, self.offset), torch.zeros_like(g)
        k0, k1 = self.seed & M, self.seed >> 32
        for _ in range(10):  # Philox4x32-10 on int64 lanes holding uint32 values
            p0, p1 = c0 * 0xD2511F53, c2 * 0xCD9E8D57
            c0, c1, c2, c3 = ((p1 >> 32) & M) ^ c1 ^ k0, p1 & M, ((p0 >> 32) & M) ^ c3 ^ k1, p0 & M
            k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
        words = torch.stack([c0, c1, c2, c3], dim=1).reshape(-1)[:n]
        u = (words >> 8).to(torch.float32) * 2.0 ** -24
        keep = (u >= self.p).view_as(x)
        return torch.where(keep, x.float() * (1.0 / (1.0 - self.p)), 0.0).to(x.dtype)"""
        return kernelbench_program(task, self.title, args="x", body=body,
                                   init=f"self.p, self.seed, self.offset = {P}, {SEED:#x}, {OFFSET}",
                                   inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda')]")

    def assemble(self, body, variant, params, task) -> str:
        return prelude(task) + body
