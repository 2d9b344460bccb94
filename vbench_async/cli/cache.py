"""`vbench-async cache stats|verify|gc|compact`: look after a frame cache directory (no benchmarks or videos needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..homes import CACHE_DIR_HELP
from .formatting import bounded


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="inspect, check or clean the frame cache",
        description="Work on a frame cache directory: count what is in it, check every entry, or remove old entries.",
    )
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--cache-dir", type=Path, help=CACHE_DIR_HELP)

    stats = actions.add_parser("stats", help="entries, size, codecs, bytes by benchmark, recorded failures by kind")
    common(stats)
    stats.set_defaults(func=_stats)

    verify = actions.add_parser(
        "verify", help="read every entry and check its frames against its metadata",
        description="Read every entry in full and check it: file size, header, metadata against the frame tensor. "
                    "Exit code 1 if a corrupt entry is found and kept.",
    )
    common(verify)
    verify.add_argument("--delete", action="store_true", help="remove corrupt entries (they are rebuilt on next use)")
    verify.add_argument("--quick", action="store_true", help="check headers and file sizes only, not the frame bytes")
    verify.set_defaults(func=_verify)

    gc = actions.add_parser(
        "gc", help="remove stale temporary files and old or excess entries",
        description="Remove temporary files left by interrupted writes (older than an hour), then entries not used "
                    "for --older-than days and/or the least recently used ones beyond --max-gb. --failures also "
                    "forgets recorded failures, so those videos are decoded again next time.",
    )
    common(gc)
    gc.add_argument("--older-than", type=float, metavar="DAYS", help="remove entries unused for this many days")
    gc.add_argument("--max-gb", type=bounded(float, min=0),
                    help="then keep at most this many gigabytes (least recently used go)")
    gc.add_argument("--failures", action="store_true", help="also remove recorded failures")
    gc.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    gc.set_defaults(func=_gc)

    compact = actions.add_parser(
        "compact", help="rewrite uncompressed entries (from earlier versions) losslessly compressed",
        description="Rewrite every entry not yet stored with CODEC, in place: same key, the same frames (read back and "
                    "compared before moving on), replaced atomically, so runs may read the cache meanwhile.",
    )
    common(compact)
    compact.add_argument("--codec", default="zstd", choices=["zstd", "raw"], help="how to store the entries")
    compact.add_argument("--dry-run", action="store_true", help="only count what would be rewritten")
    compact.set_defaults(func=_compact)


def _root(args: argparse.Namespace) -> Path:
    from ..frames import default_cache_dir

    root = args.cache_dir or default_cache_dir()
    if not root.is_dir():
        raise UserError(f"no frame cache at {root} (give --cache-dir, or run `vbench-async preprocess` first)")
    return root


def _stats(args: argparse.Namespace) -> int:
    from ..frames.maintenance import cache_stats

    print("\n".join(cache_stats(_root(args)).lines()))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ..frames.maintenance import verify_cache

    report = verify_cache(_root(args), remove=args.delete, deep=not args.quick)
    for path, reason in report.corrupt:
        print(f"corrupt: {path}: {reason}")
    print(f"checked {report.checked} entries: {len(report.corrupt)} corrupt, {report.removed} removed")
    return 1 if len(report.corrupt) > report.removed else 0


def _gc(args: argparse.Namespace) -> int:
    from ..frames.disk_budget import gb_to_bytes
    from ..frames.maintenance import gc_cache

    report = gc_cache(
        _root(args),
        older_than_days=args.older_than,
        max_bytes=gb_to_bytes(args.max_gb) if args.max_gb is not None else None,
        failures=args.failures,
        dry_run=args.dry_run,
    )
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {report.entries} entries ({report.bytes / 1e6:.1f} MB), {report.failures} failure records, "
          f"{report.temp_files} temporary files")
    return 0


def _compact(args: argparse.Namespace) -> int:
    from ..frames.maintenance import compact_cache

    report = compact_cache(_root(args), args.codec, dry_run=args.dry_run)
    if args.dry_run:
        print(f"would rewrite {report.rewritten} entries ({report.bytes_before / 1e6:.1f} MB); "
              f"{report.kept} already {args.codec}, {report.corrupt} corrupt")
        return 0
    print(f"rewrote {report.rewritten} entries: {report.bytes_before / 1e6:.1f} MB -> "
          f"{report.bytes_after / 1e6:.1f} MB; {report.kept} already {args.codec}, {report.corrupt} corrupt removed")
    return 0
