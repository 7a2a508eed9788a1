"""Build the candidate: compile the CUDA kernel in kernels/ with its PyTorch binding (binding/)
into build/, or import the Triton kernel module. Exit 0 when it builds, 1 when it does not.

    python3 build.py [-v] [--dry]

--dry (a machine without a GPU): compile a CUDA candidate's units without linking or loading.
Both need PyTorch (for --dry a CPU build is enough: the binding compiles against its headers)
and, for a CUDA candidate, nvcc.
"""
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

try:
    import harness  # noqa: E402
except ModuleNotFoundError as e:
    if e.name != "torch":
        raise
    sys.exit("build: needs PyTorch (pip install torch; a CPU build is enough for --dry)")


def main():
    t0 = time.time()
    try:
        harness.load_module(HERE / "model.py", "model")
        solution = harness.load_module(HERE / "model_new.py", "model_new")
        if "--dry" not in sys.argv:
            solution.build(verbose="-v" in sys.argv)
        elif hasattr(solution, "_sources"):
            harness.dry_build(solution, HERE / "build" / "dry")
    except Exception:  # noqa: BLE001 - the compiler's message is the result
        traceback.print_exc()
        print(f"build: FAIL after {time.time() - t0:.1f} s")
        return 1
    print(f"build: ok in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
