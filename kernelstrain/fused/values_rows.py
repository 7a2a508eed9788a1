"""Row ops on an emulated tensor (values_sample.Sample): a softmax, log_softmax, logsumexp or reduction along a
dim, on simulated rows of the row's true length drawn from the sample and held to what every row shares (a
norm's mean and energy, a contraction's channel constants), or in closed form where the rows' structure fixes
the result (a sum of rows of one mean, the max of n draws)."""
from __future__ import annotations

import math

from .types import SPATIAL
from .values_sample import K, Z, Draws, Sample, extreme, gauss, quantiles

ROW_BUDGET = 16384                        # values drawn for one simulated row op
SMALL_NOISE = 0.05                        # a channel's noise (sd, in logits) a softmax maps near linearly: it stays Gaussian


def _row_len(step: dict) -> int:
    shape, dim = step["in"]["shape"], step["params"].get("dim")
    if isinstance(dim, list):
        return math.prod(shape[d] for d in dim)
    if dim is None:
        dim = 1 if step["in"]["kind"] in SPATIAL else -1
    return shape[dim]


def along_last(step: dict) -> bool:
    shape, dim = step["in"]["shape"], step["params"].get("dim", -1)
    return isinstance(dim, int) and dim % len(shape) == len(shape) - 1


def _rows(x: Sample, step: dict, draws: Draws, with_diag: bool):
    """Simulated rows along the step's dim (at most ROW_BUDGET / 16 values drawn: the rest stand for as
    many again), held to the mean and energy every row of the tensor has, and the log of how many true
    values each drawn one stands for."""
    C, dim = _row_len(step), step_dim(step)
    mean = x.row_mean[1] if x.row_mean is not None and x.row_mean[0] == dim else None
    energy = x.energy if x.normed and along_last(step) else None
    n = min(C, ROW_BUDGET // 16)
    R = max(16, min(256, ROW_BUDGET // n))
    rows = []
    gaussian = _along_chan(x, step) and x.chan[3] and step["op"] not in ("amax", "amin")
    consts = draws.pick(x.chan[1], n) if gaussian else None
    for _ in range(R):
        row = draws.pick(x.v, n) if consts is None else [c + x.chan[2] * Z[draws.index()] for c in consts]
        if with_diag:
            row[0] = x.diag[draws.index()]
        held = mean if mean is None or not x.row_sd else mean + x.row_sd * Z[draws.index()]
        rows.append(_held(row, held, energy) if n > 1 else row)
    return rows, math.log(C / n)


def _held(row: list, mean: float | None, energy: float | None) -> list:
    """A drawn row moved to the row mean and scaled to the row energy every row has (a norm's rows)."""
    if mean is not None:
        own = math.fsum(row) / len(row)
        row = [r - own + mean for r in row]
    if energy is not None:
        centre = mean if mean is not None else 0.0
        dev = math.fsum((r - centre) ** 2 for r in row) / len(row)
        want = energy - centre * centre
        if dev > 0.0 and want > 0.0:
            f = math.sqrt(want / dev)
            row = [centre + (r - centre) * f for r in row]
    return row


def _lse(row: list, extra: float) -> float:
    m = max(row)
    return m + math.log(math.fsum(math.exp(r - m) for r in row)) + extra


def step_dim(step: dict) -> int | None:
    dim, n = step["params"].get("dim"), len(step["in"]["shape"])
    if dim is None and step["op"] in ("layer_norm", "rms_norm"):
        return n - 1
    return dim % n if isinstance(dim, int) else None


def _along_chan(x: Sample, step: dict) -> bool:
    return x.chan is not None and x.chan[0] == step_dim(step)


def row_op(x: Sample, step: dict, draws: Draws) -> Sample:
    op, C = step["op"], _row_len(step)
    if op in ("sum", "mean") and x.row_mean is not None and x.row_mean[0] == step_dim(step):
        n = C if op == "sum" else 1
        return Sample(gauss(x.row_mean[1] * n, x.row_sd * n))
    diag = x.diag is not None and along_last(step)
    if op in ("sum", "mean") and _along_chan(x, step):
        # the channels' constants are one draw of the weights, the same for every row but not known here: their mean, not a
        # pick of C of them (24 picks put seed 404's 12759 -- conv3d -> add_scalar -> sum over 24 channels -> tanh -- 3 sd
        # down, deep in tanh's saturation: real 4.6x the tolerance from a constant)
        fixed = math.fsum(x.chan[1]) / K
        n = C if op == "sum" else 1
        return Sample(gauss(fixed * n, x.chan[2] * math.sqrt(C) * n / C))
    if op in ("sum", "mean") and not diag:
        m, sd = x.mean, x.sd
        return Sample(gauss(m * C, sd * math.sqrt(C)) if op == "sum" else gauss(m, sd / math.sqrt(C)))
    if op in ("amax", "amin") and not diag:
        low = x.floor if op == "amin" and x.floor is not None else -math.inf
        v = tuple(max(low, u) for u in extreme(x.v, C, op == "amax"))
        if _along_chan(x, step) and x.chan[3]:
            # each row the max of the same C channel constants plus Gaussian noise of sd s: it varies across rows by
            # no more than s (Gaussian Poincare: Var max <= max Var) nor than the max of C values drawn afresh for
            # each row does (the constants' own spread adds to that): the sample of fresh draws narrowed to s
            # about its median (fused_s3131_01370: conv3d 1x1 -> pool -> softmax over channels -> bias -> amax)
            mid, sd = v[K // 2], Sample(v).sd
            if sd > x.chan[2]:
                v = tuple(mid + (u - mid) * x.chan[2] / sd for u in v)
        return Sample(v)
    rows, extra = _rows(x, step, draws, diag)
    if op in ("softmax", "log_softmax"):
        out, on_diag, own, done = [], [], 1 if diag else 0, []
        for row in rows:
            lse = _lse(row, extra)
            row = [math.exp(r - lse) if op == "softmax" else r - lse for r in row]
            on_diag.extend(row[:own])        # a gram's diagonal stays apart (row[0]: every row holds one)
            out.extend(row[own:])
            done.append(row)
        return Sample(quantiles(out), quantiles(on_diag) if diag else None,
                      row_mean=(step_dim(step), 1.0 / C) if op == "softmax" else None,
                      log_rows=step_dim(step) if op == "log_softmax" else None,
                      chan=_columns(done, x, step) if not diag else None)
    if op == "logsumexp":
        return Sample(quantiles([_lse(row, extra) for row in rows]))
    stat = {"sum": lambda r: math.fsum(r) * C / len(r), "mean": lambda r: math.fsum(r) / len(r),
            "amax": max, "amin": min}[op]
    return Sample(quantiles([stat(row) for row in rows]))


def _columns(rows: list, x: Sample, step: dict) -> tuple | None:
    """A softmax along a contraction's channels (Sample.chan, its noise Gaussian) whose rows share the channels'
    constants: each channel's own value in every row (its mean over the simulated rows) and what the noise moves
    it by (the rms over the channels of its sd across rows); the noise stays Gaussian where it is small against
    the softmax's unit of curvature (the map is near linear over it)."""
    if not (_along_chan(x, step) and x.chan[3]) or len(rows) < 2:
        return None
    cols = list(zip(*rows))
    means = [math.fsum(c) / len(c) for c in cols]
    var = math.fsum(math.fsum((u - m) ** 2 for u in c) / len(c) for c, m in zip(cols, means)) / len(cols)
    return x.chan[0], quantiles(means), math.sqrt(var), x.chan[2] <= SMALL_NOISE


def standardize(x: Sample, eps: float, centre: bool) -> tuple:
    m = x.mean if centre else 0.0
    scale = 1.0 / math.sqrt((x.sd ** 2 if centre else x.energy) + eps)
    return tuple((v - m) * scale for v in x.v)
