"""The command line as a newcomer meets it: helpful --help everywhere, clear errors (no tracebacks) for mistakes."""

from __future__ import annotations

import argparse
import re

import pytest
from conftest import run_cli

from vbench_async.cli import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, prefix: str = ""):
    yield prefix, parser
    for name, sub in _subparsers(parser).items():
        yield from _walk(sub, f"{prefix} {name}".strip())


def test_every_option_of_every_command_has_help():
    missing = []
    for name, parser in _walk(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help and action.help.strip()):
                missing.append(f"{name or 'vbench-async'}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_top_level_help_lists_commands():
    proc = run_cli("--help", check=True)
    for command in ("run", "preprocess", "cache", "list", "data", "leaderboard", "judge"):
        assert re.search(rf"^\s+{command}\s", proc.stdout, re.M), command


@pytest.mark.parametrize("args, needle", [
    (["run", "--model", "tiny-qwen9", "--suite", "demo"], "unknown tiny model 'tiny-qwen9'; available: tiny-qwen2-vl"),
    (["run", "--model", "./no/such/dir", "--suite", "demo"], "does not exist"),
    (["run", "--model", "tiny-qwen2.5-vl", "--suite", "nosuch"], "unknown suite 'nosuch'; built-in suites: all, demo"),
    (["run", "--model", "tiny-qwen2.5-vl", "--benchmarks", "foo"], "unknown benchmark 'foo'; known benchmarks:"),
    (["run", "--model", "tiny-qwen2.5-vl"], "--suite NAME or --benchmarks"),
    (["run", "--model", "tiny-qwen2.5-vl", "--suite", "demo", "--backend", "openai"], "--base-url"),
])
def test_user_mistakes_get_a_message_not_a_traceback(args, needle, tmp_path):
    proc = run_cli(*args, "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
