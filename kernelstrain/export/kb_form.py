"""The KernelBench form of a single-op task, as KernelBench's own harness runs it
(`eval_kernel_against_ref`): a problem it can score as it stands and a solution it can load.

What the harness does, and what each side of the form answers it with:
- it casts every input tensor (integer ones too) and the model to the problem's precision
  (fp32 / fp16 / bf16), then compares ONE output tensor with torch.allclose. So the problem's
  `Model` wraps the op's reference program (renamed `Reference`, unchanged otherwise):
  * an fp32 side tensor the reference's inputs compute (from the other inputs: an attention or
    cross-entropy lse, LayerNorm's mean / rstd; or tables: rope's cos / sin) is not passed: both forwards derive it in fp32
    from the inputs they get (DERIVED), so it stays consistent with them (cast to bf16 it would
    not, and a reference that recomputes it would see other values than the kernel); so is a
    forward output a backward takes (flash_attn_bwd's o, at the problem's dtype): the harness draws
    get_inputs() on the CPU, whose bf16 attention rounds otherwise than the device's (40% of o's
    elements off the correctly rounded value, 2.2 ulp on average), while the reference's backward
    uses its own forward's O on the device, so rowsum(dO * O) would differ between the two by up
    to 0.03 and a correct kernel's dq / dk by up to 0.98 of KernelBench's bf16 tolerance in a
    head (an H100 saw 1 element of 100.7M outside); derived on the device, o is that forward's O;
  * any other input the kernel takes in another floating type (fp32 side tensors such as a
    scale or an upstream gradient, fp8 operands), or as small integer codes every precision
    holds exactly (int8, uint8, bool), is passed at the precision and converted back inside
    forward, in both Model and ModelNew, so both see the same values;
  * a wider integer input (ids, labels, slot maps, block tables) would lose its values in the
    cast: it is drawn once at construction, from the reference's own inputs, and kept as an
    integer buffer (`fixed_<name>`; `Module.to(dtype)` leaves integer buffers alone);
  * an input the op updates in place is cloned first (the harness passes the same tensors to
    Model and ModelNew, one after the other);
  * several outputs are packed into one float32 tensor, each flattened, in the reference's
    return order: the kernel computes them in one launch, so one problem per output would time
    the whole kernel against a part of the reference.
- it `exec`s a CUDA solution's source (no `__file__`) and imports a Triton one from a
  temporary file; its static checker (`validate_kernel_static`) strips `#` and `//` comments line
  by line and refuses `pass`, try/except, threads, tensor subclasses and timing patches, and
  wants a visible `__global__` and `load_inline` (CUDA) or `@triton.jit` and `tl.*` (Triton). So
  a solution is one file: the problem's definitions it needs, the CUDA sources as multi-line
  strings compiled with `load_inline` when the file is loaded (or the Triton kernel itself), and
  `ModelNew(Reference)` with its own `__init__` and `forward`.
- placement is the harness's: no input is created on a device.
- it draws the inputs on the CPU (`get_inputs()` after its seed), and torch's CPU `randn` at a
  16-bit dtype (through 2.11 at least: pytorch/pytorch#166853) runs Box-Muller in that dtype on
  256-level (bf16) uniforms, so every draw lies within +-3.33 sigma and a row's largest value
  recurs in every slice of it: a kernel that merges per-slice maxima wrongly (a split-V combine
  without its rescale, an online softmax that drops a warp's partial) then matches the reference
  on the harness's own inputs (the H100 runs of seed 7373). So a problem draws its normal inputs
  in fp32 and rounds them to its dtype (`torch.randn(...).to(DTYPE)`), as a GPU draw (and torch's
  own CPU draw from 2.13) does, and as KernelBench's problems leave the cast to the harness; a
  `torch.randn_like(x)` of a 16-bit x likewise draws in fp32 and rounds to x's dtype.
"""
from __future__ import annotations

import ast
import re

from ..ops.contract import TORCH
from ..workdir.lists import pointer_arrays
from ..workdir.render import CUDA_FLAGS, POISONED_TORCH, arch_flag, binding_sources, forward_call

PRECISIONS = ("fp32", "fp16", "bf16")          # the precisions KernelBench's harness casts to
FLOATING = ("fp32", "fp16", "bf16", "fp8")
EXACT_CODES = ("int8", "uint8", "bool")        # |v| <= 256: exact at every precision, bf16 included
_FORM_NOTE = "# ---- KernelBench form: the reference program above, wrapped for the harness ----"

# op -> {fp32 side input: how the reference's inputs derive it (from the other inputs, or tables
# of the task), in the reference program's names}; tests/test_kernelbench_contract.py checks each
# against the reference's own inputs and that no derived fp32 input is missing here
DERIVED = {
    "flash_attn_bwd": {"o": "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
                       "lse": "(q.float() @ k.float().transpose(-1, -2) * D ** -0.5).masked_fill(\n"
                              "    torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float('-inf')).logsumexp(-1)"},
    "cross_entropy_bwd": {"lse": "torch.logsumexp(logits.float(), dim=-1)"},
    "layernorm_bwd": {"mean": "x.float().mean(-1)", "rstd": "torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)"},
    "fused_qkv_rope": {"cos": "rope_tables()[0].to(x.device)", "sin": "rope_tables()[1].to(x.device)"},
}


def precision(subject) -> str:
    """The precision the harness runs the problem at: fp32 for an optimizer step (every result
    fp32 state updated in place, whatever the grads' dtype), else the task's dtype, or (fp8 /
    int8 operand tasks) the dtype of the op's first floating output."""
    e = subject.module.entry
    if e.results and all(e.arg(n).role == "inout" and e.arg(n).dtype_of(subject.task) == "fp32" for n in e.results):
        return "fp32"
    if subject.dtype in PRECISIONS:
        return subject.dtype
    outs = [dt for _, _, dt in e.outputs(subject.task) if dt in PRECISIONS]
    return outs[0] if outs else "bf16"


def input_plan(subject) -> list:
    """[(name, how, torch dtype, cloned)] for each reference input, in order: how is 'pass'
    (at the precision), 'convert' (passed at the precision, converted back to its own dtype),
    'derive' (not passed: derived in fp32 from the passed inputs, DERIVED) or 'fixed' (an
    integer buffer drawn at construction)."""
    m, prec = subject.module, precision(subject)
    names = {a.name: a for a in m.entry.tensors}
    derived = DERIVED.get(m.op, {})
    plan = []
    for name in m.inputs:
        a = names.get(name)
        dt = a.dtype_of(subject.task) if a else prec
        how = ("derive" if name in derived else "pass" if dt == prec
               else "convert" if dt in FLOATING + EXACT_CODES else "fixed")
        plan.append((name, how, TORCH.get(dt), bool(a) and a.role == "inout"))
    return plan


# torch.randn(<sizes>, dtype=<16-bit dtype name>): the sizes may hold one level of parentheses
_LOW_PRECISION_RANDN = re.compile(r"torch\.randn\(((?:[^()]|\([^()]*\))*?),\s*dtype=(DTYPE|dtype)\)")
_RANDN_LIKE = re.compile(r"torch\.randn_like\((\w+)\)")     # torch.randn_like(x): at x's dtype, maybe 16-bit


def full_precision_draws(program: str) -> str:
    """`program` with each normal draw at the problem's dtype (or a randn_like at its tensor's)
    made in fp32 and rounded to it (the module docstring says why; an fp32 problem draws the same
    values as before)."""
    program = _LOW_PRECISION_RANDN.sub(r"torch.randn(\1).to(\2)", program)
    return _RANDN_LIKE.sub(r"torch.randn_like(\1, dtype=torch.float32).to(\1.dtype)", program)


def reference_program(reference: str) -> str:
    """The op's reference program as the export carries it: `Model` renamed `Reference`, its
    input functions `reference_inputs` / `reference_init_inputs`, no empty-constructor `pass`
    (the static checker refuses the word), no `device='cuda'` or `.cuda()` (placement is the
    harness's) and its normal draws made in fp32 (full_precision_draws)."""
    text = reference.replace("        super().__init__()\n        pass\n", "        super().__init__()\n")
    text = re.sub(r",\s*device=(['\"])cuda\1", "", text).replace(".cuda()", "")
    text = full_precision_draws(text)
    text = text.replace("class Model(nn.Module):", "class Reference(nn.Module):", 1)
    text = text.replace("def get_inputs():", "def reference_inputs():", 1)
    return text.replace("def get_init_inputs():", "def reference_init_inputs():", 1)


def _notes(subject, plan) -> list:
    """The docstring lines of the problem's Model: what the form changes, input by input."""
    notes = []
    for name, how, dt, cloned in plan:
        if how == "convert":
            notes.append(f"{name} is passed at the problem's precision and used as {dt}.")
        elif how == "fixed":
            notes.append(f"{name} ({dt}) is drawn once at construction and kept as the integer buffer fixed_{name}.")
        elif how == "derive" and dt == TORCH[precision(subject)]:
            notes.append(f"{name} ({dt}) is not an input: forward computes it as the reference's inputs do, from the "
                         "inputs it gets, on their device (drawn with get_inputs() on the CPU, it would come from "
                         "another kernel than the reference's own forward there, rounded otherwise).")
        elif how == "derive":
            notes.append(f"{name} ({dt}) is not an input: forward computes it in fp32 as the reference's inputs do, "
                         "from the inputs it gets (passed, the harness would cast it to the precision).")
        if cloned:
            notes.append(f"{name} is updated in place by the op: forward works on a copy.")
    if subject.module.impl == "cuda" and pointer_arrays(subject.module.entry):
        arrays = ", ".join(a.name for a in pointer_arrays(subject.module.entry))
        notes.append(f"ModelNew copies {arrays} into tensors of their own (the kernel's contract: one allocation "
                     "a tensor, as an optimizer holds them), the sections the reference splits, and the updates back.")
    if len(subject.module.entry.results) > 1:
        names = ", ".join(subject.module.entry.results)
        notes.append(f"The outputs ({names}) come packed in one float32 tensor, each flattened, in that order.")
    return notes


def _shared(subject, plan) -> str:
    """The definitions the problem and its solutions share (a solution carries them itself)."""
    fixed = [(name, i) for i, (name, how, _, _) in enumerate(plan) if how == "fixed"]
    passed = [i for i, (_, how, _, _) in enumerate(plan) if how in ("pass", "convert")]
    return f'''{reference_program(subject.reference).rstrip()}


{_FORM_NOTE}
FIXED_INPUTS = {tuple(fixed)!r}   # (name, position in reference_inputs()): integer buffers
PASSED_INPUTS = {tuple(passed)!r}   # positions of the inputs the harness passes


def register_fixed_inputs(model):
    """Keep the integer inputs the harness's cast would spoil as buffers, drawn once."""
    if FIXED_INPUTS:
        inputs = reference_inputs()
        for name, i in FIXED_INPUTS:
            model.register_buffer("fixed_" + name, inputs[i])


def pack_outputs(out):
    """One tensor for the harness's comparison: a single output as it is; several flattened to
    float32 and concatenated in the reference's return order."""
    if isinstance(out, torch.Tensor):
        return out
    return torch.cat([t.reshape(-1).float() for t in out])
'''


def _prologue(plan, op: str) -> tuple[list, list]:
    """(forward's parameters, the lines that give every reference input its form; the derived
    ones last, from the others' final values)."""
    params, lines, derived = [], [], []
    for name, how, dt, cloned in plan:
        if how == "fixed":
            lines.append(f"{name} = self.fixed_{name}" + (".clone()" if cloned else ""))
            continue
        if how == "derive":
            expr = DERIVED[op][name].replace("\n", "\n" + " " * len(f"{name} = "))
            derived.extend(f"{name} = {expr}".split("\n"))
            continue
        params.append(name)
        if how == "convert":
            lines.append(f"{name} = {name}.to({dt})" + (".clone()" if cloned else ""))
        elif cloned:
            lines.append(f"{name} = {name}.clone()")
    return params, lines + derived


def _method(head: str, doc: str, lines: list) -> str:
    return f"    {head}:\n        \"\"\"{doc}\"\"\"\n" + "".join(f"        {line}\n" for line in lines)


def _model_class(name: str, doc: str, params: list, forward_doc: str, forward: list) -> str:
    """Model or ModelNew: a Reference with the same constructor (the reference's parameters,
    then the fixed inputs, so both draw the same values after one seed) and its own forward."""
    return (f"class {name}(Reference):\n    \"\"\"{doc}\"\"\"\n\n"
            + _method("def __init__(self, *init_inputs)", "The reference's parameters, then the fixed inputs.",
                      ["super().__init__(*init_inputs)", "register_fixed_inputs(self)"]) + "\n"
            + _method(f"def forward(self, {', '.join(params)})", forward_doc, forward))


def _reference_call(subject, names) -> list:
    """The lines that call the reference's forward; one that differentiates (a backward op)
    does so with autograd on: the harness runs every forward under torch.no_grad()."""
    call = f"return pack_outputs(super().forward({', '.join(names)}))"
    return ["with torch.enable_grad():", "    " + call] if ".backward(" in subject.reference else [call]


def problem_source(subject) -> str:
    """The KernelBench problem file of a single-op task."""
    plan = input_plan(subject)
    params, lines = _prologue(plan, subject.module.op)
    names = [name for name, *_ in plan]
    doc = f"{subject.title} ({subject.dtype}), as KernelBench's harness runs it at {precision(subject)}."
    notes = _notes(subject, plan)
    doc += ("\n\n    " + "\n    ".join(notes) + "\n    ") if notes else ""
    cls = _model_class("Model", doc, params, "The reference's forward, one output tensor.",
                       lines + _reference_call(subject, names))
    return (_shared(subject, plan) + "\n\n" + cls + "\n\ndef get_inputs():\n    inputs = reference_inputs()\n"
            "    return [inputs[i] for i in PASSED_INPUTS]\n\n\n"
            "def get_init_inputs():\n    return reference_init_inputs()\n")


def source_literal(text: str) -> str:
    """`text` as a readable multi-line Python string literal (raw, triple-quoted), or its repr
    where no raw literal can hold it."""
    for quote in ("'''", '"""'):
        lit = f"r{quote}\n{text}{quote}"
        if quote not in text and not text.endswith("\\"):
            try:
                if ast.literal_eval(lit) == "\n" + text:
                    return lit
            except (SyntaxError, ValueError):
                continue
    return repr("\n" + text)


_CUDA_LOAD = '''

def _load_extension():
    """Compile the binding and the candidate (with its C trampoline) into one extension (the
    binding at the host compiler's default level, as KernelBench's examples build theirs)."""
    options = inspect.signature(load_inline).parameters
    extra = {"no_implicit_headers": True} if "no_implicit_headers" in options else {}
    name = "ks_" + hashlib.sha1((BINDING + KERNEL + TRAMPOLINE + " ".join(CUDA_FLAGS)).encode()).hexdigest()[:16]
    return load_inline(name, cpp_sources=[BINDING], cuda_sources=[KERNEL + "\\n" + TRAMPOLINE],
                       extra_cuda_cflags=list(CUDA_FLAGS), **extra)


kernel_extension = _load_extension()


def set_poison(on):
    """While on, every output the binding allocates starts as NaN / 0xFF bytes."""
    kernel_extension.set_poison(bool(on))
'''

_TRITON_POISON = '''

_TORCH = torch


''' + POISONED_TORCH + '''

def set_poison(on):
    """While on, the wrapper's torch.empty / empty_like outputs start as NaN / 0xFF bytes."""
    globals()["torch"] = _PoisonedTorch(_TORCH) if on else _TORCH
'''


def solution_source(subject) -> str:
    """The KernelBench solution file (class ModelNew) of a single-op subject's candidate."""
    plan = input_plan(subject)
    params, lines = _prologue(plan, subject.module.op)
    cuda = subject.module.impl == "cuda"
    call = forward_call(subject, "kernel_extension." if cuda else "")[1]
    call[-1] = re.sub(r"^return (.*)$", r"return pack_outputs(\1)", call[-1])
    how = ("the CUDA candidate, compiled with load_inline through the binding generated from the op's entry"
           if cuda else "the Triton candidate's wrapper")
    head = (f'"""ModelNew for {subject.title} ({subject.dtype}): forward through {how} '
            f'({subject.candidate.label})."""\n' + ("import hashlib\nimport inspect\n\n" if cuda else "")
            + "import torch\nimport torch.nn as nn\n")
    if cuda:
        head += "from torch.utils.cpp_extension import load_inline\n"
        binding, tramp = binding_sources(subject)
        kernel = (f"CUDA_FLAGS = {CUDA_FLAGS + (arch_flag(subject),)!r}\nBINDING = {source_literal(binding)}\n"
                  f"KERNEL = {source_literal(subject.candidate.code)}\nTRAMPOLINE = {source_literal(tramp)}\n"
                  + _CUDA_LOAD)
    else:
        kernel = ("# ---- the candidate kernel ----\n" + subject.candidate.code.rstrip()
                  + "\n# ---- end of the candidate kernel ----\n" + _TRITON_POISON)
    cls = _model_class("ModelNew", "The reference's parameters; forward through the custom kernel.", params,
                       "The custom kernel, one output tensor.", lines + call)
    shared = _shared(subject, plan).removeprefix("import torch\nimport torch.nn as nn\n")
    return head + shared + "\n\n" + kernel + "\n\n" + cls
