"""`make demo-rl`: scripts/demo_rl.py as the README runs it (the real vLLM engine for the evaluations, the trainer for
the RL steps), asserting what the demo claims: RL raises the seeing model's score on a question it was never trained
on, from the pixels (its blank-frames score stays at chance), and the compare page lists the flipped samples with their
frames. The default suite's learning test on the same question is tests/test_train_sees.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ENGINE_GROUP

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # four evaluations and 48 training steps: minutes, too long for the default suite
@pytest.mark.vllm
@ENGINE_GROUP
def test_demo_rl_teaches_the_seeing_model_a_question_from_the_pixels(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    out = tmp_path / "demo-rl"
    proc = subprocess.run([sys.executable, "scripts/demo_rl.py", "--out", str(out)], capture_output=True, text=True,
                          timeout=1800, cwd=REPO, env=env)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    record = json.loads((out / "demo_rl.json").read_text())
    assert record["benchmark"] == "seeing-many" and record["chance"] == 0.5
    before, after = record["untrained"], record["rl-trained"]
    assert after >= before + 0.1 and after >= 0.65, proc.stdout  # measured: 59.38 -> 75.00
    assert abs(record["rl-trained (blank)"] - 0.5) <= 0.1, proc.stdout  # the gain is from the pixels
    rewards = record["reward"]
    assert len(rewards) == 48 and sum(rewards[-6:]) / 6 >= sum(rewards[:6]) / 6 + 0.1  # measured: 0.503 -> 0.746
    assert re.search(r"seeing-many\s+\d+\.\d\d\s+\d+\.\d\d", proc.stdout)  # the closing table
    assert Path(record["export"]).name == "seeing-qwen3-vl-rl-step48"  # named after the run
    assert "step 1/48" in proc.stdout and "step 48/48" in proc.stdout  # the training's progress, as it runs
    assert "chance" in proc.stdout and "95% CI" in proc.stdout and "with blank frames:" in proc.stdout

    def scores(run: str) -> dict[str, float]:
        return {r["sample_id"]: r["score"] for f in (out / "runs" / run / "results").glob("seeing-many*.jsonl")
                for r in map(json.loads, f.read_text().splitlines())}

    was, now = scores("untrained"), scores("rl-trained")
    flipped = [sid for sid in now if now[sid] != was[sid]]
    page = Path(record["compare"][0]).read_text()
    table = page[page.index('flipped"'):]  # the flipped-samples table (class "samples flipped")
    table = table[: table.index("</table>")]
    assert flipped and all(sid in table for sid in flipped) and "<img" in table


def _noise(sample, i: int) -> str:
    return "zq xv kk" if i % 2 else f"kk {i} zq"  # a random-weight model: no answer in it


def _yes(sample, i: int) -> str:
    return "Yes"  # what the trained tiny model learns in a few CPU minutes: one answer to every question


def test_the_closing_table_gives_chance_the_interval_and_warns_of_a_constant_answer(tmp_path: Path) -> None:
    from test_leaderboard_runs import make_run

    from vbench_async.cli.rl_report import RunReading, rl_table

    before = RunReading.of("untrained", make_run(tmp_path / "u", "tiny-qwen2.5-vl", _noise, benchmarks=("demo-yesno",)))
    after = RunReading.of("rl-trained", make_run(tmp_path / "t", "tiny-rl", _yes, benchmarks=("demo-yesno",)))
    text = rl_table(before, after, ("demo-yesno",))
    block = after.block("demo-yesno").to_json()  # the block as summary.json has it
    n, low, high = block["n_total"], block["interval"]["low"], block["interval"]["high"]
    row = next(line.split() for line in text.splitlines() if line.startswith("demo-yesno"))
    assert row == ["demo-yesno", "0.00", f"{100 * block['score']:.2f}", f"[{100 * low:.2f},", f"{100 * high:.2f}]",
                   "50.00", str(n)]
    assert 0 < block["score"] < 1  # the share of questions whose truth is "Yes"
    where = "below chance" if high < 0.5 else "not distinguishable from chance"
    assert f"rl-trained on demo-yesno: {100 * block['score']:.2f}, {where}" in text
    assert f"WARNING rl-trained demo-yesno: {n} of {n} answers are 'yes': a constant answer" in text  # as read
    assert "WARNING untrained" not in text  # noise is not one answer
    same_noise = RunReading.of("untrained", make_run(tmp_path / "n", "tiny-qwen2.5-vl", lambda s, i: "zq",
                                                     benchmarks=("demo-yesno",)))
    assert "WARNING untrained" not in rl_table(same_noise, after, ("demo-yesno",))  # one unreadable text: no answer


def test_the_readme_shows_the_table_demo_rl_prints_not_figures_it_cannot_promise() -> None:
    from vbench_async.cli.rl_report import RunReading, rl_table

    empty = {"benchmarks": {"demo-yesno": {"score": None}}}
    header = rl_table(RunReading("untrained", empty, {}), RunReading("rl-trained", empty, {}), ("demo-yesno",))
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("make demo-rl"):readme.index("(b) Set everything up and run the tests")]
    assert " ".join(header.splitlines()[0].split()) in " ".join(section.split())
    assert not re.search(r"\d+\.\d\d -> \d+\.\d\d", section)  # no before -> after figure of some earlier run
