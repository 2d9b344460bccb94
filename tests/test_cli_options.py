"""The shared option groups: one declaration per setting (a settings dataclass field), the same flag and default in
every command that takes it, and the parsed flags back as the settings object."""

from __future__ import annotations

import dataclasses

from test_cli import _subparsers

from vbench_async.backends.openai import ServerSettings
from vbench_async.backends.sampling_overrides import SamplingOverrides
from vbench_async.backends.vllm import VLLMSettings
from vbench_async.benchmarks.selection import Selection
from vbench_async.cli import build_parser
from vbench_async.cli.options import flag_fields, from_args
from vbench_async.frames.frame_settings import FrameSettings

SHARED = {"run": (Selection, FrameSettings, SamplingOverrides, VLLMSettings, ServerSettings),
          "preprocess": (Selection, FrameSettings), "judge": (VLLMSettings, ServerSettings)}


def _options(command: str) -> dict[str, object]:
    parser = _subparsers(build_parser())[command]
    return {a.dest: a for a in parser._actions if a.option_strings}


def test_every_command_takes_a_setting_with_the_dataclass_default():
    for command, groups in SHARED.items():
        options = _options(command)
        for cls in groups:
            for f in flag_fields(cls):
                action = options.get(f.name) or options.get(f"no_{f.name}")
                if action is None:  # a setting the command decides itself (judge: max_num_seqs, served_model)
                    assert command == "judge" and f.name in ("max_num_seqs", "served_model"), (command, f.name)
                    continue
                assert action.help == f.metadata["help"]
                switch = f.type == "bool"  # a switch starts unset; from_args turns it into the field's value
                assert action.default == (False if switch else f.default), (command, f.name)
    # One default for both: None, the context sized from the plan (8192 where nothing was planned, as for a judge).
    assert _options("run")["max_model_len"].default is _options("judge")["max_model_len"].default is None


def test_parsed_flags_come_back_as_the_settings():
    args = build_parser().parse_args(
        ["run", "--model", "m", "--benchmarks", "a, b,", "--max-frames", "8", "--temperature", "0.5",
         "--no-video-affinity", "--enforce-eager", "--max-model-len", "4096", "--base-url", "http://h/v1"])
    assert from_args(Selection, args) == Selection(benchmarks=("a", "b"))
    assert from_args(FrameSettings, args).to_dict() == {"max_frames": 8}
    assert from_args(SamplingOverrides, args) == SamplingOverrides(temperature=0.5)
    engine = from_args(VLLMSettings, args)
    assert engine == dataclasses.replace(VLLMSettings(), dp_video_affinity=False, enforce_eager=True,
                                         max_model_len=4096)
    assert from_args(ServerSettings, args) == ServerSettings(base_url="http://h/v1")
    defaults = build_parser().parse_args(["run", "--model", "m", "--suite", "demo"])
    assert from_args(VLLMSettings, defaults) == VLLMSettings()
    assert from_args(SamplingOverrides, defaults) == SamplingOverrides()  # none given: none set
