"""Write kernelstrain/corpus/hip_names.txt: the names the headers of a HIP candidate declare
at global scope, as clang with the HIP headers parses them for gfx942 (compilers.compile_hip's
setup; its AST: declarations of the translation unit, through extern "C"/"C++" blocks and
unscoped enums, and the using-declarations that bring std's functions in), plus C++'s keywords:
the names clang's typo correction may offer for an undeclared identifier in a kernel ("did you
mean 'pow'?"; it offers only names that unqualified lookup finds). mutations.find_typo keeps a
HIP rename only where no such name is within clang's correction distance, so the recorded text
has no header-dependent part.

    python scripts/hip_header_names.py [--out FILE]
"""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import corpus  # noqa: E402
from kernelstrain.compilers import HIP_SHIM, find_hip_compiler  # noqa: E402

# every header a rendered HIP candidate includes (ops renders for MI300X)
HEADERS = ("hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_bf16.h", "stdint.h", "math.h", "rocprim/rocprim.hpp",
           "hip/hip_cooperative_groups.h")
KEYWORDS = ("alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast "
            "continue decltype default delete do double dynamic_cast else enum explicit export extern false float "
            "for friend goto if inline int long mutable namespace new noexcept nullptr operator private protected "
            "public register reinterpret_cast return short signed sizeof static static_assert static_cast struct "
            "switch template this thread_local throw true try typedef typeid typename union unsigned using virtual "
            "void volatile wchar_t while").split()


def names(clang: str) -> set:
    with tempfile.TemporaryDirectory() as tmp:
        inc = Path(tmp) / "include"
        if not Path("/usr/include/hip/hip_bf16.h").exists() and "/opt/rocm" not in clang:
            (inc / "hip").mkdir(parents=True)
            (inc / "hip" / "hip_bf16.h").write_text(HIP_SHIM)
        src = Path(tmp) / "names.hip"
        src.write_text("".join(f"#include <{h}>\n" for h in HEADERS))
        dump = subprocess.run([clang, "-x", "hip", "--offload-arch=gfx942", "--cuda-device-only", "-nogpulib",
                               "-fsyntax-only", "-std=c++17", f"-I{inc}", "-Xclang", "-ast-dump", "-fno-color-diagnostics",
                               str(src)], capture_output=True, text=True, check=True).stdout
    return global_names(dump.splitlines()) | set(KEYWORDS)


_NODE = re.compile(r"^((?:[| ] )*)[|`]-(\w+) (.*)$")
_TRANSPARENT = {"LinkageSpecDecl", "EnumDecl"}        # their names are the enclosing scope's (unscoped enums)
# after the node's address and source range: its location (col:N, line:N:M, FILE:N:M,
# <scratch space>:N:M), flags, then the declared name
_NAMED = re.compile(r"^0x[0-9a-f]+ (?:(?:prev|parent) 0x[0-9a-f]+ )*<(?:[^<>]|<[^<>]*>)*> (?:<scratch space>|\S*?)?"
                    r"(?:col|line)?:\d+(?::\d+)?\s+(?:(?:used|referenced|implicit|invalid|constexpr|inline|static|"
                    r"extern|struct|class|union|enum)\s+)*([A-Za-z_]\w*)\b")


def global_names(dump: list) -> set:
    """Names declared at translation-unit scope in a clang -ast-dump, through transparent
    contexts; a using-declaration's name is its last component."""
    out, stack = set(), []          # stack: (depth, kind) of the open ancestors
    for line in dump:
        m = _NODE.match(line)
        if m is None:
            continue
        depth, kind, rest = len(m.group(1)) // 2, m.group(2), m.group(3)
        del stack[depth:]
        stack.append(kind)
        if not all(k in _TRANSPARENT for k in stack[:-1]) or kind.endswith("Attr") or "Stmt" in kind:
            continue
        if kind == "EnumDecl" and " class " in f" {rest} ":
            stack[-1] = "ScopedEnum"
            continue
        if kind in ("UsingDecl", "UsingShadowDecl"):
            name = re.search(r"([A-Za-z_]\w*)(?:'|\s*$)", rest.split("::")[-1])
        else:
            name = _NAMED.match(rest)
        if name:
            out.add(name.group(1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(corpus.HIP_NAMES_PATH))
    args = ap.parse_args(argv)
    clang = find_hip_compiler()
    if clang is None:
        print("no HIP compiler (clang-17+ with the HIP headers, or hipcc)", file=sys.stderr)
        return 2
    found = sorted(names(clang))
    version = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    Path(args.out).write_text(f"# {version}; headers: {' '.join(HEADERS)}\n" + "\n".join(found) + "\n")
    print(f"wrote {args.out}: {len(found)} names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
