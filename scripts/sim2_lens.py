"""Full-length contexts for the paged-decode device cases: gpu-check's input preparation of paged_decode_cuda /
paged_decode_triton (paged_decode_spec.ragged_lens) draws each sequence's length in [S/2, S] (~0.75 of the bytes the
task's S moves), while the simulator times the task's S tokens a sequence. A case whose id ends in LENS_FULL runs with
every length S; the others keep the ragged ones, so one device run times both on the same kernels.

gpu-check's workers are fresh interpreters (`python -m kernelstrain.gpucheck.runtime --worker`), so the switch is a
sitecustomize.py on their PYTHONPATH (install()): it wraps the spec's check_prepare to read the case id off the calling
frame (gpucheck.runtime._run_case_inner's `case`). Device tool only; nothing in kernelstrain/ reads it.
"""
import os
import sys
from pathlib import Path

LENS_FULL = "|lens=full"
LENS_RAGGED = "|lens=ragged"
ROOT = Path(__file__).resolve().parents[1]

SITE = '''import os, sys
if os.environ.get("SIM2_LENS"):
    sys.path.insert(0, {root!r})
    from kernelstrain.ops.attention import paged_decode_spec as _spec
    _ragged = _spec.ragged_lens

    def _case_id():
        f = sys._getframe(2)
        while f is not None:
            case = f.f_locals.get("case")
            if isinstance(case, dict) and "id" in case:
                return case["id"]
            f = f.f_back
        raise RuntimeError("sim2_lens: no case in the calling frames")

    def _prepare(d, inputs):
        if _case_id().endswith({full!r}):
            inputs[4].fill_(d["S"])           # every sequence the task's S tokens
        else:
            _ragged(d, inputs)
    _spec.PagedDecodeSpec.check_prepare = staticmethod(_prepare)
'''


def install(folder: Path) -> None:
    """sitecustomize.py into `folder`, `folder` first on PYTHONPATH of this process's children, and the switch on."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITE.format(root=str(ROOT), full=LENS_FULL))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH", "")]))
    os.environ["SIM2_LENS"] = "1"


def both(cases: list, modules: tuple = ("paged_decode_cuda", "paged_decode_triton"), full_only=lambda c: False) -> list:
    """Each case of `modules` twice, full-length then ragged (once, full, where full_only(case)); the others as they
    are; ids marked, runner indices renumbered."""
    out = []
    for c in cases:
        if c["module"] not in modules:
            out.append(c)
            continue
        out.append(dict(c, id=c["id"] + LENS_FULL, episode=c["episode"] + LENS_FULL))
        if not full_only(c):
            out.append(dict(c, id=c["id"] + LENS_RAGGED, episode=c["episode"] + LENS_RAGGED))
    for i, c in enumerate(out):
        c["idx"] = c["step"] = i
    return out


if __name__ == "__main__":      # a check of the switch without a GPU: python3 scripts/sim2_lens.py
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        install(Path(tmp))
        probe = ("import torch\nfrom kernelstrain.ops import REGISTRY\nfrom kernelstrain.gpucheck.adapters import prepare\n"
                 "m = REGISTRY['paged_decode_cuda']\n"
                 "def run(case):\n    lens = torch.zeros(4, dtype=torch.int32)\n"
                 "    prepare(m)({'S': 64, 'B': 4}, [None] * 4 + [lens])\n    return lens.tolist()\n"
                 f"print(run({{'id': 'a{LENS_FULL}'}}), run({{'id': 'a{LENS_RAGGED}'}}))\n")
        sys.exit(subprocess.run([sys.executable, "-c", probe], cwd=ROOT).returncode)
