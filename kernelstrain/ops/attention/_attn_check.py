"""gpu_check adapters of the attention entries (not an op module itself): their softmax scale,
D^-0.5, is an argument that the reference Model holds no attribute for, so the generic adapters
of kernelstrain/gpucheck/adapters.py cannot fill it in. Also the half_accumulator edit the one-key-
per-trip decode rungs share (flash_decode_triton, paged_decode_triton).
"""

# half_accumulator: running sums kept in the storage type, one key per trip: small p vanish into l
# (H200, fp16: rel. l2 error 2.4e-2 / 3.9e-2 against the 5e-3 attention bound)
HALF = {"acc_t": "o_ptr.dtype.element_ty", "l0": "tl.zeros([1], dtype=o_ptr.dtype.element_ty)",
        "rnd": ".to(o_ptr.dtype.element_ty)"}


def _scalar(s, d):
    if s.name == "scale":
        return d["D"] ** -0.5
    if s.name in d:
        return d[s.name]
    return eval(s.value, {"__builtins__": {}}, dict(d))   # noqa: S307 - the spec's own expression


def cuda_check(entry, inputs):
    """CUDA adapter: the reference inputs by name, dims, the scale, a poisoned buffer per output."""
    def adapter(d, model, x, ref, out_like):
        args, outs = [], []
        for a in entry.args:
            if not hasattr(a, "role"):
                args.append(_scalar(a, d))
            elif a.role == "out":
                args.append(out_like(ref))
                outs.append((a.name, args[-1], ref))
            else:
                args.append(x[inputs.index(a.name)])
        return args, outs
    return adapter


def triton_check(d, model, x):
    """Triton adapter: wrapper(*inputs, scale) returning the output."""
    return [*x, d["D"] ** -0.5], lambda ret, ref: [("o", ret, ref)]
