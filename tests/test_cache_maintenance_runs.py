"""Two real `vbench-async run` commands share one frame cache while `vbench-async cache gc|compact|verify` loop.

`-m slow`. Each round runs two `run` processes (the openai backend against `FrameServer`, which answers with a digest
of the very pixels, indices and fps each request carried) over the same real mp4 files with ONE `--cache-dir`; a third
process loops `cache gc --max-gb` (500 kB or 0 by rounds: it evicts what the runs just wrote), `cache compact` (raw
and zstd by turns: every entry is rewritten each pass) and `cache verify --delete`. Even rounds start from an empty
cache (two cold runs racing to write the same keys), odd rounds reuse what gc left of the previous one. One run writes
zstd (raw first, compressed by its own background compactor), the other raw entries.

Every result line is checked against a fresh decode of its video by the project's decoder in this process (cache
key, frame indices, timestamps, size, fps, and the pixel digest the server computed). A run may record a transient
failure, which the same command, re-run, must fix; never a final failure, an exit for the environment (the issue's
"cannot write the frame cache" from gc removing a shard folder under a writer), a wrong frame, a failure record, a
corrupt entry reported by maintenance, or an exception out of it. The short default-suite variant is the API-level
`tests/test_cache_concurrency.py` (two real runs cost about 30 s a round on two cores).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from support.run_stress import (
    FrameServer,
    Truth,
    check_lines,
    digest,
    result_lines,
    run_command,
    run_spec,
    start_maintenance,
    stop_maintenance,
    truths,
    write_suite,
)

from vbench_async.frames.decode_video import decode_video
from vbench_async.frames.entry_file import EntryMissing, read_entry, write_entry
from vbench_async.frames.keys import fingerprint
from vbench_async.frames.layout import CacheLayout
from vbench_async.frames.maintenance import verify_cache

pytestmark = pytest.mark.slow

# gc's --max-gb by turns: 500 kB keeps about two of this suite's entries (the newest: gc evicts the least recently
# used), so a pass evicts most of what the runs wrote; 0 evicts every entry, the one just decoded for a question too.
MAX_GB = (0.0005, 0.0)
CODECS = ("zstd", "raw")  # what each of the two runs writes ($VBENCH_ASYNC_CACHE_CODEC)


@dataclass(frozen=True)
class Suite:
    data_map: Path
    video_of: dict[str, Path]  # sample id -> its video
    truth: dict[Path, Truth]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    data_map, video_of = write_suite(tmp_path_factory.mktemp("stress-data"), n_videos=10, questions=2)
    return Suite(data_map, video_of, truths(list(video_of.values()), run_spec()))


def _run(argv: list[str], log: Path, codec: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "VBENCH_ASYNC_CACHE_CODEC": codec})


def _maintenance_faults(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Commands that failed, raised, or called an entry corrupt (every entry here was written whole by a real
    writer, so "corrupt" means maintenance misread a good one)."""
    return [e for e in log if e["rc"] != 0 or "corrupt: " in e["output"]
            or (e["command"] in ("compact", "verify") and not re.search(r"\b0 corrupt\b", e["output"]))]


def _entries_on_disk_are_true(cache: Path, truth: dict[Path, Truth]) -> int:
    """The entries the runs left, read back against the fresh decode; returns how many there were."""
    found = 0
    for t in truth.values():
        try:
            frames, meta = read_entry(CacheLayout(cache).entry_path(t.key), t.key)
        except EntryMissing:
            continue  # evicted by gc: nothing to check
        found += 1
        assert digest(frames, list(meta.frames_indices), meta.fps) == t.digest, f"entry {t.key} differs from a decode"
    return found


def test_two_runs_share_one_cache_while_gc_compact_and_verify_loop(tmp_path: Path, suite: Suite) -> None:
    rounds = int(os.environ.get("VBENCH_RUN_STRESS_ROUNDS", "3"))
    loads, transient, reruns, passes, touched = 0, Counter[str](), 0, Counter[str](), Counter[str]()
    with FrameServer() as server:
        for r in range(rounds):
            here = tmp_path / f"round{r}"
            here.mkdir()
            cache = tmp_path / f"cache{r // 2}"  # even rounds cold; odd rounds warm on what gc left
            maintenance = start_maintenance(cache, MAX_GB[r % len(MAX_GB)], here)
            argvs = [run_command(suite.data_map, here / codec, cache, server.url) for codec in CODECS]
            runs = [_run(argv, here / f"{codec}.log", codec) for argv, codec in zip(argvs, CODECS)]
            try:
                codes = [p.wait(timeout=600) for p in runs]
            finally:  # a failed wait must not leave a run or the maintenance loop behind
                for p in runs:
                    if p.poll() is None:
                        p.kill()
                log = stop_maintenance(*maintenance)
            passes.update(e["command"] for e in log)
            for e in log:  # what maintenance did to the runs' entries (counted across rounds, checked at the end)
                for n in re.findall(r"(?:removed|rewrote) (\d+) entries", e["output"]):
                    touched[e["command"]] += int(n)
            assert _maintenance_faults(log) == [], "maintenance failed or called a good entry corrupt"
            for argv, codec, code in zip(argvs, CODECS, codes):
                out = here / codec
                lines = result_lines(out)
                got = check_lines(lines, suite.video_of, suite.truth)
                said = (here / f"{codec}.log").read_text()[-3000:]
                assert got.wrong == [], f"round {r}, {codec} run: frames differing from a fresh decode were served"
                assert got.final == [], f"round {r}, {codec} run: final failures under maintenance\n{said}"
                assert code == (1 if got.transient else 0), f"round {r}, {codec} run exited {code}\n{said}"
                loads += got.scored
                transient.update(got.transient)
                if got.transient:  # recorded as "may pass": the same command must now answer them
                    reruns += 1
                    assert _run(argv, here / f"{codec}.log", codec).wait(timeout=600) == 0, said
                    again = check_lines(result_lines(out)[len(lines):], suite.video_of, suite.truth)
                    assert (again.wrong, again.final, again.transient) == ([], [], Counter()), again
                    loads += again.scored
                last = {line["sample_id"]: line for line in result_lines(out)}
                assert sorted(last) == sorted(suite.video_of), f"round {r}, {codec} run: samples missing"
                assert [s for s, line in last.items() if line.get("error")] == []
            assert server.bad == [], "a request the server could not read"
            assert verify_cache(cache).corrupt == []
            assert list(CacheLayout(cache).failures()) == [], "a failure recorded against a good video"
            _entries_on_disk_are_true(cache, suite.truth)
    # Not vacuous: gc evicted and compact rewrote entries the runs had written, while they ran.
    assert touched["gc"] > 0 and touched["compact"] > 0 and passes["verify"] > 0, (passes, touched)
    print(f"\nrun stress: {rounds} rounds, {loads} served videos checked, transient {dict(transient)}, "
          f"{reruns} re-runs, maintenance passes {dict(passes)}, entries evicted by gc {touched['gc']}, "
          f"rewritten by compact {touched['compact']}")


def test_a_served_frame_that_differs_from_a_fresh_decode_fails_the_check(tmp_path: Path, suite: Suite) -> None:
    """The control: the stress test's check is not vacuous. An entry that is well formed, bound to its key and
    checksummed, but holds frames one pixel value off (what a cache bug would serve), is served by a real run and
    named by `check_lines` for each of that video's questions, and only those."""
    cache = tmp_path / "cache"
    video = sorted(suite.truth)[0]
    spec = run_spec()
    frames, meta = decode_video(video, spec)
    frames[0, 0, 0, 0] ^= 1
    t = suite.truth[video]
    write_entry(CacheLayout(cache).entry_path(t.key), frames, meta, "zstd", video=fingerprint(video), key=t.key)
    with FrameServer() as server:
        proc = subprocess.run(run_command(suite.data_map, tmp_path / "out", cache, server.url), cwd=REPO,
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = check_lines(result_lines(tmp_path / "out"), suite.video_of, suite.truth)
    forged = sorted(s for s, v in suite.video_of.items() if v == video)
    assert sorted(got.wrong) == [f"{s}: pixels differ from a fresh decode" for s in forged]
    assert got.scored == len(suite.video_of) - len(forged)
