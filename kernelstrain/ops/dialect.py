"""The C++ dialects a CUDA-language candidate is written in, as data: one record of CUDA's
spellings, HIP as a copy with overrides (cf. tinygrad's renderer/cstyle.py), and the prelude
that emits a dialect's headers, runtime aliases and helpers once.

Templates take named fields: shuffles `{v}` (value) and `{o}` (lane offset / source lane),
ballot `{p}` (predicate), lanes_below `{lane}`.

>>> CUDA.shfl_xor.format(v="x", o=16), HIP.shfl_xor.format(v="x", o=16)
('__shfl_xor_sync(0xffffffffu, x, 16)', '__shfl_xor(x, 16)')
>>> from kernelstrain.gpus import GPUS
>>> dialect_of(GPUS["MI300X"]).name, dialect_of(GPUS["H100"]).name
('hip', 'cuda')
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

# CUDA runtime names a host wrapper uses; HIP spells each hip<Name>
_RUNTIME_NAMES = ("Stream_t", "MemsetAsync", "MemcpyAsync", "MallocAsync", "FreeAsync", "GetDevice",
                  "DeviceGetAttribute", "LaunchCooperativeKernel", "OccupancyMaxActiveBlocksPerMultiprocessor",
                  "FuncAttributeMaxDynamicSharedMemorySize", "Error_t", "Success", "GetLastError")


@dataclass(frozen=True)
class Dialect:
    name: str
    headers: tuple                       # always included
    fp8_header: str                      # included for fp8 tasks ("" when the headers have it)
    runtime_aliases: tuple               # lines mapping the CUDA runtime names a host wrapper uses
    ctype: dict                          # dtype -> storage type
    shfl_xor: str
    shfl_up: str
    shfl: str                            # read lane {o}'s {v}
    ballot: str
    popc: str                            # popcount of a ballot
    lanes_below: str                     # mask of the lanes below {lane}
    lane_mask_t: str                     # type of a ballot
    grid_constant: str                   # qualifier of a by-value kernel parameter read by every thread
    fp8_max: str                         # largest finite e4m3 value, as a C float literal
    fp8_bias: int                        # e4m3 exponent bias
    fp8_torch: str                       # torch dtype of the fp8 storage
    fp8_triton: str                      # Triton element type of fp8
    fp8_triton_ptr: str                  # Triton pointer signature of fp8
    cub_header: str                      # device-wide sort/scan library
    coop_groups_header: str
    runtime_prefix: str = ""             # "hip": aliases() maps cudaX to hipX; "": the names are native
    # capabilities an algorithm may branch on (these are the allowed "HIP branches")
    match_any: bool = True               # __match_any_sync exists (AMD: peel one key per round instead)
    atomic_16bit: bool = True            # atomicAdd on half / bfloat16 (HIP: CAS on the 32-bit word)
    extra: dict = field(default_factory=dict)   # spellings added later, by name (append only)
    # two 16-bit values in one 32-bit register: dtype -> (type, to float2, from float2)
    pair: dict = field(default_factory=lambda: {"fp16": ("__half2", "__half22float2", "__float22half2_rn"),
                                                "bf16": ("__nv_bfloat162", "__bfloat1622float2",
                                                         "__float22bfloat162_rn")})
    stream_store_uint4: str = "__stcs(&{dst}, {v})"   # evict-first (non-temporal) store of a uint4 {v} to {dst}
    clz: str = "__clz"                   # count of leading zeros of a lane_mask_t ballot
    fp8_neg_zero: bool = True            # e4m3 has -0 (0x80); e4m3fnuz has none: 0x80 is its NaN
    radix_sort_pairs: str = "cub::DeviceRadixSort::SortPairs"   # cub_header's key-value radix sort (same arguments)
    # one Pack union (16-bit values over a uint4) assigned whole, {dst} = {src}: HIP's bf16 type has a user-provided
    # copy assignment, which deletes the union's, so there the word is copied (clang-19: "copy assignment operator
    # is implicitly deleted"); nvcc's own union copy is kept (it is the code the H100 ran)
    pack_copy: str = "{dst} = {src}"

    def aliases(self, *names: str) -> str:
        """#define lines mapping further CUDA runtime names (without the cuda prefix) to this
        dialect's, for the renders that use them; empty in CUDA.

        >>> HIP.aliases("StreamSynchronize"), CUDA.aliases("StreamSynchronize")
        ('#define cudaStreamSynchronize hipStreamSynchronize\\n', '')
        """
        if not self.runtime_prefix:
            return ""
        return "".join(f"#define cuda{n} {self.runtime_prefix}{n}\n" for n in names)


def warp_intrinsics(suffix: str, mask: str) -> dict:
    """The shuffles and ballot of a dialect that spells them `__<name><suffix>(<mask>...)`."""
    shuffles = {f: f"__{f}{suffix}({mask}{{v}}, {{o}})" for f in ("shfl_xor", "shfl_up", "shfl")}
    return {**shuffles, "ballot": f"__ballot{suffix}({mask}{{p}})"}


CUDA = Dialect(
    name="cuda",
    headers=("#include <cuda_runtime.h>", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>"),
    fp8_header="#include <cuda_fp8.h>",
    runtime_aliases=(),
    ctype={"fp32": "float", "fp16": "half", "bf16": "__nv_bfloat16", "fp8": "__nv_fp8_e4m3", "int8": "int8_t"},
    **warp_intrinsics("_sync", "0xffffffffu, "),
    popc="__popc",
    lanes_below="((1u << {lane}) - 1u)",
    lane_mask_t="unsigned",
    grid_constant="const __grid_constant__ ",
    fp8_max="448.f", fp8_bias=7, fp8_torch="torch.float8_e4m3fn",
    fp8_triton="tl.float8e4nv", fp8_triton_ptr="*fp8e4nv",
    cub_header="#include <cub/cub.cuh>",
    coop_groups_header="#include <cooperative_groups.h>",
)

HIP = replace(
    CUDA,
    name="hip",
    headers=("#include <hip/hip_runtime.h>", "#include <hip/hip_fp16.h>", "#include <hip/hip_bf16.h>"),
    fp8_header="",
    runtime_aliases=("// CUDA runtime names of the host wrapper, mapped to HIP",
                     *(f"#define cuda{n} hip{n}" for n in _RUNTIME_NAMES),
                     "#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount",
                     # HIP takes the kernel as const void*, CUDA's C++ API as the function itself
                     "#define cudaFuncSetAttribute(f, attr, v) hipFuncSetAttribute((const void*)(f), attr, v)"),
    ctype={**CUDA.ctype, "bf16": "__hip_bfloat16", "fp8": "__hip_fp8_e4m3_fnuz"},   # MI300X: the fnuz fp8
    **warp_intrinsics("", ""),    # no mask: every HIP warp intrinsic is wavefront-wide
    popc="__popcll",
    lanes_below="((1ull << {lane}) - 1ull)",
    lane_mask_t="unsigned long long",
    grid_constant="const ",
    fp8_max="240.f", fp8_bias=8, fp8_torch="torch.float8_e4m3fnuz",
    fp8_triton="tl.float8e4b8", fp8_triton_ptr="*fp8e4b8",
    cub_header="#include <rocprim/rocprim.hpp>",
    coop_groups_header="#include <hip/hip_cooperative_groups.h>",
    runtime_prefix="hip", match_any=False, atomic_16bit=False,
    pair={**CUDA.pair, "bf16": ("__hip_bfloat162", "__bfloat1622float2", "__float22bfloat162_rn")},
    stream_store_uint4=("{{ unsigned* d = reinterpret_cast<unsigned*>(&{dst}); __builtin_nontemporal_store({v}.x, d); "
                        "__builtin_nontemporal_store({v}.y, d + 1); __builtin_nontemporal_store({v}.z, d + 2); "
                        "__builtin_nontemporal_store({v}.w, d + 3); }}"),
    clz="__clzll", fp8_neg_zero=False,
    radix_sort_pairs="rocprim::radix_sort_pairs",
    pack_copy="{dst}.u = {src}.u",
)

DIALECTS = {"nvidia": CUDA, "amd": HIP}


def dialect_of(gpu) -> Dialect:
    """The dialect a CUDA-language candidate for this GPU is written in."""
    return DIALECTS[gpu.vendor]


def prelude(task, extra_includes: tuple = ()) -> str:
    """Headers, runtime aliases, the scalar type and warp-reduction helpers, once per render.

    The helpers are the same names in every dialect so a kernel body reads the same:
    `scalar_t`, `to_float()`, `from_float()`, `warp_sum()`, `warp_max()`, `WARP_SIZE`.
    """
    d = dialect_of(task.gpu)
    head = [*d.headers, *d.runtime_aliases]
    if task.dtype == "fp8" and d.fp8_header:
        head.insert(len(d.headers), d.fp8_header)
    head += ["#include <stdint.h>", *extra_includes]
    shfl = d.shfl_xor.format(v="v", o="o")
    return "\n".join(head) + f"""

#define WARP_SIZE {task.gpu.warp}
typedef {d.ctype.get(task.dtype, "float")} scalar_t;

__device__ __forceinline__ float to_float(scalar_t v) {{ return static_cast<float>(v); }}
__device__ __forceinline__ scalar_t from_float(float v) {{ return static_cast<scalar_t>(v); }}

__device__ __forceinline__ float warp_sum(float v) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += {shfl};
    return v;
}}

__device__ __forceinline__ float warp_max(float v) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v = fmaxf(v, {shfl});
    return v;
}}
"""


def shfl_xor_macro(task) -> str:
    """`#define SHFL_XOR(v, o) ...` in the task's dialect, for bodies that shuffle other types."""
    return f"#define SHFL_XOR(v, o) {dialect_of(task.gpu).shfl_xor.format(v='v', o='o')}\n"
