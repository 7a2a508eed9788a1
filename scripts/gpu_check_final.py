"""The closing check of issue 30: gpu-check on a fresh seed of each bundled profile, on the frozen model.

    python3 scripts/gpu_check_final.py prepare data/gc_final --seed S [S2]   # on the CPU, model frozen first
    bash scripts/gpu_check_final.sh data/gc_final                        # on an H100 or H200 (`run`, carry ["data/gc_final"])
    python3 scripts/gpu_check_final.py figures default.json kernelinfer.json [--markdown F]

`prepare` generates the default profile (kernelstrain) and kernelinfer at a seed no fit has read (S for both, or
S for the default profile and S2 for kernelinfer)
(--episodes a prefix of each plan: the plans are shuffled, so a prefix spreads over modules and GPUs),
then keeps of each dataset what gpu-check on an H100/H200 samples (manifest.json, stats.json and the
rows of sm_90a episodes, gzipped: `sample_cases` reads no other arch, so the slim dataset gives the same
sample as the whole one, test_gpucheck_final.py) under DIR/<profile>/, small enough to carry. It writes
DIR/FROZEN.txt (commit, fit file hash, seeds, the whole episode files' sha256), DIR/samples.txt (each
profile's --sample) and prints the cases per profile, the modules they cover and the expected device time.

`figures` names the card each report ran on and the catalog profile it was simulated as (gpu-check simulates the
card it finds: an H100 run is the H100's model against the H100), then prints the issue's done-when figures of both
gpu-check --report files side by side with the
hardware's repeat ceiling beside each (gpu-check re-times the candidates of every third timed episode:
the same figure, the second timing standing for the simulator), and the per-module table (pooled
Spearman, geomean sim/measured) of both profiles; --markdown writes the same as a markdown file.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck import as_episode, rows_file  # noqa: E402
from kernelstrain.gpucheck.report import MODULE_GEOMEAN, TARGETS  # noqa: E402
from kernelstrain.gpucheck.sample import sample_cases  # noqa: E402
from kernelstrain.manifest import MANIFEST  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.reading import read_jsonl  # noqa: E402
from kernelstrain.writers import record_paths  # noqa: E402

PROFILES = {"default": ROOT / "configs" / "kernelstrain.toml", "kernelinfer": ROOT / "configs" / "kernelinfer.toml"}
ARCH = "sm_90a"              # H100 and H200 episodes: what gpu-check on an H100 or H200 samples
# Device seconds a case, from the H100 run on seed 30303 (a fresh machine's start not counted): gpu-check built
# 252 + 310 candidates in 30 + 26 s on 16 jobs and ended after 114 + 112 s, so its three passes (correctness,
# timing, a re-time of a third) took ~170 s (the H200's seed 8484: 752 built in 65 s, 255 s of passes).
BUILD_S_PER_CASE = (30 + 26) / (252 + 310)
PASS_S_PER_CASE = (114 - 30 + 112 - 26) / (252 + 310)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def slim(full: Path, out: Path, modules: set | None = None) -> int:
    """Copy full's manifest and stats into out, and the rows of ARCH episodes gzipped (NAME.gz: text JSON
    shrinks ~10x, so both profiles fit the device call's carry; the device script unpacks them with gunzip);
    with `modules`, only those modules' rows (gpu-check samples each module alone, so their cases are the
    whole dataset's where the sample gives each module its floor of cases). Returns the rows kept."""
    out.mkdir(parents=True)
    for name in (MANIFEST, "stats.json"):
        (out / name).write_bytes((full / name).read_bytes())
    kept = 0
    for path in record_paths(rows_file(full)):
        with open(path, "rb") as src, gzip.GzipFile(out / (path.name + ".gz"), "wb", mtime=0) as dst:
            for line in src:
                row = json.loads(line)
                if row.get("arch") == ARCH and (modules is None or row.get("module") in modules):
                    dst.write(line)
                    kept += 1
    return kept


def unpack(folder: Path) -> None:
    """What the device script's gunzip does: each NAME.gz of folder written out as NAME."""
    for packed in folder.glob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))


def read_episodes(data: Path) -> list:
    return [as_episode(e) for path in record_paths(rows_file(data)) for _, e in read_jsonl(path)]


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def prepare(out: Path, work: Path, seeds: dict, episodes: dict, samples: dict, workers: int, gpu: str,
            modules: set | None = None, profiles: tuple = tuple(PROFILES)) -> int:
    if out.exists() and any(out.iterdir()):
        print(f"gpu_check_final: {out} is not empty; not overwritten", file=sys.stderr)
        return 2
    fit = ROOT / "kernelstrain" / "calibration" / "h200_fit.json"
    lines = [f"model: {commit()}; h200_fit.json sha256 {sha256(fit)}",
             "seeds " + ", ".join(f"{profile} {seed}" for profile, seed in seeds.items() if profile in profiles)]
    if modules:
        lines.append("modules kept: " + ", ".join(sorted(modules)))
    plan = []
    for profile, config in PROFILES.items():
        if profile not in profiles:
            continue
        full = work / profile
        seed = seeds[profile]
        subprocess.run([sys.executable, "-m", "kernelstrain", "generate", "--seed", str(seed), "--out", str(full),
                        "--config", str(config), "--episodes", str(episodes[profile]), "--workers", str(workers),
                        "--quiet", "--force"], cwd=ROOT, check=True)
        source = rows_file(full)
        kept = slim(full, out / profile, modules)
        rows = [e for e in read_episodes(full) if modules is None or e["module"] in modules]   # the slim one's sample
        cases = sample_cases(rows, samples[profile], 0, sim_gpu=gpu)
        modules = {c["module"] for c in cases}
        wanted = {e["module"] for e in rows if e["arch"] == ARCH}
        size = sum(f.stat().st_size for f in (out / profile).iterdir())
        lines.append(f"{profile}: generate --seed {seed} --episodes {episodes[profile]} --config {config.name}: "
                     f"{source.name} sha256 {sha256(source)}; {kept} {ARCH} rows kept ({size / 2**20:.1f} MiB packed)")
        plan.append((profile, samples[profile], len(cases), len(modules), sorted(wanted - modules)))
    (out / "FROZEN.txt").write_text("\n".join(lines) + "\n")
    (out / "samples.txt").write_text("".join(f"{p} {s}\n" for p, s, *_ in plan))
    total = 0.0
    for profile, sample, cases, modules, missing in plan:
        seconds = cases * (BUILD_S_PER_CASE + PASS_S_PER_CASE)
        total += seconds
        print(f"{profile}: --sample {sample} -> {cases} cases over {modules} modules (modules of {ARCH} episodes "
              f"left out: {missing or 'none'}) on the {gpu}; ~{seconds:.0f} s of device time (at the H100 rate of "
              "seed 30303)")
    print(f"expected device time after the machine's start: ~{total / 60:.1f} min")
    print("\n".join(lines))
    print(f"wrote {out}/<profile>/, {out}/FROZEN.txt, {out}/samples.txt")
    return 0


# the done-when figures: (label, key of report.summary["timing"], format)
TIMING = (("Spearman within episodes, mean", "spearman_mean"), ("Spearman mean, standard error", "spearman_se"),
          ("Spearman within episodes, median", "spearman_median"),
          ("pair-order agreement", "pair_agreement"),
          ("pair-order, simulator ties as wrong", "pair_agreement_ties_wrong"), ("within 0.8-1.25x", "within_0.8_1.25"),
          ("geomean sim/measured", "geomean"), ("timed candidates", "n"), ("episodes with >= 3 timed", "groups"))


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def figures_table(reports: dict) -> list:
    """Rows [figure, value, repeat ceiling, ...per profile, target] of the done-when figures."""
    bars = {key: bar for _, key, bar in TARGETS}
    rows = []
    for what, key in (("ok labels matching", "ok_match"), ("wrong_result labels failing", "wrong_fail")):
        rows.append([what] + [x for s in reports.values() for x in (_f(s[key]), "")] + [_f(bars[key])])
    for what, key in TIMING:
        rows.append([what] + [x for s in reports.values() for x in (_f(s["timing"].get(key)), _f(s["repeat"].get(key)))]
                    + [_f(bars.get(key, "0.9-1.1" if key == "geomean" else ""))])
    lo, hi = MODULE_GEOMEAN
    for what, test in (("modules with a negative pooled Spearman", lambda m: (m["spearman_pooled"] or 0) < 0),
                       (f"modules with geomean outside {lo}-{hi}",
                        lambda m: m["geomean"] is not None and not lo <= m["geomean"] <= hi)):
        cells = []
        for s in reports.values():
            bad = [n for n, m in s["modules"].items() if test(m)]
            cells += [f"{len(bad)}" + (f" ({', '.join(bad)})" if bad else ""), ""]
        rows.append([what] + cells + ["0"])
    return rows


def module_table(reports: dict) -> list:
    """Rows [module, impl, then per profile: ok, wrong, timed, geomean, pooled rho, episode rho]."""
    names = sorted({m for s in reports.values() for m in s["modules"]})
    rows = []
    for name in names:
        row = [name, REGISTRY[name].impl if name in REGISTRY else "?"]
        for s in reports.values():
            m = s["modules"].get(name)
            row += ([f"{m['ok_match']}/{m['ok']}", f"{m['wrong_fail']}/{m['wrong']}", str(m["timed"]), _f(m["geomean"]),
                     _f(m["spearman_pooled"]), _f(m["spearman_episode"])] if m else ["-"] * 6)
        rows.append(row)
    return rows


def render(reports: dict, markdown: bool) -> str:
    names = list(reports)
    head = ["figure"] + [x for n in names for x in (n, "repeat ceiling")] + ["target"]
    mhead = ["module", "impl"] + [f"{n} {c}" for n in names for c in ("ok", "wrong", "timed", "sim/meas", "rho pooled",
                                                                     "rho episode")]
    out = []
    for header, rows in ((head, figures_table(reports)), (mhead, module_table(reports))):
        if markdown:
            out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            out += ["| " + " | ".join(r) + " |" for r in rows]
        else:
            widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
            out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, nargs="+", required=True, metavar="SEED",
                   help="a seed no fit file has read: one for both profiles, or the default profile's and kernelinfer's")
    p.add_argument("--work", type=Path, default=Path("/tmp/gc_final_full"), help="where the whole datasets go")
    p.add_argument("--episodes", nargs=2, type=int, default=(2000, 1200), metavar=("DEFAULT", "KERNELINFER"))
    p.add_argument("--sample", nargs=2, type=int, default=(250, 250), metavar=("DEFAULT", "KERNELINFER"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--gpu", choices=("H100", "H200"), default="H100",
                   help="the card the check will run on: its sample is planned as gpu-check there draws it")
    p.add_argument("--modules", help="comma-separated: keep only these modules' rows (a shorter device call)")
    p.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated profiles to generate")
    f = sub.add_parser("figures")
    f.add_argument("reports", type=Path, nargs="+", help="gpu-check --report files, named <profile>.json")
    f.add_argument("--markdown", type=Path)
    a = ap.parse_args(argv)
    if a.command == "prepare":
        if len(a.seed) > len(PROFILES):
            ap.error(f"--seed takes one seed or {len(PROFILES)}")
        seeds = dict(zip(PROFILES, a.seed * len(PROFILES) if len(a.seed) == 1 else a.seed))
        return prepare(a.out, a.work, seeds, dict(zip(PROFILES, a.episodes)), dict(zip(PROFILES, a.sample)), a.workers,
                       a.gpu, set(a.modules.split(",")) if a.modules else None, tuple(a.profiles.split(",")))
    loaded = {path.stem: json.loads(path.read_text()) for path in a.reports}
    reports = {name: r["summary"] for name, r in loaded.items()}
    cards = "".join(f"{name}: measured on {r.get('device') or '?'}, simulated as {r.get('sim_gpu') or '?'}\n"
                    for name, r in loaded.items())
    print(cards + render(reports, False))
    if a.markdown:
        a.markdown.write_text(cards.replace("\n", "  \n") + "\n" + render(reports, True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
