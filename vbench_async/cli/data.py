"""`vbench-async data validate|check|fetch|convert`: check annotation files, find missing videos, download releases,
convert the predecessor's training records."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .include import add_include_option

_DATA_ROOT_HELP = "folder (or YAML data map) holding annotation files and videos; default $VBENCH_DATA_ROOT or ./data"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="validate annotation files, check for missing videos, fetch official releases",
                       description="Work with benchmark data before a run.")
    cmds = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    v = cmds.add_parser("validate", help="check every record of an annotation file",
                        description="Parse an annotation file (unified JSON/JSONL) as BENCHMARK's records and report "
                                    "each invalid one: missing or mistyped fields, an unknown problem type, an "
                                    "unreadable ground truth, unsafe paths. Exit status 0 only when all are valid.")
    v.add_argument("file", type=Path, help="annotation file (.json or .jsonl)")
    # --benchmarks, as every command spells it (--benchmark kept for existing scripts)
    v.add_argument("--benchmarks", "--benchmark", dest="benchmark", required=True,
                   help="benchmark id the file belongs to, e.g. videomme or mmvu@all")
    v.add_argument("--json", action="store_true", help="print one JSON object with keys records, valid, errors")
    v.add_argument("--max-errors", type=int, default=50, help="errors to print in the text report (all in --json)")
    add_include_option(v)
    v.set_defaults(func=run_validate)

    c = cmds.add_parser("check", help="list missing videos and images before a run",
                        description="Load each benchmark's annotations under the data root and list the videos and "
                                    "images that are missing or point outside their folder. Exit status 1 if any.")
    c.add_argument("benchmarks", nargs="*", help="benchmark ids (with optional @preset)")
    c.add_argument("--benchmarks", dest="benchmark_list", help="comma-separated benchmark ids, as `run` takes them")
    c.add_argument("--suite", help="a built-in suite name or a suite YAML file")
    c.add_argument("--data-root", type=Path, help=_DATA_ROOT_HELP)
    c.add_argument("--source", default="auto", choices=["auto", "unified", "hub", "demo"],
                   help="annotation source: auto prefers a unified file, then a hub snapshot")
    c.add_argument("--allow-outside-root", action="store_true", help="accept absolute, ../ and symlinked paths")
    c.add_argument("--show", type=int, default=10, help="missing paths to print per benchmark (all in --json)")
    c.add_argument("--json", action="store_true", help="print one JSON object per benchmark id")
    c.add_argument("--no-probe", action="store_true",
                   help="only check that files exist (default: also open each video, as the frame cache will)")
    add_include_option(c)
    c.set_defaults(func=run_check)

    f = cmds.add_parser("fetch", help="download a benchmark's official release from the Hugging Face hub",
                        description="Download the annotation files of NAME's official hub release into "
                                    "DATA_ROOT/hub/<owner>/<name>, where `--source hub` (and auto) finds them.")
    f.add_argument("name", help="benchmark id")
    # --data-root, as every command spells it; --dest (its first name) still works, unlisted
    f.add_argument("--data-root", dest="dest", type=Path,
                   help="data root to download into (default: $VBENCH_DATA_ROOT or ./data)")
    f.add_argument("--dest", dest="dest", type=Path, help=argparse.SUPPRESS)
    f.add_argument("--with-videos", action="store_true", help="also download the video archives the card lists")
    add_include_option(f)
    f.set_defaults(func=run_fetch)

    cv = cmds.add_parser("convert", help="convert the predecessor's training records to the unified layout",
                         description="Rewrite EasyVideoR1 training records (answer / videos / images, <video> "
                                     "placeholders, offline_output) as unified records (solution / path / "
                                     "image_path, offline_response). Records already unified are copied. "
                                     "Unconvertible ones go to DST.failed.jsonl; exit status 1 if any.")
    cv.add_argument("src", type=Path, help="training records (.json or .jsonl)")
    cv.add_argument("dst", type=Path, help="output file (.jsonl, or .json for one array)")
    cv.set_defaults(func=run_convert)


def run_validate(args: argparse.Namespace) -> int:
    from ..benchmarks import get_benchmark
    from ..benchmarks.annotation_check import check_file

    report = check_file(args.file, get_benchmark(args.benchmark))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.ok else 1
    print(f"{args.file}: {report.records} records, {report.valid} valid, {len(report.errors)} invalid "
          f"(benchmark {report.benchmark})")
    for err in report.errors[: args.max_errors]:
        where = "file" if err.index < 0 else f"record #{err.index}"
        if err.sample_id:
            where += f" (id {err.sample_id})"
        print(f"  {where}: {err.kind}: {err.message}")
    if len(report.errors) > args.max_errors:
        print(f"  ... {len(report.errors) - args.max_errors} more (use --json for all)")
    return 0 if report.ok else 1


@dataclass
class DataReport:
    """What `data check` found for one benchmark: its records and media, or why its annotations could not be read."""

    error: str | None = None  # the annotation file could not be read: nothing below was checked
    source: str = ""
    video_root: str = ""
    records: int = 0
    invalid_records: int = 0
    media_files: int = 0
    missing: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)  # paths that leave the data root
    unreadable: list[str] = field(default_factory=list)  # "path: why"

    @property
    def bad(self) -> bool:
        return bool(self.error or self.missing or self.unsafe or self.unreadable)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {"error": self.error} if self.error else {k: v for k, v in out.items() if k != "error"}


def check_benchmark(bench, data_root: Path | None, source: str, allow_outside: bool, probe: bool = True) -> DataReport:
    """Missing, unsafe and (`probe`) unreadable media of one benchmark (pure of printing, used by the command and
    tests)."""
    from ..errors import SampleError
    from ..samples import Sample

    try:
        items = bench.load_samples(data_root, source)
    except UserError as exc:
        return DataReport(error=str(exc))
    resolved = bench.resolve_source(data_root, source)
    samples = [s for s in items if isinstance(s, Sample)]
    missing, unsafe, seen, videos = [], [], set(), []
    for s in samples:
        try:
            paths = [bench.video_path(s, data_root, allow_outside)] if s.video else []
            paths += bench.image_paths(s, data_root, allow_outside)
        except SampleError as exc:
            unsafe.append(f"{s.sample_id}: {exc}")
            continue
        for i, path in enumerate(paths):
            if path not in seen:
                seen.add(path)
                if not path.is_file():
                    missing.append(str(path))
                elif i == 0 and s.video and probe:
                    videos.append(path)
    return DataReport(source=resolved.kind, video_root=str(resolved.video_root), records=len(items),
                      invalid_records=len(items) - len(samples), media_files=len(seen), missing=missing,
                      unsafe=unsafe, unreadable=unreadable_videos(videos))


def unreadable_videos(paths: list[Path]) -> list[str]:
    """"path: why" for each video the frame cache's decoder cannot open or count (a truncated or damaged file),
    read header-deep in parallel, as `plan` probes them."""
    from concurrent.futures import ThreadPoolExecutor

    from ..frames.errors import FrameError
    from ..workload.probe import probe_video

    def why(path: Path) -> str | None:
        try:
            probe_video(path)
        except FrameError as exc:
            return f"{path}: {exc}"
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        return [w for w in pool.map(why, paths) if w]


def run_check(args: argparse.Namespace) -> int:
    from ..benchmarks import resolve_benchmarks
    from ..benchmarks.registry import check_data_root

    check_data_root(args.data_root)
    names = [n for n in [*args.benchmarks, *(args.benchmark_list or "").split(",")] if n.strip()]
    benches = resolve_benchmarks(args.suite, names or None)
    reports = {b.id: check_benchmark(b, args.data_root, args.source, args.allow_outside_root, not args.no_probe)
               for b in benches}
    bad = [k for k, r in reports.items() if r.bad]
    if args.json:
        print(json.dumps({k: r.to_json() for k, r in reports.items()}, indent=2))
        return 1 if bad else 0
    for name, r in reports.items():
        if r.error:
            print(f"{name}: {r.error}")
            continue
        status = "ok" if name not in bad else \
            f"{len(r.missing)} missing, {len(r.unsafe)} unsafe, {len(r.unreadable)} unreadable"
        print(f"{name}: {r.records} records ({r.invalid_records} invalid), {r.media_files} media files "
              f"under {r.video_root} [{r.source}]: {status}")
        lists = {"missing": r.missing, "unsafe": r.unsafe, "unreadable": r.unreadable}
        for what, lines in lists.items():
            for line in lines[: args.show]:
                print(f"  {what}: {line}")
        hidden = sum(max(0, len(lines) - args.show) for lines in lists.values())
        if hidden:
            print(f"  ... {hidden} more (use --json for all)")
    print(check_summary(reports, bad, args))
    return 1 if bad else 0


def check_summary(reports: dict[str, DataReport], bad: list[str], args: argparse.Namespace) -> str:
    """The closing line: how many benchmarks have all their data, and what to do about the others."""
    from ..benchmarks.sources import data_root

    n, absent = len(reports), [k for k, r in reports.items() if r.error]
    root = data_root(args.data_root).root
    line = f"{n - len(bad)} of {n} benchmark(s) have all their data under {root}" + \
        ("" if root.is_dir() else " (that folder does not exist)")
    if absent:
        line += (f"; {len(absent)} have no annotation file there (give the folder with --data-root DIR or "
                 "$VBENCH_DATA_ROOT, or download a release: vbench-async data fetch NAME --data-root DIR)")
    damaged = [k for k in bad if k not in absent]
    if damaged:
        line += f"; {len(damaged)} miss or cannot read files listed above ({', '.join(damaged[:6])})"
    return line


def run_fetch(args: argparse.Namespace) -> int:
    from ..benchmarks import get_benchmark
    from ..benchmarks.fetch import fetch, plan_fetch

    card = get_benchmark(args.name).card
    plan = plan_fetch(card, args.dest, args.with_videos)
    print(f"downloading {plan.repo} ({', '.join(plan.patterns + plan.video_patterns)}) into {plan.dest}")
    dest = fetch(plan)
    print(f"done: {dest}")
    if card.sources.hub.note:
        print(f"next: {card.sources.hub.note}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    from ..legacy_records import convert_file

    if not args.src.is_file():
        raise UserError(f"no such file: {args.src}")
    report = convert_file(args.src, args.dst)
    print(f"{args.src}: {report.records} records, {report.converted} converted, {report.unchanged} already unified, "
          f"{len(report.errors)} failed -> {args.dst}")
    for err in report.errors[:20]:
        print(f"  {err}")
    return 1 if report.errors else 0
