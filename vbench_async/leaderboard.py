"""Static HTML leaderboard: a pure function of result directories (their summary.json files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import UserError
from .resources import data_dir


def load_runs(run_dirs: list[Path]) -> list[dict[str, Any]]:
    runs = []
    for d in run_dirs:
        f = Path(d) / "summary.json"
        if not f.exists():
            raise UserError(f"{d} is not a result directory (no summary.json)")
        runs.append({"dir": str(d), **json.loads(f.read_text(encoding="utf-8"))})
    return runs


def build_site(run_dirs: list[Path], out_dir: Path) -> Path:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    runs = load_runs(run_dirs)
    benchmarks = sorted({b for r in runs for b in r["benchmarks"]})
    env = Environment(
        loader=FileSystemLoader(str(data_dir("leaderboards"))),
        autoescape=select_autoescape(["html", "j2"]),  # model outputs and questions are shown as text, never HTML
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    html = env.get_template("index.html.j2").render(runs=runs, benchmarks=benchmarks)
    (out_dir / "index.html").write_text(html, encoding="utf-8")
    return out_dir
