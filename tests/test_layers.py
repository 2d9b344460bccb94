"""The package's import graph flows one way: every module imports only from its own layer or lower ones, and no
modules import each other in a circle. Read from the source (imports inside functions and under TYPE_CHECKING
included), nothing is imported. docs/architecture.md describes the layers."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vbench_async"

# The layers, lowest first: module name prefixes (relative to the package; the longest matching prefix decides).
LAYERS: dict[str, tuple[str, ...]] = {
    "types": ("", "errors", "failure_kinds", "samples", "legacy_records", "sample_result", "jsonstream", "resources",
              "process_exit", "phases", "compat", "redact", "settings", "record_io", "yaml_bounded", "homes",
              "worker_process", "backends.base", "scoring.base"),
    "stages": ("frames", "scoring", "benchmarks", "backends", "workload", "demo", "models", "families"),
    "results": ("results", "sharding"),
    "passes": ("evaluation", "train", "serve"),
    "presentation": ("leaderboard", "cli", "__main__"),
}


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name (without the package prefix; "" for the package itself) -> file."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports anywhere in its source. `from .x import y` counts as importing x.y when that
    is a module, else x."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                base = ".".join(["vbench_async", *parts])
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != "vbench_async":
                continue
            dotted = target.removeprefix("vbench_async").lstrip(".")
            while dotted and dotted not in known:
                dotted = dotted.rpartition(".")[0]
            if dotted != name:
                found.add(dotted)
    return found


def layer_of(module: str) -> str:
    best, best_len = None, -1
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            matches = module == prefix or (prefix and module.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    assert best is not None, f"vbench_async.{module} is in no layer: add it to LAYERS in tests/test_layers.py"
    return best


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, set(known)) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules, as one closed path through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(_path_through(sorted(group), edges))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def _path_through(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest circle from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(edges[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    return group


def _label(module: str) -> str:
    return f"vbench_async.{module}" if module else "vbench_async"


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


def test_no_module_imports_from_a_higher_layer():
    order = list(LAYERS)
    upward = [f"{_label(a)} ({layer_of(a)}) imports {_label(b)} ({layer_of(b)})"
              for a, targets in sorted(graph().items()) for b in sorted(targets)
              if order.index(layer_of(b)) > order.index(layer_of(a))]
    assert not upward, "imports against the layers:\n  " + "\n  ".join(upward)


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n  " + "\n  ".join(" -> ".join(map(_label, c)) for c in found)


def test_function_level_and_relative_imports_are_seen():
    # The graph must see what the layer tests rely on: an import inside a function, relative at two levels.
    edges = graph()
    assert "frames" in edges["evaluation.runner"]  # `from ..frames import FrameCache` inside run()
    assert "results.result_file" in edges["results.summaries"] and "errors" in edges["results.result_file"]


def test_the_architecture_doc_names_every_layer_prefix():
    # docs/architecture.md's layer table is the readable copy of LAYERS: each prefix in its layer's row.
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if line.startswith("| ") and ". " in line.split("|")[1]]
    assert len(rows) == len(LAYERS)
    missing = []
    for row, (layer, prefixes) in zip(rows, LAYERS.items()):
        named = set(re.findall(r"`([^`]+)`", row.split("|")[2]))
        for prefix in filter(None, prefixes):
            path = prefix.replace(".", "/")
            if not {path, f"{path}/"} & named:
                missing.append(f"{layer}: {prefix}")
    assert not missing, "layers missing from docs/architecture.md's table: " + ", ".join(missing)
