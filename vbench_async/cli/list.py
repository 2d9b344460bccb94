"""`vbench-async list`: the benchmarks (task types, suites, presets, record counts when data is present) and suites;
with --models, the model families (frame rules, engine hand-off, chat quirks, references)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .include import add_include_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list benchmarks and suites (or, with --models, the model families)",
        description="List the benchmark cards with their task types, suites and presets. Record counts appear for "
                    "benchmarks whose annotations are found under the data root. --models lists the model families "
                    "instead: their frame rules, tiny test model and the reference each follows.",
    )
    p.add_argument("--models", action="store_true", help="list the model families instead of the benchmarks")
    p.add_argument("--suite", help="only the benchmarks of this suite (a built-in name or a suite YAML file)")
    p.add_argument("--data-root", type=Path,
                   help="folder (or YAML data map) holding annotation files and videos; default $VBENCH_DATA_ROOT "
                        "or ./data")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    add_include_option(p)
    p.set_defaults(func=run)


def _rows(args: argparse.Namespace) -> list[dict]:
    from ..benchmarks import get_benchmark, list_benchmarks, resolve_benchmarks

    benches = resolve_benchmarks(args.suite, None) if args.suite else [get_benchmark(n) for n in list_benchmarks()]
    rows = []
    for b in benches:
        card = b.card
        # The demo suite is generated on first use; counting it here would generate it.
        count = None if card.sources.demo else b.record_count(args.data_root)
        rows.append({
            "id": b.id, "name": card.name, "task_types": list(card.task_types), "records": count,
            "suites": list(card.suites), "presets": sorted(card.presets), "metric": card.metric,
            "sources": [k for k in ("unified", "hub", "demo") if getattr(card.sources, k)],
        })
    return rows


def run(args: argparse.Namespace) -> int:
    from ..benchmarks import list_suites, load_suite
    from ..benchmarks.registry import suite_files

    if args.models:
        return _print_families(args.json)
    rows = _rows(args)
    suites = {name: load_suite(path) for name, path in suite_files().items()}
    if args.json:
        print(json.dumps({"benchmarks": rows,
                          "suites": {n: {"description": d, "benchmarks": b} for n, (d, b) in suites.items()}},
                         indent=2))
        return 0
    header = ("id", "name", "task types", "records", "suites", "presets")
    table = [(r["id"], r["name"], ", ".join(r["task_types"]), "-" if r["records"] is None else str(r["records"]),
              ", ".join(r["suites"]), ", ".join(r["presets"])) for r in rows]
    widths = [max([len(h), *(len(t[i]) for t in table)]) for i, h in enumerate(header)]
    for line in (header, tuple("-" * w for w in widths), *table):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    print(f"\n{len(rows)} benchmarks; records '-' = annotations not found under the data root.")
    print("Suites: " + "; ".join(f"{n} ({len(suites[n][1])})" for n in list_suites()))
    print("Use a preset as <id>@<preset>, e.g. videomme@64f.")
    return 0


def _print_families(as_json: bool) -> int:
    from .. import families

    rows = [f.describe() for f in families.registry().values()]
    if as_json:
        print(json.dumps({"families": rows}, indent=2))
        return 0
    for r in rows:
        f = r["frames"]
        print(f"{r['family']}  (model_type {', '.join(r['model_types'])}; test model {r['tiny_model']})")
        for label, value in (("count", f["count"]), ("selection", f["selection"]), ("resolution", f["resolution"]),
                             ("temporal patch", str(f["temporal_patch"])), ("timestamps", f["timestamps"]),
                             ("chat", r["chat"]),
                             ("reference", f"{r['reference']['source']}: {r['reference']['url']}"),
                             ("follows", r["reference"]["follows"])):
            print(f"  {label:<15}{value}")
        print()
    print(f"{len(rows)} families; a checkpoint's family comes from its config.json model_type.")
    return 0
