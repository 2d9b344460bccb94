"""The processor's answers kept between plans (vbench_async/workload/memo.py, snapshot.py): a second counter answers
from the memo exactly as the processor did, without loading it; anything the answers depend on changes the key; a
damaged memo is asked again."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from vbench_async import families, models
from vbench_async.workload.memo import ProcessorMemo, memo_key
from vbench_async.workload.tokens import PromptCounter, VideoGeometry

VIDEOS = [VideoGeometry(frames=4, height=64, width=96, indices=(0, 10, 20, 30), fps=10.0),
          VideoGeometry(frames=8, height=32, width=32, indices=(0, 3, 6, 9, 12, 15, 18, 21), fps=29.97)]
PROMPTS = ["Question 1: which colour?\nA. red\nB. green\nThe best answer is:", "", "caf\u00e9 <|im_end|> x",
           "\nQuestion: what?\n\nAnswer directly.\n"]


def _items() -> list[tuple[str, list[VideoGeometry], list[tuple[int, int]]]]:
    rnd = random.Random(3)
    layouts = [([v], []) for v in VIDEOS] + [([], []), ([], [(64, 96)]), ([VIDEOS[0]], [(32, 32)])]
    return [(p + str(rnd.randint(0, 99)), v, i) for p in PROMPTS for v, i in layouts]


@pytest.mark.parametrize("tiny", [f.tiny_model for f in families.registry().values()])
def test_a_second_plan_answers_from_the_memo_as_the_processor_did(tiny: str, tmp_path: Path) -> None:
    ref = models.resolve(tiny)
    fresh = PromptCounter(ref.path, ref.family)  # no memo: the processor answers everything
    first = PromptCounter(ref.path, ref.family, ProcessorMemo.at(tmp_path, ref.path, ref.fingerprint, ref.family))
    items = _items()
    expected = fresh.counts(items)
    assert first.counts(items) == expected
    first.save()
    stored = sorted(p.name for p in tmp_path.iterdir())
    assert len(stored) == 2 and stored[1].endswith(".tokenizer.json"), stored
    second = PromptCounter(ref.path, ref.family, ProcessorMemo.at(tmp_path, ref.path, ref.fingerprint, ref.family))
    # Prompts the shortcut counts need no processor; the others (a template that is not a plain frame, an empty
    # text, an added token's text) are rendered through it, as before.
    plain = [(p, v, i) for p, v, i in items if p and "<|" not in p]
    assert second.counts(plain) == [c for c, (p, _, _) in zip(expected, items) if p and "<|" not in p]
    if all(second._frame_tokens(len(v), len(i)) is not None for _, v, i in plain):
        assert "processor" not in second.__dict__, "the memo should have answered"
    assert second.counts(items) == expected
    assert [second.video_tokens(v) for v in VIDEOS] == [fresh.video_tokens(v) for v in VIDEOS]
    assert second.image_tokens(90, 150, True) == fresh.image_tokens(90, 150, True)


def test_the_key_follows_the_model_files_the_family_and_the_fingerprint(tmp_path: Path) -> None:
    ref = models.resolve("tiny-qwen3-vl")
    copy = tmp_path / "model"
    shutil.copytree(ref.path, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    key = memo_key(str(copy), ref.fingerprint, ref.family)
    assert key == memo_key(str(copy), ref.fingerprint, ref.family)
    assert key != memo_key(str(copy), ref.fingerprint, "qwen2.5-vl")
    assert key != memo_key(str(copy), ref.fingerprint + "x", ref.family)
    template = copy / "chat_template.jinja"
    text = template.read_text()
    assert "role" in text
    template.write_text(text.replace("role", "rolf", 1))  # same size, one letter in the middle
    assert memo_key(str(copy), ref.fingerprint, ref.family) != key


def test_a_damaged_memo_is_asked_again(tmp_path: Path) -> None:
    ref = models.resolve("tiny-qwen2.5-vl")
    memo = ProcessorMemo.at(tmp_path, ref.path, ref.fingerprint, ref.family)
    assert memo.path is not None
    memo.path.parent.mkdir(parents=True, exist_ok=True)
    memo.path.write_text("{not json")
    assert memo.tokenizer_file is not None
    memo.tokenizer_file.write_text("{}")
    counter = PromptCounter(ref.path, ref.family, ProcessorMemo.at(tmp_path, ref.path, ref.fingerprint, ref.family))
    fresh = PromptCounter(ref.path, ref.family)
    assert counter.counts(_items()) == fresh.counts(_items())
    counter.save()
    assert json.loads(memo.path.read_text())["tables"]["frame"]


PLAN = """
import json, sys
from pathlib import Path
from vbench_async.benchmarks.selection import Selection
from vbench_async.evaluation.runner import RunConfig, plan
w = plan(RunConfig(model=sys.argv[1], selection=Selection(suite="demo"), cache_dir=Path(sys.argv[2])))
d = w.to_dict()
d.pop("free_disk_bytes")
print(json.dumps({"plan": d, "prompt_tokens": dict(w.prompt_tokens),
                  "imported": sorted(m for m in ("torch", "transformers") if m in sys.modules)}))
"""


@pytest.mark.parametrize("tiny", ["tiny-qwen3-vl", "tiny-internvl"])
def test_a_warm_plan_is_the_cold_plan_without_transformers_or_torch(tiny: str, tmp_path: Path) -> None:
    """`vbench-async plan` twice on the demo suite (videos and images): the second plan, from the memo and the
    stored headers, gives the same plan, every prompt length included, and imports neither transformers nor torch
    (the tiny models are stored in bfloat16: their limits are the same on the CPU engine and a GPU)."""
    import os
    import subprocess
    import sys

    def plan() -> dict:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run([sys.executable, "-c", PLAN, tiny, str(tmp_path / "cache")], capture_output=True,
                              text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    cold, warm = plan(), plan()
    assert "transformers" in cold["imported"] and warm["imported"] == []
    assert warm["plan"] == cold["plan"] and warm["prompt_tokens"] == cold["prompt_tokens"]
    assert len(cold["prompt_tokens"]) > 30
