"""The registry: every card and suite loads, is consistent with the scorers, templates and frame specs, and bad
cards, names and suites fail with messages that say what is wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from vbench_async.benchmarks import get_benchmark, list_benchmarks, list_suites, load_suite, resolve_benchmarks
from vbench_async.benchmarks.cards import load_card_and_data, parse_card
from vbench_async.benchmarks.prompts import template_names
from vbench_async.benchmarks.quirks import HUB_HOOKS, SAMPLE_HOOKS
from vbench_async.errors import UserError
from vbench_async.models import family_ref
from vbench_async.resources import data_dir
from vbench_async.scoring import canonical_task_type

REAL = [
    "holmes", "lvbench", "longvideobench", "mmvu", "mvbench", "tempcompass", "vsibench", "videommmu", "mlvu",
    "videomme", "videomathqa", "vcrbench", "videoreasonbench", "longvideoreason", "minerva", "stvg", "charades_sta",
    "motionbench", "ovobench", "odvbench", "livesports3k_qa", "videommlu",
]


def test_the_22_benchmarks_are_registered_and_suite_all_lists_them_in_order() -> None:
    assert set(REAL) <= set(list_benchmarks())
    assert [b.id for b in resolve_benchmarks("all", None)] == REAL


@pytest.mark.parametrize("name", REAL)
def test_card_is_consistent(name: str) -> None:
    bench = get_benchmark(name)
    card = bench.card
    assert card.id == name and card.name and card.description and card.metric
    assert card.sources.unified is not None, "every real benchmark reads the predecessor's files"
    # every task type is known to the scorers and has a template
    for task_type in card.task_types:
        canonical = canonical_task_type(task_type)
        assert card.template_for(task_type, canonical) in template_names()
    assert set(card.quirks) <= set(SAMPLE_HOOKS)
    if card.sources.hub is not None:
        assert card.sources.hub.hook is None or card.sources.hub.hook in HUB_HOOKS
    # the default frames and every preset make a valid FrameSpec for both model families
    for family in ("qwen3-vl", "qwen2.5-vl"):
        spec = bench.frame_spec(family_ref(family))
        assert spec.max_frames == card.frames.max_frames
        for preset in card.presets:
            get_benchmark(f"{name}@{preset}").frame_spec(family_ref(family))
    assert len(bench.prompt_template_hash()) == 16


def test_card_suites_agree_with_suite_files() -> None:
    for suite in list_suites():
        names = load_suite(data_dir("benchmarks") / "suites" / f"{suite}.yaml")[1]
        members = {get_benchmark(n).card.base_id for n in names}
        tagged = {n for n in list_benchmarks() if suite in get_benchmark(n).card.suites}
        assert members == tagged, f"suite {suite}: file lists {sorted(members ^ tagged)} differently from the cards"
    assert {"all", "mc", "grounding", "long", "reasoning", "demo"} <= set(list_suites())


def test_presets_put_the_setting_in_the_id() -> None:
    b = get_benchmark("videomme@64f")
    assert b.id == "videomme@64f" and b.card.base_id == "videomme"
    assert b.frame_spec(family_ref("qwen3-vl")).max_frames == 64
    assert get_benchmark("videomme").frame_spec(family_ref("qwen3-vl")).max_frames == 256
    # CLI overrides beat the preset; None means "not given"
    assert b.frame_spec(family_ref("qwen3-vl"), {"max_frames": 16, "fps": None}).max_frames == 16
    dev = get_benchmark("mlvu@dev")
    assert dev.card.sources.unified.annotation == "mlvu-dev.json"
    assert dev.card.sources.unified.video_dir == "MLVU_dev/MLVU_dev"
    assert dev.card.sources.hub.repo == "sy1998/MLVU_dev"
    assert dev.card.sources.hub.record.fields == {"task": "task_type"}  # the rest of the mapping is kept
    every = get_benchmark("mmvu@all")
    assert every.card.task_types == ("multiple choice", "open-ended")
    assert not every.card.sources.hub.record.filter
    assert get_benchmark("mmvu").card.sources.hub.record.filter == {"question_type": "multiple-choice"}


def test_prompt_hash_changes_with_routing() -> None:
    # the same routing and no official prompt of their own: the same hash; an official prompt changes it
    assert get_benchmark("odvbench").prompt_template_hash() == get_benchmark("demo-mc").prompt_template_hash()
    assert get_benchmark("videomme").prompt_template_hash() != get_benchmark("holmes").prompt_template_hash()
    assert get_benchmark("odvbench").prompt_template_hash() != get_benchmark("vsibench").prompt_template_hash()


@pytest.mark.parametrize("name,message", [
    ("nosuch", "unknown benchmark 'nosuch'; known benchmarks: charades_sta"),
    ("videomme@9f", "has no preset '9f'; its presets: 1024f, 128f"),
])
def test_unknown_names_list_what_exists(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        get_benchmark(name)


def test_suites_builtin_user_file_and_errors(tmp_path: Path) -> None:
    assert [b.id for b in resolve_benchmarks("grounding", None)] == ["charades_sta", "stvg"]
    user = tmp_path / "mine.yaml"
    user.write_text(yaml.safe_dump({"description": "two", "benchmarks": ["videomme@64f", "mvbench"]}))
    assert [b.id for b in resolve_benchmarks(str(user), ["holmes,mvbench"])] == ["videomme@64f", "mvbench", "holmes"]
    with pytest.raises(UserError, match="unknown suite 'nope'; built-in suites: all, demo, grounding"):
        resolve_benchmarks("nope", None)
    with pytest.raises(UserError, match="choose benchmarks"):
        resolve_benchmarks(None, None)
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmarks: []\n")
    with pytest.raises(UserError, match="non-empty list"):
        resolve_benchmarks(str(bad), None)


MINIMAL = {"id": "x", "name": "X", "sources": {"unified": {"annotation": "x.json", "video_dir": "X"}},
           "task_types": ["multiple choice"], "prompt": "multiple_choice", "metric": "accuracy"}


@pytest.mark.parametrize("change,message", [
    ({"colour": "red"}, r"unknown field\(s\) x.yaml.colour"),
    ({"id": "Bad Id"}, "must be lowercase"),
    ({"sources": {}}, "at least one source"),
    ({"aggregation": {"kind": "macro", "fild": "task"}}, r"unknown field\(s\) x.yaml.aggregation.fild; .*did you mean "
                                                         r"x.yaml.aggregation.field\?"),
    ({"aggregation": {"kind": "macro", "groups": 0}}, "aggregation.groups must be at least 1"),
    ({"aggregation": {"kind": "hierarchical", "levels": ["task"]}}, "aggregation.levels must be tuple"),
    ({"frames": {"max_frame": 8}}, "did you mean x.yaml.frames.max_frames"),
    ({"frames": {"max_frames": -1}}, "frames.max_frames must be at least 1 and at most 4096, not -1"),
    ({"presets": {"8f": {"max_frame": 8}}}, "did you mean x.yaml.presets.8f.max_frames"),
    ({"task_types": "multiple choice", "name": None}, "x.yaml.name may not be null"),
    ({"path_fields": {"subject": "videos/[^/]+/"}}, "one capture group"),
    ({"sources": {"hub": {"repo": "a/b", "files": ["x.json"], "record": {"options": {"field": "o", "kind": "weird"}}}}},
     "kind must be one of"),
    ({"sources": {"hub": {"repo": "a/b", "files": ["x.json"], "record": {"vars": {"d": {"from": "_file"}}}}}},
     r"missing required field\(s\) x.yaml.sources.hub.record.vars.d.map"),
    ({"sources": {"hub": {"repo": "a/b", "files": ["x.json"], "record": {"vars": {"d": {"frm": "_file", "map": {}}}}}}},
     "did you mean x.yaml.sources.hub.record.vars.d.from"),
    ({"frames": {"side": 448}}, "frames.side cannot be set"),
    ({"sources": {"hub": {"repo": "not-a-repo", "files": ["x.json"], "hook": "h"}}}, "owner/name"),
    ({"sources": {"unified": {"annotation": "a", "video_dir": "v", "clip_fallback": {"pattern": "(?P<source>.+)",
                                                                                     "source_dir": "s"}}}},
     "named groups source, start and end"),
])
def test_bad_cards_are_rejected_with_the_reason(change: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_card({**MINIMAL, **change}, Path("x.yaml"))


CARD_YAML = """\
id: typo
name: Typo
task_types: multiple choice
prompt: multiple_choice
metric: accuracy
aggregation: {kind: macro, field: task}
categories: [task, {field: duration, bins: [300, 60]}]
official: {protocol: videomme, source: a/b c.py, parity: exact}
sources:
  hub:
    repo: a/b
    files: [x.json]
    record: {question: q, options: {field: o, kind: list}, answer: a}
"""


@pytest.mark.parametrize("good,bad,wrong,right", [
    ("metric: accuracy", "metrc: accuracy", "metrc", "metric"),
    ("record: {question: q", "record: {questin: q", "sources.hub.record.questin", "sources.hub.record.question"),
    ("options: {field: o", "options: {feld: o", "sources.hub.record.options.feld", "sources.hub.record.options.field"),
    ("{field: duration, bins", "{field: duration, bin", "categories[1].bin", "categories[1].bins"),
    ("source: a/b c.py", "sorce: a/b c.py", "official.sorce", "official.source"),
    ("kind: macro, field: task", "kind: macro, fields: task", "aggregation.fields", "aggregation.field"),
])
def test_a_misspelt_key_anywhere_is_refused_with_its_path_and_a_did_you_mean(tmp_path: Path, good: str, bad: str,
                                                                            wrong: str, right: str) -> None:
    card = tmp_path / "typo.yaml"
    card.write_text(CARD_YAML)
    assert load_card_and_data(card)[0].categories[1].bins == (60.0, 300.0)  # the card as written is valid
    card.write_text(CARD_YAML.replace(good, bad))
    message = rf"unknown field\(s\) {re.escape(f'{card}.{wrong}')}; .*did you mean {re.escape(f'{card}.{right}')}\?"
    with pytest.raises(UserError, match=message):
        load_card_and_data(card)


def test_minimal_card_defaults() -> None:
    card = parse_card(MINIMAL)
    assert card.aggregation.kind == "micro" and card.categories == () and card.presets == {}
    assert card.template_for("multiple choice") == "multiple_choice"
