"""The package's import graph (read with ast, every import: top-level and inside functions):
no cycles, and no module importing a layer above its own.

The layers, from the bottom (a module may import its own layer and those below it):
  0 foundation   records, texts and IO every other layer uses: errors, schema, gpus, writers, readers, ...
  1 ops          the op layer: the registry of op modules, their dialects, rungs and renders
  2 model        what is simulated and how it fails: sim, calibration, knobs, slips, the texts of
                 compilers, harnesses and profilers (messages, profiler), the keep rule (ledger), re-rendering a row's code;
                 fused programs (kernelstrain/fused: their grammar, sources, costs and task files); the
                 search of held-out tasks' best configs over the model (holdout_search)
  3 run          a run: its profile and manifest, plan, engine, and the rows of both layouts
  4 measure      figures over rows: stats, holdout and contamination, qa
  5 check        validate's checks of rows and files, the cards, the batch QA reports
  6 layout       the layout records (layouts.py), which name the functions of the layers below
  7 dataset      a dataset as an object: open(), validate(); whether a row's code is what
                 kernelstrain renders (trusted)
  8 commands     what the commands do: generate, merge, verify, gpu-check, report, show, workdir, export
  9 face         the command line and the Python face (api, the package's lazy attributes)
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kernelstrain"

LAYERS = (
    ("foundation", {"version", "errors", "fields", "schema", "gpus", "progress", "safety", "writers", "memo", "svg",
                    "clock", "pools", "dirkind", "reading", "tolerances", "rng", "solution_store", "records"}),
    ("ops", {"ops", "ops.*"}),
    ("model", {"sim", "calibration", "calibration.*", "knobs", "knobs_triton", "limits", "tasks", "shapes", "slips", "slips.*",
               "mutations", "compilers", "runtime_texts", "over_read_texts", "messages", "profiler", "slip_memory", "ledger", "references", "feasibility",
               "rerender", "corpus", "fused", "fused.*", "holdout_search", "grids", "grid_limits"}),
    ("run", {"profiles", "plan", "manifest", "engine", "behaviour", "episodes", "sessions", "training"}),
    ("measure", {"stats", "holdout", "contamination", "qa", "qa_reports"}),
    ("check", {"validate", "validate_ahead", "validate_derived", "validate_episodes", "validate_sessions", "validate_written", "card",
               "card_sessions", "report_page"}),
    ("layout", {"layouts"}),
    ("dataset", {"dataset", "trusted"}),
    ("commands", {"generation", "merge", "verify", "gpucheck", "gpucheck.*", "report", "show", "workdir", "workdir.*",
                  "export", "export.*", "fused.filter", "corpus.build"}),
    ("face", {"cli", "api", "__main__", "kernelstrain"}),
)


# Imports that still run up the layers, named so that they can only go (none now: the registry
# asks makers registered with it, and fused.module registers the fused programs' maker).
KNOWN_UPWARD: set = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "kernelstrain"


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def layer_of(name: str) -> int:
    """A module's layer: the one naming it, else the one whose `package.*` holds it."""
    for exact in (True, False):
        for i, (_, names) in enumerate(LAYERS):
            if name in names if exact else any(n.endswith(".*") and name.startswith(n[:-1]) for n in names):
                return i
    raise AssertionError(f"kernelstrain.{name} has no layer in tests/test_imports.py: give it one")


def imports(name: str) -> set:
    """The package modules `name` imports (a name imported from a package counts as the
    package, or as its submodule when it is one)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package and package != "kernelstrain" else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").startswith("kernelstrain"):
                mod = node.module.removeprefix("kernelstrain").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}" if mod else alias.name
                found.add(sub if sub in MODULES else (mod or "kernelstrain"))
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("kernelstrain.") for a in node.names
                      if a.name.startswith("kernelstrain.") and a.name.removeprefix("kernelstrain.") in MODULES}
    found.discard(name)
    return {m for m in found if m in MODULES}


GRAPH = {name: imports(name) for name in MODULES}


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def test_no_module_imports_a_layer_above_its_own():
    upward = sorted(f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
                    for a, targets in GRAPH.items() for b in targets
                    if layer_of(b) > layer_of(a) and (a, b) not in KNOWN_UPWARD)
    assert not upward, "\n".join(upward)


def test_the_known_upward_imports_still_exist():
    """KNOWN_UPWARD only shrinks: an exception whose import is gone is taken off the list."""
    assert all(b in GRAPH[a] and layer_of(b) > layer_of(a) for a, b in KNOWN_UPWARD)


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles({a: {b for b in targets if (a, b) not in KNOWN_UPWARD} for a, targets in GRAPH.items()}) == []


@pytest.mark.parametrize("graph, want", [({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
                                         ({"a": {"b"}, "b": set()}, [])])
def test_the_cycle_finder_finds_cycles(graph, want):
    assert cycles(graph) == want
