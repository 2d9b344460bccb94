"""Your own benchmarks: cards and suites from folders outside the package (`--include`, $VBENCH_ASYNC_INCLUDE), held
to the built-in cards' checks, with clear errors for a taken id; `new-benchmark --from-records` writes a starter card
that `data validate` accepts; and one included benchmark runs end to end on the real engine (the shared server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import SERVER_GROUP, run_cli, served_args
from support.videos import write_video

from vbench_async.benchmarks import get_benchmark, include, list_benchmarks, list_suites, resolve_benchmarks
from vbench_async.benchmarks.card_check import check_card
from vbench_async.benchmarks.starter import starter_card
from vbench_async.cli import main as cli_main
from vbench_async.errors import UserError

CARD = {"id": "my-clips", "name": "My clips", "sources": {"unified": {"annotation": "my.jsonl", "video_dir": "v"}},
        "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy"}


@pytest.fixture(autouse=True)
def no_includes(monkeypatch):
    """Each test starts with no included folder and leaves none behind (the registry is process-wide)."""
    monkeypatch.setattr(include, "_added", [])
    monkeypatch.delenv(include.INCLUDE_ENV, raising=False)


def write_card(folder: Path, card: dict, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or card['id']}.yaml"
    path.write_text(yaml.safe_dump(card), encoding="utf-8")
    return path


def records(n: int = 4) -> list[dict]:
    """Own fixture records: colour questions (multiple choice) and motion questions (yes/no) on clips c0.mp4 ..."""
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append({"problem_id": f"c{i}", "problem": "Which colour fills the frame?", "problem_type": "mcq",
                        "options": ["A. grey", "B. red", "C. green"], "solution": "<answer>A</answer>",
                        "path": f"c{i}.mp4", "place": ["lab", "street"][i // 2 % 2]})
        else:
            out.append({"problem_id": f"c{i}", "problem": "Does anything move?", "problem_type": "yes/no",
                        "solution": "no", "path": f"c{i}.mp4", "place": ["lab", "street"][i // 2 % 2]})
    return out


def write_records(path: Path, recs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def test_an_included_card_and_suite_join_the_registry(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    write_card(folder, CARD)
    (folder / "suites").mkdir()
    (folder / "suites" / "mine.yaml").write_text(yaml.safe_dump({"benchmarks": ["my-clips", "demo-mc"]}))
    assert "my-clips" not in list_benchmarks()
    include.add_include(folder)
    assert "my-clips" in list_benchmarks() and "mine" in list_suites()
    assert get_benchmark("my-clips").card.file == folder.resolve() / "my-clips.yaml"
    assert [b.id for b in resolve_benchmarks("mine", None)] == ["my-clips", "demo-mc"]


def test_the_environment_variable_names_folders_like_path(tmp_path: Path, monkeypatch) -> None:
    write_card(tmp_path / "a", CARD)
    write_card(tmp_path / "b", {**CARD, "id": "other-clips"})
    monkeypatch.setenv(include.INCLUDE_ENV, f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert {"my-clips", "other-clips"} <= set(list_benchmarks())
    monkeypatch.setenv(include.INCLUDE_ENV, str(tmp_path / "nope"))
    with pytest.raises(UserError, match=r"\$VBENCH_ASYNC_INCLUDE: .*nope is not a folder"):
        list_benchmarks()


@pytest.mark.parametrize("clash", ["builtin", "two-folders"])
def test_a_taken_id_is_an_error_naming_both_files(tmp_path: Path, clash: str) -> None:
    if clash == "builtin":
        path = write_card(tmp_path / "a", {**CARD, "id": "videomme"})
        include.add_include(tmp_path / "a")
        pattern = rf"{path}: benchmark id 'videomme' is already used by .*benchmarks/videomme.yaml"
    else:
        first = write_card(tmp_path / "a", CARD)
        path = write_card(tmp_path / "b", CARD)
        include.add_include(tmp_path / "a", tmp_path / "b")
        pattern = rf"{path.resolve()}: benchmark id 'my-clips' is already used by {first.resolve()}"
    with pytest.raises(UserError, match=pattern):
        get_benchmark("my-clips")


def test_a_suite_id_clash_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a" / "suites").mkdir(parents=True)
    (tmp_path / "a" / "suites" / "demo.yaml").write_text("benchmarks: [demo-mc]\n")
    include.add_include(tmp_path / "a")
    with pytest.raises(UserError, match="suite id 'demo' is already used by"):
        list_suites()


@pytest.mark.parametrize("change,message", [
    ({"prompt": "no_such_template"}, "unknown prompt template 'no_such_template'"),
    ({"task_types": ["interpretive dance"]}, "task type 'interpretive dance' is unknown to the scorers"),
    ({"task_types": ["multiple choice", "boolean"], "prompt": {"multiple choice": "multiple_choice"}},
     "no prompt template for task type 'boolean'"),
    ({"quirks": ["nope"]}, "unknown quirk"),
    ({"aggregation": {"kind": "median"}}, "unknown aggregation kind 'median'"),
    ({"frames": {"min_pixels": 999999, "max_pixels": 100}}, "invalid frame settings"),
    ({"colour": "red"}, "colour; known"),
])
def test_included_cards_get_the_built_in_checks(tmp_path: Path, change: dict, message: str) -> None:
    path = write_card(tmp_path / "a", {**CARD, **change})
    include.add_include(tmp_path / "a")
    with pytest.raises(UserError, match=f"{path.resolve()}.*{message}"):
        list_benchmarks()


def test_every_built_in_card_passes_the_same_checks() -> None:
    for name in list_benchmarks():
        check_card(get_benchmark(name).card)


def test_the_starter_card_detects_task_types_prompt_metric_and_categories(tmp_path: Path) -> None:
    recs = write_records(tmp_path / "data" / "my.jsonl", records(6))
    card = starter_card("my-clips", recs, data_root=tmp_path / "data")
    assert card["task_types"] == ["mcq", "yes/no"]  # spelled as the records spell them, most frequent first
    assert card["prompt"] == {"mcq": "multiple_choice", "yes/no": "yes_no"}
    assert card["metric"] == "accuracy" and card["aggregation"] == {"kind": "micro"}
    assert card["categories"] == ["place"]
    assert card["sources"]["unified"] == {"annotation": "my.jsonl", "video_dir": "."}  # relative to the data root
    grounding = write_records(tmp_path / "tg.jsonl", [{"problem_type": "temporal grounding", "problem": "When?",
                                                       "solution": "<answer>1.0 - 2.0</answer>", "path": "x.mp4"}])
    card = starter_card("tg", grounding)
    assert card["prompt"] == "temporal_grounding" and card["aggregation"]["kind"] == "temporal_grounding"
    assert Path(card["sources"]["unified"]["annotation"]).is_absolute()  # no data root: absolute paths


@pytest.mark.parametrize("recs,name,message", [
    ([{"problem_type": "interpretive dance", "solution": "x"}], "ok", "problem type 'interpretive dance' is unknown"),
    ([{"problem": "no type", "solution": "x"}], "ok", "a record has no problem_type"),
    ([], "ok", "no records"),
    ([{"problem_type": "mcq", "solution": "A"}], "Bad Name", "must be lowercase"),
])
def test_the_starter_card_refuses_what_it_cannot_score(tmp_path: Path, recs, name, message) -> None:
    path = write_records(tmp_path / "r.jsonl", recs)
    with pytest.raises(UserError, match=message):
        starter_card(name, path)


def test_new_benchmark_writes_a_card_data_validate_accepts(tmp_path: Path, capsys) -> None:
    recs = write_records(tmp_path / "data" / "my.jsonl", records(4))
    cards = tmp_path / "cards"
    assert cli_main(["new-benchmark", "my-clips", "--from-records", str(recs), "-o", str(cards)]) == 0
    assert (cards / "my-clips.yaml").is_file()
    assert cli_main(["new-benchmark", "my-clips", "--from-records", str(recs), "-o", str(cards)]) == 2  # exists
    assert cli_main(["data", "validate", str(recs), "--benchmark", "my-clips", "--include", str(cards)]) == 0
    assert "4 records, 4 valid, 0 invalid" in capsys.readouterr().out


def test_new_benchmark_refuses_a_line_it_cannot_read(tmp_path: Path, capsys) -> None:
    recs = tmp_path / "my.jsonl"
    good = "".join(json.dumps(r) + "\n" for r in records(4))
    recs.write_text(good + json.dumps(records(6)[5])[:30] + "\n" + "[1, 2]\n")  # a cut line, a list: not records
    assert cli_main(["new-benchmark", "my-clips", "--from-records", str(recs), "-o", str(tmp_path / "cards")]) == 2
    err = capsys.readouterr().err
    assert "2 record(s) cannot be read: line 5 is not valid JSON" in err and "record #5 is a list" in err
    assert "No card was written" in err and not (tmp_path / "cards" / "my-clips.yaml").exists()


@pytest.fixture(scope="session")
def my_clips(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A data root with 4 generated clips and their records, and a frame cache for them: (data, records, cache).
    Session-wide, so the server test (tests/test_serve.py) finds their frames already cached."""
    base = tmp_path_factory.mktemp("my-clips")
    recs = write_records(base / "data" / "my.jsonl", records(4))
    for r in records(4):
        write_video(base / "data" / r["path"], seconds=2, fps=8, width=96, height=64)
    return base / "data", recs, base / "cache"


def included_run_args(cards: Path, data: Path, cache: Path) -> tuple[str, ...]:
    return ("--include", str(cards), "--benchmarks", "my-clips", "--data-root", str(data), "--max-tokens", "8",
            "--no-progress", "--no-site", "--workers", "1", "--cache-dir", str(cache))


@pytest.mark.vllm
@SERVER_GROUP
def test_an_included_benchmark_validates_and_runs_end_to_end(vllm_server, my_clips, tmp_path: Path, capsys) -> None:
    data, recs, cache = my_clips
    cards = tmp_path / "cards"
    assert cli_main(["new-benchmark", "my-clips", "--from-records", str(recs), "--data-root", str(data), "-o",
                     str(cards)]) == 0
    assert cli_main(["data", "validate", str(recs), "--benchmark", "my-clips", "--include", str(cards)]) == 0
    assert "4 records, 4 valid, 0 invalid" in capsys.readouterr().out
    run = run_cli("run", "--model", "tiny-qwen2.5-vl", *served_args(vllm_server),
                  *included_run_args(cards, data, cache), "--output-dir", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    block = summary["benchmarks"]["my-clips"]
    assert summary["complete"] and block["n_total"] == 4 and block["n_failed"] == 0
    assert set(block["by_place"]) == {"lab", "street"}
