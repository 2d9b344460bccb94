"""The site writes only what it owns: `leaderboard -o DIR` claims a folder only when it is empty, new or marked as a
site; a rebuild removes only files the site's own marker lists (a user's files, even under data/ and runs/, stay);
and a full disk while the site is written is the usual one-line message and exit 2, with no temporary file left
(a real tmpfs, as the results' disk-full test uses)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_leaderboard_runs import make_runs
from test_reliability_rundir import _tmpfs

from vbench_async.cli import main as cli_main
from vbench_async.errors import UserError
from vbench_async.leaderboard import build_site
from vbench_async.leaderboard.site import MARKER


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


def user_files(folder: Path) -> dict[str, str]:
    files = {"data/experiments.csv": "run,score\na,1\n", "runs/2025/notes.md": "# my notes\n",
             "static/logo.svg": "<svg/>"}  # only names a site also uses
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return files


def test_a_folder_of_the_users_is_never_claimed(runs, tmp_path: Path, capsys) -> None:
    mine = tmp_path / "V"
    mine.mkdir()
    files = user_files(mine)
    (mine / "runs" / "perfect.html").write_text("my page")  # a name the site also writes
    assert cli_main(["leaderboard", *map(str, runs), "-o", str(mine)]) == 2
    assert "holds no vbench-async site" in capsys.readouterr().err
    for rel, text in files.items():
        assert (mine / rel).read_text() == text, rel
    assert (mine / "runs" / "perfect.html").read_text() == "my page" and not (mine / MARKER).exists()


def test_a_rebuild_removes_only_what_the_site_wrote(runs, tmp_path: Path) -> None:
    site = build_site(runs, tmp_path / "V")
    listed = json.loads((site / MARKER).read_text())["files"]
    assert "runs/noisy.html" in listed and "data/runs.json" in listed
    files = user_files(site)  # the user keeps their own things beside the pages
    (site / MARKER).write_text(json.dumps({"files": [*listed, "../outside.txt", str(tmp_path / "abs.txt")]}))
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "abs.txt").write_text("x")
    build_site(runs[:1], site)
    assert not (site / "runs" / "noisy.html").exists() and (site / "runs" / "perfect.html").exists()
    for rel, text in files.items():
        assert (site / rel).read_text() == text, rel
    assert (tmp_path / "outside.txt").exists() and (tmp_path / "abs.txt").exists()
    with pytest.raises(UserError, match="is not a folder"):
        build_site(runs, site / "index.html")


def test_a_full_disk_under_the_site_is_one_message(runs, tmp_path: Path, capsys) -> None:
    size = sum(p.stat().st_size for p in build_site(runs, tmp_path / "full-size").rglob("*") if p.is_file())
    with _tmpfs(tmp_path / "small", f"{max(size // 3, 64 << 10) // 1024}k") as small:
        rc = cli_main(["leaderboard", *map(str, runs), "-o", str(small / "site")])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err, err
        assert [p for p in small.rglob("*.tmp")] == []  # the file being written when the disk filled is gone
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "cannot write the site" in lines[0] and "free some space" in lines[0], err


def test_builds_into_one_folder_take_turns(runs, tmp_path: Path) -> None:
    """A run's shards can finish together, each starting its site in the background: two builds into one folder
    must not remove each other's files (seen as "cannot write the site ... No such file or directory")."""
    site, errors = tmp_path / "V", []

    def build(which: list[Path]) -> None:
        try:
            build_site(which, site)
        except BaseException as exc:  # noqa: BLE001 - reported below, with its thread's peer
            errors.append(exc)

    for _ in range(4):
        threads = [threading.Thread(target=build, args=(which,)) for which in (runs, runs[:1], runs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    listed = json.loads((site / MARKER).read_text())["files"]
    assert "index.html" in listed and all((site / rel).is_file() for rel in listed)


def test_the_site_never_follows_a_link_inside_its_folder(runs, tmp_path: Path) -> None:
    """A linked subfolder inside a site folder (`runs` -> the user's `outside/`): a rebuild writes nothing through
    it and removes nothing behind it (the user's `outside/noisy.html` survives, and nothing new appears there); a
    link named as the writer's temporary file is never written through either."""
    site = build_site(runs, tmp_path / "V")
    outside = tmp_path / "outside"
    (site / "runs").rename(outside)  # the user keeps the run pages elsewhere, and links them back
    (site / "runs").symlink_to(outside)
    kept = {p.name: p.read_bytes() for p in outside.iterdir()}
    assert "noisy.html" in kept
    with pytest.raises(UserError, match="holds a link at runs"):
        build_site(runs[:1], site)  # before: noisy.html (listed by the last build) was deleted through the link
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept
    assert cli_main(["leaderboard", str(runs[0]), "-o", str(site)]) == 2
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept

    (site / "runs").unlink()  # the link gone: the site is built again, and a linked temporary name is not followed
    target = tmp_path / "target.txt"
    target.write_text("mine")
    (site / "index.html.tmp").symlink_to(target)
    build_site(runs[:1], site)
    assert target.read_text() == "mine" and not (site / "index.html.tmp").exists()
    assert (site / "runs" / "perfect.html").is_file() and (site / "index.html").is_file()
