"""The PyTorch side of a multi-tensor entry (adamw_cuda's `adamw_step`): arguments that are
arrays of device pointers in host memory, one pointer per tensor, with the tensors' sizes in an
int64 array of the same host memory and their count a scalar.

The reference holds the T tensors as ragged sections of flat [N] buffers (torch.tensor_split(x, T)).
The kernel's contract is an optimizer's: every tensor its own allocation (the caching allocator's
alignment makes its vector loads safe), so a caller copies each section into a tensor of its own,
passes the lists, and copies the updated tensors back into the flat buffers (the op updates them
in place). The binding takes one `std::vector<torch::Tensor>` per pointer array, checks them,
builds the pointer and size arrays in host memory and calls the candidate through its trampoline.
"""
from __future__ import annotations

from ..ops.contract import ATEN, TORCH_SCALAR


def pointer_arrays(entry) -> list:
    """The entry's tensor arguments passed as arrays of pointers ("float* const*"), in order."""
    return [a for a in entry.tensors if a.ctype and a.ctype.count("*") > 1]


def _count(entry):
    """(the scalar giving the number of tensors, the dim it names)."""
    s = next(s for s in entry.scalars if s.value is not None and s.value.isidentifier())
    return s, s.value


def _sizes_arg(entry):
    """The int64 argument holding each tensor's size: one value per tensor."""
    _, dim = _count(entry)
    return next(a for a in entry.tensors if a not in pointer_arrays(entry) and tuple(a.dims) == (dim,))


def binding_params(entry, task) -> list:
    """[(name, 'tensors' | 'scalar')]: what the binding's function takes, in order."""
    count, _ = _count(entry)
    scalars = [(s.name, "scalar") for s in entry.scalars if s is not count and not s.is_dim(task)]
    return [(a.name, "tensors") for a in pointer_arrays(entry)] + scalars


def list_binding(entry, task, fn: str = "forward") -> str:
    """C++ source of the binding: one list of tensors per pointer array, updated in place."""
    count, dim = _count(entry)
    arrays, sizes = pointer_arrays(entry), _sizes_arg(entry)
    first = arrays[0].name
    params = [f"std::vector<torch::Tensor> {a.name}" for a in arrays]
    params += [f"{TORCH_SCALAR.get(s.ctype, 'int64_t')} {s.name}" for s in entry.scalars
               if s is not count and not s.is_dim(task)]
    lines = [f"    const int64_t {dim} = (int64_t){first}.size();",
             f"    std::vector<int64_t> {sizes.name};",
             f"    for (const auto& t : {first}) {sizes.name}.push_back(t.numel());"]
    for a in arrays:
        if a.name != first:
            lines.append(f'    TORCH_CHECK((int64_t){a.name}.size() == {dim}, "{a.name}: one tensor per {first} tensor");')
        lines += [f"    const auto {a.name}_ptrs = ks_pointers({a.name}, {ATEN[a.dtype_of(task)]}, {sizes.name}, "
                  f'"{a.name}");']
    lines.append(f"    const int64_t {count.name} = {dim};")
    decl, call = [], []
    for kind, ctype, name in entry.ctypes_params(task):
        decl.append("void*" if kind in ("ptr", "stream") else ctype)
        call.append(f"(void*){name}_ptrs.data()" if kind == "ptr" and name != sizes.name else
                    f"(void*){name}.data()" if kind == "ptr" else
                    "(void*)c10::cuda::getCurrentCUDAStream().stream()" if kind == "stream" else f"({ctype}){name}")
    body = "\n".join(lines)
    return f"""// ---- PyTorch binding of {entry.name}: a list of tensors per pointer array, calling the candidate ----
// ---- through its C trampoline; the tensors are updated in place                                  ----
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <vector>

extern "C" int ks_entry({", ".join(decl)});
extern "C" const char* ks_error_name(int e);

// The device pointers of a list of tensors, in host memory, once each tensor is checked.
static std::vector<void*> ks_pointers(const std::vector<torch::Tensor>& ts, at::ScalarType dtype,
                                      const std::vector<int64_t>& numels, const char* name) {{
    std::vector<void*> ptrs;
    for (size_t i = 0; i < ts.size(); ++i) {{
        TORCH_CHECK(ts[i].is_cuda() && ts[i].is_contiguous(), name, ": tensor ", i, " must be a contiguous CUDA tensor");
        TORCH_CHECK(ts[i].scalar_type() == dtype, name, ": tensor ", i, " has the wrong dtype");
        TORCH_CHECK(ts[i].numel() == numels[i], name, ": tensor ", i, " must have ", numels[i], " elements");
        ptrs.push_back(ts[i].data_ptr());
    }}
    return ptrs;
}}

void {fn}({", ".join(params)}) {{
{body}
    const int err = ks_entry({", ".join(call)});
    TORCH_CHECK(err == 0, "{entry.name}: launch error ", ks_error_name(err));
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
    m.def("{fn}", &{fn}, "{entry.name}");
    m.def("set_poison", [](bool) {{}}, "no-op: the binding allocates no output (the lists are updated in place)");
}}
"""


def list_forward(entry, task, value, target: str) -> list:
    """ModelNew.forward's lines: each flat input copied into tensors of their own (sections as
    the reference splits them), the kernel called on the lists, the updated tensors copied back
    into the flat buffers, which are returned (the op's in-place results)."""
    _, dim = _count(entry)
    arrays = [a.name for a in pointer_arrays(entry)]
    lists = ", ".join(f"{n}_list" for n in arrays)
    lines = [f"{lists} = ([t.clone() for t in x.tensor_split({task.dims[dim]})] for x in ({', '.join(arrays)}))"
             f"   # {dim} tensors, one allocation each"]
    args = [f"{n}_list" for n in arrays] + [value(entry.arg(n)) for n, kind in binding_params(entry, task)
                                             if kind == "scalar"]
    lines.append(f"{target}forward({', '.join(args)})")
    updated = [a.name for a in entry.tensors if a.name in arrays and a.role == "inout"]
    lines += [f"torch.cat({n}_list, out={n})" for n in updated]
    results = entry.results
    lines.append(f"return {results[0]}" if len(results) == 1 else f"return ({', '.join(results)})")
    return lines
