"""What selective_scan_triton's rungs share: the kernel signature, the zero state (and the wrong_init bug's
state), the program around a rung's kernels (scan operator, softplus, wrapper) and the kernels' prologue."""
from ..base import TRITON_PRELUDE
from .selective_scan_spec import ENTRY

SIG = ("u_ptr, dl_ptr, A_ptr, B_ptr, C_ptr, Ds_ptr, z_ptr, db_ptr, y_ptr, D, L,\n"
            "                          N: tl.constexpr, BLOCK_D: tl.constexpr")
X0 = "tl.zeros((BLOCK_D, N), tl.float32)"
WRONG_INIT = {"x0": "tl.full((BLOCK_D, N), 1.0, tl.float32)"}


def program(task, kernels: str, launch: str) -> str:
    """The candidate: the scan operator, softplus, the rung's kernels and the wrapper."""
    return f"""{TRITON_PRELUDE}

@triton.jit
def combine(a1, b1, a2, b2):
    # scan operator: (a1, b1) then (a2, b2) -> x = a2 (a1 x + b1) + b2
    return a1 * a2, a2 * b1 + b2


@triton.jit
def softplus(v):
    return tl.where(v <= 20.0, tl.log(1.0 + tl.exp(v)), v)
{kernels}

{ENTRY.py_def(task)}:
    B, D, L = u.shape
    N = A.shape[1]
    u, delta, Bs, Cs, z = (t.contiguous() for t in (u, delta, Bs, Cs, z))
    y = torch.empty_like(u)
    {launch}
    return y
"""


def prologue(exp2: bool, skip: bool = True) -> str:
    scale = " * 1.4426950408889634  # log2(e): exp(dt A) = exp2(dt A log2 e)" if exp2 else ""
    ds = "\n    dskip = tl.load(Ds_ptr + d, mask=dm, other=0.0)" if skip else ""
    return f"""    d = blk * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.arange(0, N)
    dm = d < D
    A2 = tl.load(A_ptr + d[:, None] * N + n[None, :], mask=dm[:, None], other=0.0){scale}{ds}
    dbias = tl.load(db_ptr + d, mask=dm, other=0.0)
    row = (b * D + d).to(tl.int64) * L
    bc = b.to(tl.int64) * N * L + n * L"""


def chunks_chained(task, p) -> bool:
    """A chunk's end state reaches the output only through the next chunk: where the whole sequence is one chunk
    (L 256 in 256- or 512-step chunks) an end state read one step early (bad_combine_index) is never used, and the
    candidate runs correct (TRITON_INTERPRET=1, scripts/roomT_interpret.py: rel_l2 7.9e-7 at L 256, CHUNK 512)."""
    return task["L"] > p["CHUNK"]
