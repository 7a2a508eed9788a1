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
