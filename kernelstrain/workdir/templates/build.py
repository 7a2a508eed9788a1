"""Build the candidate: compile the CUDA kernel in kernels/ with its PyTorch binding (binding/)
into build/, or import the Triton kernel module. Exit 0 when it builds, 1 when it does not.

    python3 build.py [-v]
"""
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402


def main():
    t0 = time.time()
    try:
        harness.load_module(HERE / "model.py", "model")
        harness.load_module(HERE / "model_new.py", "model_new").build(verbose="-v" in sys.argv)
    except Exception:  # noqa: BLE001 - the compiler's message is the result
        traceback.print_exc()
        print(f"build: FAIL after {time.time() - t0:.1f} s")
        return 1
    print(f"build: ok in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
