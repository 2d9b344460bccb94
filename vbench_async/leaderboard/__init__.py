"""Static HTML leaderboards: result directories in, a folder of pages, CSV and JSON out (works from file://).

    build_site(run_dirs, out_dir) -> out_dir          the entry point the CLI calls (it alone writes sites)
    load_runs(run_dirs) -> list[Run]                  judged results, recomputed aggregates, CIs, markers

The site reads result directories only, through `results/` (summaries, verdicts, stats).
Modules: load (result dirs -> runs), tables (pandas tables = the exports), charts (SVG geometry), site (rendering),
samples_page (sample-browser rows, the two readings), thumbnails (frame strips), compare_pages (side-by-side views).
Templates and assets live in the top-level `leaderboards/` folder.
"""

from __future__ import annotations

from pathlib import Path

from .load import Run, load_runs


def build_site(run_dirs: list[Path], out_dir: Path, cache_dirs: list[Path] | None = None,
               frames: bool = True) -> Path:
    """Render the site for `run_dirs` into `out_dir` and return it (open `out_dir/index.html`). Frame strips come
    from `cache_dirs`, the runs' own frame caches and the default one; `frames=False` leaves them out."""
    from .site import build_site as _build  # pandas and jinja2 load only when a site is written

    return _build(run_dirs, out_dir, cache_dirs=cache_dirs, frames=frames)


__all__ = ["Run", "build_site", "load_runs"]
