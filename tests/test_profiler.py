"""The profiler section of a correct step's feedback (kernelstrain/profiler.py): read from the written
multi-turn rows, each figure agrees with the step's printed time, with the simulator's launch and cost
model of that candidate, and its bound with the verdict the engine chose the next move from
(engine.Episode.bottleneck)."""
import json
import math
import re
from types import SimpleNamespace

from kernelstrain import knobs, sim
from kernelstrain.engine import Candidate, Episode
from kernelstrain.fields import as_dict
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

HEAD = re.compile(r"^(?:\[t\+[\d:]+\] )?Step (\d+): (.+)\.$")
TIME = re.compile(r"^time: ([\d.]+) (us|ms),")
LAUNCH = re.compile(r"^profile(?: \(its heaviest kernel\))?: (\d+) (?:CTAs|workgroups) x (\d+) threads on (\d+) (?:SMs|CUs), "
                    r"([\d.]+) waves; theoretical occupancy (\d+)% \((\d+) of (\d+) (?:warps per SM|wavefronts per CU)"
                    r"(?:, limited by (registers|shared memory|warps|blocks))?\)$")
THROUGHPUT = re.compile(r"^throughput: DRAM ([\d.]+) (TB|GB)/s, ([\d.]+)% of peak \((?:the program's least )?([\d.]+) (GB|MB|KB|B)"
                        r"(?: moved)?\); (?:compute ([\d.]+)% of the (\w+) peak|no FLOPs); bound: (grid|memory|compute)")
SCALE = {"TB": 1e12, "GB": 1e9, "MB": 1e6, "KB": 1e3, "B": 1.0, "us": 1e-6, "ms": 1e-3}
NAMES = {"grid": "occupancy", "memory": "memory", "compute": "compute"}


def feedbacks(d):
    """{(episode id, step): feedback text} of every step's turn in the multi-turn rows."""
    out = {}
    for name in ("sft_multiturn.jsonl", "sft_multiturn.validation.jsonl"):
        for line in open(d / name):
            row = json.loads(line)
            for m in row["messages"]:
                # (a later window's first turn carries its previous step's feedback as the last result)
                text = m["content"].split("\nLast result:\n", 1)[-1].split("\n\nCurrent best", 1)[0]
                head = HEAD.match(text.split("\n", 1)[0]) if m["role"] == "user" else None
                if head:
                    out[(row["id"], int(head.group(1)))] = text
    return out


def close(printed: str, value: float, digits: int = 3) -> bool:
    """Whether `printed` is `value` rounded to its shown digits (or to `digits` significant ones)."""
    shown = float(printed)
    step = 10 ** -len(printed.split(".")[1]) if "." in printed else 1
    return abs(shown - value) <= max(step / 2, abs(value) * 0.5 * 10 ** (1 - digits)) * 1.0001


def test_a_correct_step_s_profile_agrees_with_its_time_the_model_and_the_engine(small_dataset):
    texts, seen, shares = feedbacks(small_dataset), 0, 0
    for line in [*open(small_dataset / "episodes.jsonl"), *open(small_dataset / "episodes.validation.jsonl")]:
        ep = json.loads(line)
        module = REGISTRY[ep["module"]]
        task = make_task(module, ep["gpu"], ep["dtype"], ep["shape"])
        best_code = ep["baseline"]["code"]
        for s in ep["steps"]:
            text = texts.get((ep["id"], s["step"]))
            if text is None:        # the last step: a window ends on the answer, its feedback unsent
                assert s is ep["steps"][-1]
                continue
            again = s["code"] == best_code
            best_code = s["code"] if s["kept"] else best_code
            if s["status"] != "ok" or again:        # a failure, a re-measure of the best's code: no new profile
                assert "\nprofile" not in text and "\nthroughput:" not in text, text
                continue
            lines = text.split("\n")
            at = next(i for i, t in enumerate(lines) if t.startswith("profile"))
            launch_m, through_m = LAUNCH.match(lines[at]), THROUGHPUT.match(lines[at + 1])
            assert launch_m and through_m, text
            time_m = TIME.match(lines[1])
            time_s = float(time_m.group(1)) * SCALE[time_m.group(2)]
            variant, params = module.variant(s["tag"]), as_dict(s["params"])
            # the engine's own verdict on this candidate, from its own method
            engine = SimpleNamespace(task=task, m=module)
            assert NAMES[through_m.group(8)] == Episode.bottleneck(engine, Candidate(variant, params)), text
            # the launch: the model's grid and block; waves and occupancy from the CTAs an SM holds
            launch = sim.built_launch(module, variant, params, task)
            grid, threads, sms = map(int, launch_m.group(1, 2, 3))
            assert (grid, threads, sms) == (knobs.launch(module, variant, params, task).grid, launch.threads, task.gpu.sms)
            warps, max_warps = int(launch_m.group(6)), int(launch_m.group(7))
            blocks = warps // math.ceil(threads / task.gpu.warp)
            assert close(launch_m.group(4), grid / (sms * blocks), 2) and close(launch_m.group(5), 100 * warps / max_warps)
            assert max_warps == task.gpu.max_threads_per_sm // task.gpu.warp
            assert (launch_m.group(8) is None) == (warps == max_warps), text      # a limiter named where one binds
            gpu = task.gpu
            limits = {"registers": gpu.regs_per_sm // (threads * launch.regs), "warps": gpu.max_threads_per_sm // threads,
                      "shared memory": gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else math.inf,
                      "blocks": gpu.max_blocks_per_sm}
            assert blocks == min(limits.values()) and (launch_m.group(8) is None or limits[launch_m.group(8)] == blocks), text
            # throughput: the printed bytes over the printed time give the printed rate and share of peak
            moved = float(through_m.group(4)) * SCALE[through_m.group(5)]
            rate = float(through_m.group(1)) * SCALE[through_m.group(2)]
            fused = hasattr(module, "simulate")
            charged = module.cost(task).bytes * (1.0 if fused else launch.traffic)
            assert close(through_m.group(4), charged / SCALE[through_m.group(5)]), text
            assert abs(moved / time_s / rate - 1) < 0.02, text
            assert close(through_m.group(3), 100 * charged / (s["time_ms"] * 1e-3) / (task.gpu.bw_tbs * 1e12)), text
            assert 0 < rate <= task.gpu.bw_tbs * 1e12, text
            if through_m.group(6):
                flops = module.cost(task).flops
                assert through_m.group(7) == variant.path
                assert close(through_m.group(6), 100 * flops / (s["time_ms"] * 1e-3) / task.gpu.peak(variant.path)), text
            # the bound names the larger of the two printed shares of peak (Nsight Compute's Speed Of Light reading):
            # on a794ac7 it came from the op's least bytes, and a GEMM re-reading its operands printed `bound: compute`
            # beside 74% of peak DRAM and 20% of its FLOPs (117 of 2,903 profiles of default seed 8181)
            dram, comp = float(through_m.group(3)), float(through_m.group(6) or 0)
            if through_m.group(8) != "grid" and abs(dram - comp) > 1:
                assert (through_m.group(8) == "compute") == (comp > dram), text
                shares += 1
            seen += 1
    assert seen > 100 and shares > 50, (seen, shares)


def test_a_candidate_without_shared_memory_is_not_limited_by_it():
    """kernelinfer-s16262-000001 step 17 (kv_append_cuda on the RTX A6000, main 90dadf3): 2048 CTAs of 64
    threads, 0 B of shared memory, 16 CTAs a SM (the sm_86 block limit) printed `limited by shared memory`."""
    from kernelstrain import profiler
    from kernelstrain.gpus import GPUS
    from kernelstrain.ops.base import Launch
    gpu = GPUS["RTXA6000"]
    launch = Launch(grid=2048, threads=64, regs=56, smem_bytes=0)
    assert profiler.limiter(launch, gpu) == "blocks"
    assert profiler.limiter(Launch(grid=2048, threads=64, regs=56, smem_bytes=48 * 1024), gpu) == "shared memory"
