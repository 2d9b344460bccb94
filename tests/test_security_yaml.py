"""Cards and configs are read with bounded work (issue 37): a YAML alias bomb in a user card (it passed `safe_load`
and grew a run to 3.3 GB) and a card or training config nested 50,000 deep (a RecursionError traceback) are refused
with a message naming the file; the command says so and exits, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from vbench_async.benchmarks import include, list_benchmarks
from vbench_async.cli import main as cli_main
from vbench_async.errors import UserError

CARD = ('id: my-clips\nname: My clips\nsources: {unified: {annotation: my.jsonl, video_dir: v}}\n'
        'task_types: [multiple choice]\nprompt: multiple_choice\nmetric: accuracy\n')
# Nine levels of nine aliases each: 9**9 (387 million) leaves once expanded.
BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else 'x'}]\n" for i in range(10))
DEEP = "[" * 50_000 + "]" * 50_000


@pytest.fixture(autouse=True)
def no_includes(monkeypatch):
    monkeypatch.setattr(include, "_added", [])
    monkeypatch.delenv(include.INCLUDE_ENV, raising=False)


@pytest.mark.parametrize("extra,message", [
    ("aggregation:\n  " + BOMB.replace("\n", "\n  ").rstrip() + "\n", "aliases are not allowed"),
    (f"aggregation: {DEEP}\n", "nested deeper than"),
], ids=["alias-bomb", "nested-50000"])
def test_a_hostile_card_is_refused_naming_its_file(tmp_path: Path, extra: str, message: str, capsys) -> None:
    folder = tmp_path / "cards"
    folder.mkdir()
    path = folder / "my-clips.yaml"
    path.write_text(CARD + extra, encoding="utf-8")
    include.add_include(folder)
    with pytest.raises(UserError, match=f"{path.name}.*{message}"):
        list_benchmarks()
    assert cli_main(["list", "--include", str(folder)]) != 0
    err = capsys.readouterr().err
    assert path.name in err and message in err and "Traceback" not in err and "RecursionError" not in err, err[-2000:]


@pytest.mark.parametrize("text,message", [(BOMB, "aliases are not allowed"), (f"rollout: {DEEP}\n", "nested deeper")],
                         ids=["alias-bomb", "nested-50000"])
def test_a_hostile_training_config_is_refused_naming_its_file(tmp_path: Path, text: str, message: str) -> None:
    from vbench_async.train.config import load_config

    path = tmp_path / "train.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=f"{path.name}.*{message}"):
        load_config(path)
    with pytest.raises(UserError, match="override.*nested deeper"):
        load_config(None, [f"rollout.n={'[' * 5000}"])


def test_plain_cards_and_anchors_without_aliases_still_load() -> None:
    from vbench_async import yaml_bounded

    assert yaml_bounded.load(CARD + "extra: &a {k: [1, 2]}\n")["extra"] == {"k": [1, 2]}
    assert yaml_bounded.load("[" * 60 + "]" * 60) is not None


def test_a_yaml_error_names_line_and_column_but_never_quotes_the_file(tmp_path: Path) -> None:
    # A server job naming someone's private file as its suite got back a line of that file in its error.
    from vbench_async.benchmarks.registry import load_suite

    path = tmp_path / "credentials"
    path.write_text("user: alice\npassword: hunter2-secret: x\n", encoding="utf-8")
    with pytest.raises(UserError) as info:
        load_suite(path)
    message = str(info.value)
    assert str(path) in message and "line 2" in message and "hunter2" not in message, message
