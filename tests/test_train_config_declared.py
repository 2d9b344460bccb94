"""TrainConfig is declared the TRL way: every setting's field carries its help, bounds and choices; YAML, `--set` and
the generated `--section.key` flags all reach it through one reader (settings.from_json), which refuses unknown keys
with a did-you-mean and out-of-range values naming the key. No model is loaded."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from vbench_async import settings
from vbench_async.errors import UserError
from vbench_async.scoring.router import FORMAT_MODES
from vbench_async.train.__main__ import parser as module_parser
from vbench_async.train.config import RewardConfig, TrainConfig, load_config

LEAVES = {".".join(path): (f, hint) for path, f, hint in settings.leaves(TrainConfig)}
BASE = {"data": {"records": "r.json"}}  # the one setting without a usable default
# Settings whose other value needs a second one (the cross-field checks of train/config.py).
NEEDS: dict[str, dict[str, Any]] = {
    "data.benchmark": {"data.records": None},
    "algorithm.kl": {"algorithm.kl_coef": 0.1},
    "validation.every": {"validation.run": {"selection": {"suite": "demo"}}},
}
VALUES: dict[str, Any] = {  # settings whose type alone says too little to pick a valid value
    "data.frames": {"max_frames": 8},
    "validation.run": {"selection": {"suite": "demo"}, "sampling": {"max_tokens": 16}},
    "train.betas": [0.8, 0.99],
    "data.prompt_template": {"mc": "answer_tag"},
}


def _other_value(key: str) -> Any:
    """A valid value of `key` other than its default."""
    if key in VALUES:
        return VALUES[key]
    f, hint = LEAVES[key]
    default = f.default
    if "choices" in f.metadata:
        return next(c for c in f.metadata["choices"] if c != default)
    kinds = [k for k in (bool, int, float, str) if k is hint or k in getattr(hint, "__args__", ())]
    kind = kinds[0]
    if kind is bool:
        return not default
    if kind in (int, float):
        low = f.metadata.get("min", f.metadata.get("above", 0))
        return (low if default is None else default) + (1 if kind is int else 0.5)
    return f"{key}-x"


def _get(cfg: TrainConfig, key: str) -> Any:
    return settings.to_json(functools.reduce(getattr, key.split("."), cfg))


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(BASE))
    for key, value in flat.items():
        *parents, name = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[name] = value
    return out


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@functools.cache
def _cli_parser() -> argparse.ArgumentParser:
    from vbench_async.cli import build_parser

    return build_parser("train")


def _from_flags(path: Path, argv: list[str], which: str) -> TrainConfig:
    """The config the given flags make, through `python -m vbench_async.train`'s or `vbench-async train`'s parser."""
    if which == "module":
        args = module_parser().parse_args(["--config", str(path), *argv])
    else:
        args = _cli_parser().parse_args(["train", "--config", str(path), *argv])
    return load_config(args.config, args.overrides)


def test_every_setting_has_help() -> None:
    missing = [key for key, (f, _) in LEAVES.items() if not f.metadata.get("help", "").strip()]
    assert not missing, missing
    assert all(f.metadata.get("help") for f in dataclasses.fields(TrainConfig))  # the sections too


def test_the_reward_format_modes_are_scorings() -> None:
    field = {f.name: f for f in dataclasses.fields(RewardConfig)}["format_mode"]
    assert field.metadata["choices"] is FORMAT_MODES


@pytest.mark.parametrize("key", sorted(LEAVES))
def test_every_setting_is_read_from_yaml_set_and_its_flag(key: str, tmp_path: Path) -> None:
    value = _other_value(key)
    flat = {**NEEDS.get(key, {}), key: value}
    assert _get(load_config(_write(tmp_path, _nested(flat))), key) == settings.to_json(value), "YAML"
    empty = _write(tmp_path, BASE)
    sets = [f"{k}={json.dumps(v)}" for k, v in flat.items()]
    assert _get(load_config(empty, sets), key) == settings.to_json(value), "--set"
    flags = [a for k, v in flat.items() for a in (f"--{k}", json.dumps(v))]
    for which in ("module", "cli"):
        assert _get(_from_flags(empty, flags, which), key) == settings.to_json(value), which


@pytest.mark.parametrize("which", ["module", "cli"])
def test_every_flag_lists_its_help_bounds_and_default(which: str) -> None:
    parser = module_parser() if which == "module" else _cli_parser()._subparsers._group_actions[0].choices["train"]
    helps = {a.option_strings[0]: a.help for a in parser._actions if a.option_strings}
    for key, (f, _) in LEAVES.items():
        text = helps[f"--{key}"]
        assert f.metadata["help"].replace("%", "%%") in text and "(default: " in text, key
        for word, bound in (("at least", "min"), ("more than", "above"), ("at most", "max")):
            if bound in f.metadata:
                assert f"{word} {f.metadata[bound]}" in text, key
        if "choices" in f.metadata:
            assert f"one of {', '.join(map(str, f.metadata['choices']))}" in text, key
    parser.format_help()  # no %-formatting error in any help


def test_a_bool_flag_alone_sets_it_and_flags_apply_in_order_with_set(tmp_path: Path) -> None:
    empty = _write(tmp_path, BASE)
    cfg = _from_flags(empty, ["--train.gradient_checkpointing", "--set", "rollout.n=4", "--rollout.n", "6",
                              "--train.lr", "1e-5"], "module")
    assert cfg.train.gradient_checkpointing is True and cfg.rollout.n == 6 and cfg.train.lr == 1e-5


@pytest.mark.parametrize("where", ["yaml", "set", "flag"])
def test_an_unknown_setting_is_refused_with_a_did_you_mean(where: str, tmp_path: Path) -> None:
    if where == "yaml":
        make = lambda: load_config(_write(tmp_path, {**BASE, "rollout": {"temprature": 0.5}}))  # noqa: E731
    else:
        make = lambda: load_config(_write(tmp_path, BASE), ["rollout.temprature=0.5"])  # noqa: E731
    if where == "flag":  # a flag that does not exist is argparse's to refuse; --set reaches the reader
        with pytest.raises(SystemExit):
            module_parser().parse_args(["--rollout.temprature", "0.5"])
    with pytest.raises(UserError, match=r"unknown field\(s\) rollout.temprature; known: .*"
                                        r"did you mean rollout.temperature\?"):
        make()
    with pytest.raises(UserError, match=r"unknown field\(s\) rolout; .*did you mean rollout\?"):
        load_config(_write(tmp_path, BASE), ["rolout.n=4"])


def test_run_config_gets_the_did_you_mean_too() -> None:
    from vbench_async.evaluation.runner import RunConfig

    with pytest.raises(UserError, match=r"unknown field\(s\) sampling.max_tokenz; .*did you mean sampling.max_tokens"):
        RunConfig.from_json({"model": "m", "sampling": {"max_tokenz": 5}})


BOUNDED = sorted(k for k, (f, _) in LEAVES.items() if {"min", "max", "above"} & set(f.metadata))
CHOOSING = sorted(k for k, (f, _) in LEAVES.items() if "choices" in f.metadata)


def _out_of_range(f: dataclasses.Field) -> Any:
    meta = f.metadata
    return meta["min"] - 1 if "min" in meta else meta["above"] if "above" in meta else meta["max"] + 1


@pytest.mark.parametrize("key", BOUNDED)
def test_an_out_of_range_value_is_refused_naming_the_setting(key: str, tmp_path: Path) -> None:
    value = _out_of_range(LEAVES[key][0])
    with pytest.raises(UserError, match=rf"^{re.escape(key)} must be "):
        load_config(_write(tmp_path, _nested({key: value})))
    with pytest.raises(UserError, match=rf"^{re.escape(key)} must be "):
        _from_flags(_write(tmp_path, BASE), [f"--{key}", str(value)], "module")


@pytest.mark.parametrize("key", CHOOSING)
def test_a_value_outside_the_choices_is_refused_naming_the_setting(key: str, tmp_path: Path) -> None:
    choices = LEAVES[key][0].metadata["choices"]
    outside = max(choices) + 1 if all(isinstance(c, int) for c in choices) else "nonesuch"
    with pytest.raises(UserError, match=rf"^{re.escape(key)} must be one of .*not {re.escape(repr(outside))}"):
        load_config(_write(tmp_path, BASE), [f"{key}={outside}"])


def test_the_bounds_are_declared_not_hand_checked() -> None:
    assert len(BOUNDED) >= 15 and len(CHOOSING) >= 15  # the single-field checks of the old check_config
