"""Types of the fused-program grammar: tensor types, applied operators (steps) and the
drawing context of one program.

A tensor type is a layout kind and a shape whose dims may carry the name of the module
constant that sizes them:

>>> T("vec", (128, 512), ("batch_size", "in_features")).numel
65536
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

# layout kinds: vec (B, F); seq (B, S, D); img1/img2/img3 (N, C, *spatial)
SPATIAL = {"img1": 1, "img2": 2, "img3": 3}
DTYPE_BYTES = {"fp32": 4, "bf16": 2}
TORCH_DTYPE = {"fp32": "torch.float32", "bf16": "torch.bfloat16"}
# roles: contraction ops start a new fused kernel (cost.py); the rest fuse into its epilogue
ROLES = ("contraction", "attention", "gather", "elementwise", "norm", "softmax", "reduction", "pool", "reshape", "residual")


@dataclass(frozen=True)
class T:
    """A tensor type: layout kind, shape, and per-dim constant names (None: derived)."""
    kind: str
    shape: tuple
    names: tuple

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def with_dim(self, i: int, size: int, name: str | None) -> "T":
        shape, names = list(self.shape), list(self.names)
        shape[i], names[i] = size, name
        return T(self.kind, tuple(shape), tuple(names))


@dataclass
class Step:
    """One operator applied in a program."""
    op: str
    role: str
    params: dict
    t_in: T
    t_out: T
    setup: list            # lines of Model.__init__
    lines: list            # lines of Model.forward
    flops: float
    bytes: float           # minimum DRAM bytes run alone: inputs + weights read, output written
    helpers: tuple = ()    # helper classes the source needs (NewGELU, RMSNorm ...)
    weights: int = 0       # parameter elements the op reads (part of bytes)


@dataclass
class Ctx:
    """Drawing state of one program: RNG, dtype, module constants, attribute names."""
    rng: object
    dtype: str
    consts: dict = field(default_factory=dict)   # name -> value, in first-use order
    init_args: list = field(default_factory=list)  # constants Model.__init__ takes, in order
    attrs: set = field(default_factory=set)
    exprs: dict = field(default_factory=dict)    # name -> source text when not repr(value)

    @property
    def nbytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def const(self, base: str, value, init: bool = True, expr: str | None = None) -> str:
        """A module constant holding value (reused when base already holds it)."""
        name, k = base, 1
        while name in self.consts and self.consts[name] != value:
            k += 1
            name = f"{base}_{k}"
        self.consts.setdefault(name, value)
        if expr is not None:
            self.exprs.setdefault(name, expr)
        if init and name not in self.init_args:
            self.init_args.append(name)
        return name

    def size(self, t: T, i: int, base: str, init: bool = True) -> str:
        """The constructor argument for dim i of t: its constant, or a new one."""
        name = t.names[i]
        if name is None:
            return self.const(base, t.shape[i], init)
        if init and name not in self.init_args:
            self.init_args.append(name)
        return name

    def attr(self, base: str) -> str:
        name, k = base, 1
        while name in self.attrs:
            k += 1
            name = f"{base}{k}"
        self.attrs.add(name)
        return name

    def choice(self, seq):
        return seq[self.rng.randrange(len(seq))]


def last_dim(t: T) -> int:
    return len(t.shape) - 1


def channel_dim(t: T) -> int:
    """The dim a norm / softmax / reduction works along: features (last) or channels (1)."""
    return 1 if t.kind in SPATIAL else last_dim(t)


def spatial(t: T) -> tuple:
    return t.shape[2:] if t.kind in SPATIAL else ()


def io_bytes(ctx: Ctx, *numels) -> float:
    return float(sum(numels) * ctx.nbytes)
