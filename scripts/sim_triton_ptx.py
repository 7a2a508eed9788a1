"""What Triton's own compiler emits for one Triton candidate on sm_90a, compiled on the CPU (no GPU): the tl.dot
lowering (wgmma or mma.sync), the cp.async copies a staged loop uses (.cg: 16 bytes, L2 only; .ca: 4/8 bytes, via
L1) and metadata.shared, beside the launch model's shared memory -- the compiler facts behind base.triton_wgmma and
stream_stages.ca_staged, the one-element loads (ld.global.b16) of gemm_fp16_triton.narrow_k_s, and ptxas's
registers and spill (helper sim, issue 30).

    python3 scripts/sim_triton_ptx.py gemm_splitk_triton pipelined_split_k '{"M":16,"N":4096,"K":14336}' fp16 \
        '{"BLOCK_M":64,"BLOCK_N":128,"BLOCK_K":128,"num_stages":5}' num_warps 2 4
    python3 scripts/sim_triton_ptx.py layernorm_triton chunked_three_pass '{"T":8192,"D":4096}' bf16 \
        '{"BLOCK":1024,"num_stages":3}' num_warps 2 4 8
    python3 scripts/sim_triton_ptx.py gemm_fp16_triton pipelined_stages '{"M":1000,"N":3000,"K":776}' fp16 \
        '{"BLOCK_M":128,"BLOCK_N":128,"num_stages":3,"num_warps":4}' BLOCK_K 32 64     # and K 2048: narrow_k_s

Arguments: module, rung, shape (JSON), dtype, fixed params over the rung's defaults (JSON), then a param and the
values to sweep.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.compilers import _import_triton, launch_specialization, load_triton_source, triton_target  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

COUNTED = ("wgmma.mma_async", "mma.sync.aligned", "cp.async.cg.shared.global", "cp.async.ca.shared.global",
           "ld.global.b16")


def facts(module: str, rung: str, shape: dict, dtype: str, params: dict, arch: str = "sm_90a") -> dict:
    triton, _, ASTSource = _import_triton()
    m = REGISTRY[module]
    v = m.variant(rung)
    task = make_task(m, "H100", dtype, shape)
    p = {**v.defaults(), **params}
    spec = m.compile_specs(v, p, task)[0]
    ns = load_triton_source(knobs.render(m, v, p, task, None))
    signature, constexprs, attrs = launch_specialization(spec)
    out = triton.compile(ASTSource(fn=ns[spec.name], signature=signature, constexprs=constexprs, attrs=attrs),
                         target=triton_target(arch), options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
    ptx = out.asm["ptx"]
    from sim2_ptxas_regs import ptxas_figures       # this folder: ptxas -v on the PTX (registers, spill)
    return {"shared": int(out.metadata.shared), "model_smem": v.launch(p, task).smem_bytes,
            **{k: ptx.count(k) for k in COUNTED}, **ptxas_figures(ptx, arch)}


def main(argv: list) -> int:
    module, rung, shape, dtype, fixed, param, *values = argv
    for value in values:
        params = {**json.loads(fixed), param: int(value)}
        print(json.dumps(params), json.dumps(facts(module, rung, json.loads(shape), dtype, params)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
