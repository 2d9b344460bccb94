"""Write the static site: pages from the jinja2 templates in `leaderboards/`, the tables as CSV and JSON, the assets.

A pure function of the result directories (and of the frames their lines name, read from the frame cache or the
videos for the thumbnails): no clock, no network, no absolute paths in the pages, so the same runs give byte-identical
sites. Everything shown is escaped (autoescape on every template); data for the scripts is embedded as
JSON in `<script type="application/json">` with `<`, `>` and `&` written as \\u escapes, so no result text (a model
output holding `</script>`, say) can end the block. The pages work from file://: the scripts read embedded data, never
fetch it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import Markup

from ..errors import UserError
from ..record_io import OutputRecord, RecordError, always
from ..redact import scrub
from ..resources import data_dir
from ..results.manifest_record import GpuInfo, Manifest
from ..results.rundir import safe_name
from . import board, tables
from .charts import diff_chart, score_chart
from .compare_pages import budget_chart, pair_sections, pairs
from .csv_cells import csv_text, safe_cell
from .families import run_family
from .load import Run, benchmark_ids, load_runs
from .model_facts import band_order, shown_columns
from .names import breakable, shorten
from .samples_page import category_options, reading_scores, sample_rows
from .thumbnails import MEMO, Thumbnailer, load_memo

if TYPE_CHECKING:
    from jinja2 import Environment

# Says "this folder is ours" and lists every file the last build wrote: only those are ever removed (a file a user
# put in the folder, even under data/ or runs/, is never touched).
MARKER = ".vbench-async-site"


def json_script(obj: Any) -> Markup:
    """JSON that is safe inside a <script> element (and in HTML generally)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str, allow_nan=False)
    for raw, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                     ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return Markup(text)


def pct(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * float(value):.{digits}f}"


def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(data_dir("leaderboards"))), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(json_script=json_script, pct=pct, slug=slug, badge=board.badge, breakable=breakable,
                       shorten=shorten, recipe_tag=board.recipe_tag)
    return env


def slug(benchmark_id: str) -> str:
    return safe_name(benchmark_id).replace("@", "_at_")


def build_site(run_dirs: list[Path], out_dir: Path, cache_dirs: list[Path] | None = None,
               frames: bool = True) -> Path:
    """Render the site for `run_dirs` into `out_dir`; returns `out_dir` (open `out_dir/index.html`).

    Frame strips are made from the frame caches in `cache_dirs`, the runs' own caches (their manifests say where) and
    the default cache, in that order; `frames=False` leaves them out."""
    if not run_dirs:
        raise UserError("give at least one result directory")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)  # a new folder is an empty one: what the lock needs to exist
    except OSError as exc:
        raise _unwritable(out_dir, exc) from None
    with _one_writer(out_dir):  # claimed, and the last build's files read, once the folder is ours alone
        _claim(out_dir)
        return _build(run_dirs, out_dir, _listed(out_dir), cache_dirs, frames)


@contextmanager
def _one_writer(out_dir: Path) -> Iterator[None]:
    """Builds into one folder take turns: a run's shards can finish together and each start its site, and two
    builds at once remove each other's files. The lock is on the folder itself, so nothing is added to it."""
    fd = os.open(out_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _build(run_dirs: list[Path], out_dir: Path, previous: set[Path], cache_dirs: list[Path] | None,
           frames: bool) -> Path:
    runs = load_runs([Path(d) for d in run_dirs])
    writer = _Writer(out_dir)
    env = environment()
    bids = benchmark_ids(runs)
    thumbs = Thumbnailer(writer.bytes, _cache_roots(runs, cache_dirs), reuse=load_memo(out_dir),
                         keep=writer.keep) if frames else None

    cells = tables.board_of(runs)  # the one keyed structure the board, its charts and its exports are drawn from
    writer.table("leaderboard", cells.frame())
    readings = {(r.id, bid): reading_scores(b) for r in runs for bid, b in r.benchmarks.items()}
    pair_list = pairs(runs)
    pages = []
    for bid in bids:
        pages.append(_benchmark_page(env, writer, runs, bid, thumbs, readings, {p.slug for p in pair_list}))
    compares = []
    for pair in pair_list:
        sections = pair_sections(pair, thumbs)
        if sections:
            compares.append({"slug": pair.slug, "a": pair.a, "b": pair.b,
                             "n_flipped": sum(s["n_flipped"] for s in sections)})
            writer.text(f"compare/{pair.slug}.html", env.get_template("compare.html.j2").render(
                root="../", a=pair.a, b=pair.b, sections=sections))
    writer.json("data/runs.json", [{"run": r.id, "model": r.label, "dir_name": r.dir.name,
                                    "summary": r.summary.to_json(), "manifest": scrub(_manifest_json(r))}
                                   for r in runs])  # older manifests held keys
    for r in runs:
        writer.text(f"runs/{r.id}.html", env.get_template("run.html.j2").render(
            root="../", run=r, facts=_facts(r), manifest_text=_pretty(scrub(_manifest_json(r))),
            summary_text=_pretty(r.summary.to_json())))
    writer.text("index.html", render_index(env, runs, cells, readings, pages, compares))
    static = data_dir("leaderboards") / "static"
    for f in sorted(static.iterdir()):
        if f.is_file():
            writer.bytes(f"static/{f.name}", f.read_bytes())
    if thumbs is not None:
        writer.json(MEMO, thumbs.memo())
    writer.finish(previous)
    return out_dir


def _card(bid: str) -> Any:
    from ..benchmarks import get_benchmark

    try:
        return get_benchmark(bid).card
    except UserError:
        return None


def _cache_roots(runs: list[Run], given: list[Path] | None) -> list[Path]:
    from ..homes import default_cache_dir

    found = [Path(p) for p in given or []]
    for r in runs:
        cache = r.manifest.run_config.cache_dir if r.manifest is not None else None
        if isinstance(cache, str) and cache:
            found.append(Path(cache).expanduser())
    found.append(default_cache_dir())
    return list(dict.fromkeys(found))


def _benchmark_page(env: Environment, writer: _Writer, runs: list[Run], bid: str, thumbs: Thumbnailer | None,
                    readings: dict[tuple[str, str], dict[str, Any]], compare_slugs: set[str]) -> dict[str, Any]:
    s = slug(bid)
    cats, paired = tables.category_table(runs, bid), tables.paired_table(runs, bid)
    samples = tables.samples_table(runs, bid)
    writer.table(f"{s}.categories", cats)
    writer.table(f"{s}.paired", paired)
    writer.table(f"{s}.samples", samples)
    holders = [r for r in runs if bid in r.benchmarks]
    cells = [(r, r.benchmarks[bid]) for r in holders]
    chart = score_chart(f"{bid}: score with 95% CI", [
        (r.label, b.score, b.estimate.ci_low if b.estimate else None, b.estimate.ci_high if b.estimate else None,
         bool(b.markers)) for r, b in cells])
    paired_rows = tables.records(paired)
    dchart = diff_chart(f"{bid}: paired difference to {holders[0].label} (95% CI)", [
        (p["model"], p["diff"], p["diff_ci_low"], p["diff_ci_high"], bool(p["config_differs"]))
        for p in paired_rows]) if paired_rows else None
    breakdowns: dict[str, list[dict[str, Any]]] = {}
    for row in tables.records(cats):
        breakdowns.setdefault(row["breakdown"], []).append(row)
    info = {"id": bid, "slug": s, "n_runs": len(holders)}
    rows = sample_rows(tables.records(samples), [x for r in holders for x in r.benchmarks[bid].results], _card(bid),
                       thumbs)
    writer.text(f"benchmarks/{s}.html", env.get_template("benchmark.html.j2").render(
        root="../", bench=info, cells=cells, chart=chart, dchart=dchart, paired=paired_rows,
        breakdowns={k: _pivot(v, holders) for k, v in breakdowns.items()}, runs=holders,
        readings={r.id: readings[(r.id, bid)] for r in holders}, budget=budget_chart(bid, holders),
        compare_slugs=compare_slugs))
    writer.text(f"samples/{s}.html", env.get_template("samples.html.j2").render(
        root="../", bench=info, runs=holders, rows=rows, categories=category_options(rows),
        labels={r.id: r.label for r in holders}))
    return info


def _pivot(rows: list[dict[str, Any]], runs: list[Run]) -> list[dict[str, Any]]:
    """Category rows -> one row per group with a cell per run."""
    by_group: dict[str, dict[str, Any]] = {}
    for row in rows:
        g = by_group.setdefault(row["group"], {"group": row["group"], "cells": {}})
        g["cells"][row["run"]] = row
    return [{"group": g["group"], "cells": [g["cells"].get(r.id) for r in runs]} for g in by_group.values()]


def render_index(env: Environment, runs: list[Run], cells: tables.Board,
                 readings: dict[tuple[str, str], dict[str, Any]], pages: list[dict[str, Any]],
                 compares: list[dict[str, Any]]) -> str:
    """The index page: the board table, its chance row and the average charts, every cell looked up in `cells` by
    (run, column id)."""
    columns = [{"id": c.id, "kind": c.kind, "slug": slug(c.id) if c.kind == "benchmark" else None}
               for c in cells.columns]
    views = board.groups(columns, cells.suites)
    grid = _grid(cells, readings)
    board.rank(grid, views)
    return env.get_template("index.html.j2").render(
        root="", runs=runs, benchmarks=pages, grid=grid, columns=columns, views=views,
        meta_columns=shown_columns([row["facts"] for row in grid]),
        sizes=band_order({row["size"] for row in grid}),
        chances=board.chances(runs, columns, cells.suites), suite_charts=_suite_charts(cells), compares=compares,
        random_weights=[r.label for r in runs if r.summary.random_weights])


def index_html(runs: list[Run], env: Any = None) -> str:
    """The index page alone for loaded `runs` (as `build_site` writes it, without the side-by-side links): a board to
    check or preview without writing the whole site. Its links and assets are relative to the site's root. `env`: an
    `environment()` to reuse (its templates are compiled once)."""
    cells = tables.board_of(runs)
    readings = {(r.id, bid): reading_scores(b) for r in runs for bid, b in r.benchmarks.items()}
    pages = [{"id": bid, "slug": slug(bid), "n_runs": sum(bid in r.benchmarks for r in runs)}
             for bid in benchmark_ids(runs)]
    return render_index(env or environment(), runs, cells, readings, pages, [])


def _grid(cells: tables.Board, readings: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the index table in `cells`' row order (grouped by model family): per run, column id -> cell."""
    rows = [{"run": r, "family": run_family(r),
             "cells": {cid: {**tables.plain_row(c), "readings": readings.get((r.id, cid))}
                       for cid, c in cells.cells[r.id].items()}}
            for r in cells.runs]
    board.lay_out(rows, [c.id for c in cells.columns])
    return rows


def _suite_charts(cells: tables.Board) -> list[Any]:
    charts = []
    for col in cells.columns:
        if col.kind == "suite":
            charts.append(score_chart(f"{col.id.removeprefix('avg: ')}: mean score with 95% CI",
                                      [tables.ScoreCell.of(c).chart_item() for _, c in cells.column(col.id)]))
    return charts


def _manifest_json(run: Run) -> dict[str, Any] | None:
    return run.manifest.to_json() if run.manifest is not None else None


def _facts(run: Run) -> list[tuple[str, str]]:
    m = run.manifest or Manifest()
    model, backend, hw = m.model, m.backend, m.hardware
    gpus = ", ".join(str(g.name) if isinstance(g, GpuInfo) else str(g) for g in hw.gpus)
    judge = m.judge if m.judge is not None and m.judge.to_json() else None
    facts = [
        ("model", str(model.name or run.model)), ("model path", str(model.path or "–")),
        ("fingerprint", str(model.fingerprint or "–")), ("revision", str(model.revision or "–")),
        ("backend", str(backend.name or "–")), ("evaluation recipe", run.recipe or "–"),
        ("sampling", json.dumps(m.sampling, sort_keys=True)),
        ("git commit", str(m.git_commit or "–")),
        ("hardware", f"{hw.cpu_model or hw.machine or '–'}, {hw.cpus or '?'} CPUs" + (f"; {gpus}" if gpus else "")),
        ("started", str(m.started_at or "–")), ("finished", str(m.finished_at or "–")),
        ("judge", f"{judge.judge_id} (prompt {judge.prompt_hash})" if judge else "none"),
    ]
    return facts


def _pretty(obj: Any) -> str:
    return "(none)" if obj is None else json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _claim(out_dir: Path) -> None:
    """Take the folder `out_dir` for the site (it must be empty or hold the marker)."""
    marker = out_dir / MARKER
    if not marker.exists() and any(out_dir.iterdir()):
        raise UserError(f"{out_dir} is not empty and holds no vbench-async site (no {MARKER} file); choose an empty "
                        "or new folder")
    try:
        if not marker.exists():  # claimed before anything is written: a build stopped half-way is still ours
            _write_marker(out_dir, [])
    except OSError as exc:
        raise _unwritable(out_dir, exc) from None


def _listed(root: Path) -> set[Path]:
    """The files the marker lists, each inside `root` (a marker edited to name anything else is ignored there)."""
    try:
        files = SiteMarker.from_json(json.loads((root / MARKER).read_text(encoding="utf-8")), MARKER).files
    except (OSError, ValueError, RecordError):
        return set()  # an older site's marker (plain text) lists nothing: nothing of it is removed
    out = set()
    for rel in files:
        if rel and not Path(rel).is_absolute() and ".." not in Path(rel).parts:
            out.add(root / rel)
    return out


@dataclass
class SiteMarker(OutputRecord):
    """The file that marks a folder as a site this tool wrote, listing the files it wrote (the next build removes
    those it no longer writes, and nothing else)."""

    written_by: str = always("vbench-async leaderboard; safe to delete with the folder")
    files: list[str] = always(default_factory=list)


def _write_marker(root: Path, files: list[str]) -> None:
    text = json.dumps(SiteMarker(files=sorted(files)).to_json(), indent=1) + "\n"
    _atomic(root / MARKER, text.encode("utf-8"))


def _atomic(path: Path, data: bytes) -> None:
    """Write `data` under a temporary name, then rename it into place (over a link: the link itself is replaced); no
    temporary file is left if it fails. The temporary file is created new, never opened through a link."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)  # a link (or a stale file) of that name: removed itself, never written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _unwritable(root: Path, exc: OSError) -> UserError:
    """One line for a destination that cannot take the site (exit 2), as `leaderboard` words it for any OSError."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return UserError(f"cannot write the site to {root}: {exc.strerror or exc}; "
                     + ("free some space and build it again" if full else "choose a writable -o folder"))


class _Writer:
    """Writes files under the site folder and remembers them, to remove pages of runs no longer shown."""

    def __init__(self, root: Path):
        self.root = root
        self.written: set[Path] = set()

    def bytes(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        linked = _linked_folder(self.root, path)
        if linked is not None:
            raise UserError(f"{self.root} holds a link at {linked.relative_to(self.root)}: the site never writes "
                            "through links inside its folder; remove the link (or choose another -o folder)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink() or not path.exists() or path.read_bytes() != data:  # unchanged files keep their mtime
                _atomic(path, data)
        except OSError as exc:  # a full disk: one message, exit 2 (as for the results), no temporary file left
            raise _unwritable(self.root, exc) from None
        self.written.add(path)

    def keep(self, rel: str) -> bool:
        """Keep a file the last build wrote as part of this one (unread: its name is the hash of its bytes); False
        when it is gone."""
        path = self.root / rel
        if _linked_folder(self.root, path) is not None or path.is_symlink() or not path.is_file():
            # a link placed in the folder is replaced, never published
            return False
        self.written.add(path)
        return True

    def text(self, rel: str, text: str) -> None:
        self.bytes(rel, text.encode("utf-8"))

    def json(self, rel: str, obj: Any) -> None:
        self.text(rel, json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True, default=str) + "\n")

    def table(self, name: str, df: pd.DataFrame) -> None:
        """CSV (nested values as JSON text) and JSON (records) of one table."""
        flat = df.copy()
        for col in flat.columns:
            if flat[col].map(lambda v: isinstance(v, (list, dict))).any():
                flat[col] = flat[col].map(lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True)
                                          if isinstance(v, (list, dict)) else v)
            if not pd.api.types.is_numeric_dtype(flat[col]):
                flat[col] = flat[col].map(safe_cell)  # a spreadsheet must not run model output as a formula
        self.text(f"data/{name}.csv", csv_text(flat))
        self.json(f"data/{name}.json", tables.records(df))

    def finish(self, previous: set[Path]) -> None:
        """List what this build wrote in the marker, then remove what the last build wrote and this one did not."""
        try:
            _write_marker(self.root, [str(p.relative_to(self.root)) for p in self.written])
        except OSError as exc:
            raise _unwritable(self.root, exc) from None
        for path in sorted(previous - self.written):
            if _linked_folder(self.root, path) is not None:  # inside a linked folder: what it points to is not ours
                continue
            if path.is_file() or path.is_symlink():  # a link itself, never what it points to
                path.unlink()


def _linked_folder(root: Path, path: Path) -> Path | None:
    """The first folder between `root` (excluded) and `path` (excluded) that is a link, or None: the site never
    writes or removes anything through a link inside its folder (it may point anywhere)."""
    folder = root
    for part in path.relative_to(root).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return folder
    return None
