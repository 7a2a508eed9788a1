"""Pieces shared by the activation modules (not an op module itself).

>>> from kernelstrain.ops.contract import Arg, Entry, Scalar
>>> from kernelstrain.ops import REGISTRY
>>> from kernelstrain.tasks import make_task
>>> e = Entry("f", (Arg("x", "in", ("R",)), Scalar("R")))
>>> print(host_line(e, make_task(REGISTRY["softmax_cuda"], "A100", "fp16", {"R": 2, "C": 8}), "f_kernel", "R", "256"))
<BLANKLINE>
void f(const scalar_t* x, int R, cudaStream_t stream) {
    f_kernel<<<R, 256, 0, stream>>>(x, R);
}
<BLANKLINE>
"""


def host_line(entry, task, kernel: str, grid: str, block: str) -> str:
    """A host function, its prototype on one line, launching `kernel` with every entry argument."""
    return f"""
{entry.prototype(task)} {{
    {kernel}<<<{grid}, {block}, 0, stream>>>({entry.call_args()});
}}
"""


def last_slot_holds_a_chunk(chunks: int, threads: int, unroll: int) -> bool:
    """Whether a store loop over a thread's UNROLL chunk slots THREADS apart (blocks of THREADS * UNROLL chunks), one
    slot short (an off_by_one's `k < UNROLL - 1`), leaves a chunk unwritten: a full block, or a last one reaching past
    (UNROLL - 1) * THREADS (dropout_cuda unrolled_ilp: the H100 passed T 1 D 4096 at 256 x 8, 512 chunks, labels n1).

    >>> last_slot_holds_a_chunk(512, 256, 8), last_slot_holds_a_chunk(512, 256, 2), last_slot_holds_a_chunk(512, 1024, 1)
    (False, True, True)
    """
    block = threads * unroll
    return chunks >= block or chunks % block > (unroll - 1) * threads


# an off_by_one whose store loop stops one slot short (`k < UNROLL - 1`), on a [T, D] tensor of 16-byte chunks of 8
LAST_SLOT = (("off_by_one", lambda t, p: last_slot_holds_a_chunk(t["T"] * t["D"] // 8, p["threads"], p["unroll"])),)
