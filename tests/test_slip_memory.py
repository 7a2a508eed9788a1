"""The slip memory (slip_memory.py): a slip made and fixed is not made again at that line in the
session, whatever the rung or parameters, nor (but for a misspelt name) its kind on any other line."""
from collections import Counter

from kernelstrain import slips
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.episodes import build_episode
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan, seeded_rng
from kernelstrain.profiles import Search, load_profile
from kernelstrain.qa import slip_sites
from kernelstrain.slip_memory import SlipMemory, repeats, site, site_lines
from kernelstrain.tasks import make_task

CUDA = ("__global__ void k(const float* x, float* y, int n) {\n"
        "    const int row = blockIdx.x;\n"
        "    float v = x[row];\n"
        "    v += __shfl_xor_sync(0xffffffff, v, 16);\n"
        "    v += __shfl_xor_sync(0xffffffff, v, 8);\n"
        "    y[row] = v;\n}\n")


def test_a_site_is_its_line_text_and_a_learnt_one_is_no_longer_free():
    m = SlipMemory()
    assert site_lines("shfl_mask", CUDA, "cuda") == [3, 4]
    assert m.free("shfl_mask", CUDA, "cuda") == [0, 1]
    m.learn(CUDA, "cuda", slips.encode("shfl_mask", 1))
    assert site(CUDA, "cuda", slips.encode("shfl_mask", 1)) == ("shfl_mask", "v += __shfl_xor_sync(0xffffffff, v, 8);")
    assert m.free("shfl_mask", CUDA, "cuda") == []            # the tool said what a mask is: not again, on any line
    fresh = SlipMemory()
    fresh.made.add(("identifier", "const int row = blockIdx.x;"))
    moved = "#define UNUSED 1\n" + CUDA.replace("v = x[row]", "v = 2.f * x[row]")
    assert fresh.free("shfl_mask", moved, "cuda") == [0, 1]   # another kind made: this one still free
    typo = site(CUDA, "cuda", 5)
    assert typo[0] == "identifier" and typo[1] in {line.strip() for line in CUDA.split("\n")}
    m.learn(CUDA, "cuda", 5)
    assert len(m.free("identifier", CUDA, "cuda")) == len(site_lines("identifier", CUDA, "cuda")) - 1


def test_repeats_count_each_figure():
    r = repeats([(3, "a", "shfl_mask", "x"), (4, "a", "shfl_mask", "x"), (9, "b", "shfl_mask", "x"),
                 (12, "b", "identifier", "x"), (20, "a", "shfl_mask", "y")])
    assert (r["slips"], r["repeats"], r["rung_repeats"], r["back_to_back"], r["sessions_3x"]) == (5, 2, 1, 1, 1)
    assert repeats([])["sessions_3x"] == 0


def test_kernelinfer_sessions_never_repeat_a_slip():
    """Session 1792 (tree_attention_triton, RTX A6000) made the arange slip seven times on the
    engine before the memory (twice back to back); sessions 0-3 held repeats too. Now none of
    them repeats a (kind, line), and they still slip, several kinds among them."""
    plan = make_plan(load_profile("kernelinfer"), 0)
    total, kinds = 0, set()
    for i in (*range(24), 1792):         # sessions end on evidence: two dozen make 20 slips
        got = repeats(slip_sites(build_episode(plan, i).row()))
        assert (got["repeats"], got["back_to_back"]) == (0, 0), (i, got)
        total += got["slips"]
    for i in (0, 1, 2, 3, 1792):
        kinds |= {k for _, _, k, _ in slip_sites(build_episode(plan, i).row())}
    assert total >= 20 and len(kinds) >= 2, (total, kinds)


def test_the_typo_only_engine_moves_a_repeat_elsewhere():
    """The default profile's draws (typo only): a drawn rename at a declaration already broken
    goes to one not broken yet, or to no slip when none is left."""
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "A100", "fp16", m.shapes[0])
    total, episodes = Counter(), []
    for seed in range(60):          # episodes end on evidence (near the roofline: a few steps); a tune's typo only on
                                    # the lines it writes (engine.Episode.edited): 30 seeds made 6 slips, 60 make enough
        s = {k: seeded_rng("memory", seed, k) for k in STREAMS}
        ep = Episode(m, task, s, 60, 0.4, 0.0, 40, Search())
        rows = [x.row() for x in ep.run()]
        got = repeats(slip_sites({"module": m.name, "gpu": "A100", "dtype": "fp16",
                                  "shape": dict(task.shape), "steps": rows}))
        total.update(got)
        episodes.append((ep, got["slips"]))
    assert total["repeats"] == 0 and total["slips"] >= 8, total
    assert all(len(ep.slip_memory.made) == n for ep, n in episodes)
