"""A non-editable install (a built wheel) still finds the benchmark cards and the leaderboard templates."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from conftest import REPO


def test_wheel_carries_cards_and_templates(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("vbench_async-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "vbench_async/_data/benchmarks/videomme.yaml" in names
    assert "vbench_async/_data/benchmarks/suites/all.yaml" in names
    assert any(n.startswith("vbench_async/_data/leaderboards/") and n.endswith(".j2") for n in names)
    assert "vbench_async/benchmarks/prompts/multiple_choice.jinja" in names or any(
        n.startswith("vbench_async/benchmarks/prompts/") for n in names)

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    probe = (
        "import vbench_async, vbench_async.resources as r;"
        "from vbench_async.benchmarks import list_benchmarks, get_benchmark;"
        f"assert vbench_async.__file__.startswith({str(target)!r}), vbench_async.__file__;"
        "print(r.data_dir('benchmarks')); print(r.data_dir('leaderboards')); print(len(list_benchmarks()));"
        "print(get_benchmark('videomme').render_prompt.__name__)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    bench_dir, site_dir, count, _ = out.stdout.split()
    assert bench_dir.startswith(str(target)) and site_dir.startswith(str(target))
    assert int(count) >= 22
