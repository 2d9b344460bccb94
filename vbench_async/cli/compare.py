"""`vbench-async compare`: paired comparison of two runs on the samples both hold."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import UserError
from .output import print_rows


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="paired comparison of two runs (difference, CI, paired tests)",
        description=(
            "Compare run A with run B benchmark by benchmark, on the sample ids both hold: the mean difference (A - B) "
            "with a 95% confidence interval clustered by video, a paired t-test, and an exact sign test (McNemar's "
            "exact test when every score is 0 or 1), and how many samples flipped (their ids in --json). Samples only "
            "one run holds are counted and left out; where the runs' settings differ, the note names them. Judge "
            "verdicts, where a judge pass ran, are used as the scores."
        ),
    )
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="result directory of the first run")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="result directory of the second run (the reference)")
    p.add_argument("--benchmarks", help="comma-separated benchmark ids (default: every benchmark both runs hold)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=main)


def compare_runs(run_a: Path, run_b: Path, benchmarks: list[str] | None = None) -> dict:
    """{benchmark: PairedComparison as a dict, plus config_differs, the settings that differ (`differs_in`) and the
    flipped samples (id, A's and B's score)} for the benchmarks both runs hold."""
    from ..leaderboard.compare_pages import flipped_samples
    from ..leaderboard.load import load_runs, settings
    from ..results.result_config import differing
    from ..results.stats import paired_compare, values_by_id

    a, b = load_runs([run_a, run_b], strict=True)
    common = [bid for bid in a.benchmarks if bid in b.benchmarks]
    if benchmarks:
        missing = [bid for bid in benchmarks if bid not in common]
        if missing:
            raise UserError(f"not held by both runs: {', '.join(missing)}; common benchmarks: "
                            f"{', '.join(common) or 'none'}")
        common = benchmarks
    if not common:
        raise UserError(f"{run_a} and {run_b} have no benchmark in common")
    out = {}
    for bid in common:
        va, ca = values_by_id(a.benchmarks[bid].results)
        vb, cb = values_by_id(b.benchmarks[bid].results)
        row = paired_compare(va, vb, {**cb, **ca}).to_dict()
        ba, bb = a.benchmarks[bid], b.benchmarks[bid]
        row["config_differs"] = ba.config_group != bb.config_group
        row["differs_in"] = (differing([settings(ba.config, ba.recipe), settings(bb.config, bb.recipe)])
                             if ba.config and bb.config else [])
        row["flipped"] = [{"sample_id": f["sample_id"], "a": f["score_a"], "b": f["score_b"]}
                          for f in flipped_samples(ba, bb)]
        out[bid] = row
    return {"run_a": a.label, "run_b": b.label, "benchmarks": out}


def _f(x, fmt: str, scale: float = 1.0) -> str:
    return "-" if x is None else format(scale * x, fmt)


def main(args: argparse.Namespace) -> int:
    from ..results.run_cards import use_run_cards

    wanted = [s.strip() for s in args.benchmarks.split(",") if s.strip()] if args.benchmarks else None
    for run_dir in (args.run_a, args.run_b):  # each run's own card folders (its manifest)
        for problem in use_run_cards(run_dir, strict=False):
            print(f"warning: {problem}", file=sys.stderr)
    result = compare_runs(args.run_a, args.run_b, wanted)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    print(f"A = {result['run_a']}   B = {result['run_b']}   (scores in %, difference A - B)")
    rows = [("benchmark", "n", "A", "B", "A-B", "95% CI", "p(t)", "A>B/A<B", "p(exact)", "flipped", "note")]
    for bid, r in result["benchmarks"].items():
        d = r["diff"]
        ci = "-" if d["ci_low"] is None else f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
        note = []
        if r["only_a"] or r["only_b"]:
            note.append(f"unpaired {r['only_a']}+{r['only_b']}")
        if r["config_differs"]:
            note.append("config differs" + (f": {', '.join(r['differs_in'])}" if r["differs_in"] else ""))
        rows.append((bid, str(r["n"]), _f(r["mean_a"], ".1f", 100), _f(r["mean_b"], ".1f", 100),
                     _f(d["value"], "+.1f", 100), ci, _f(r["p_t"], ".3g"), f"{r['n_a_better']}/{r['n_b_better']}",
                     f"{r['p_sign']:.3g} ({r['sign_test_name']})", str(len(r["flipped"])), ", ".join(note)))
    print_rows(rows, left=(0, 10))
    return 0
