"""`make demo-rl`, short: scripts/demo_rl.py on demo-yesno only (the real vLLM engine for both evaluations, the
trainer for the RL steps), asserting what the demo claims: the trained model beats the untrained one on the demo
split, and the compare page lists the flipped samples with their frames."""

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


@pytest.mark.slow  # two engine starts and a training: minutes, too long for the default suite
@pytest.mark.vllm
@ENGINE_GROUP
def test_demo_rl_trained_model_beats_the_untrained_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    out = tmp_path / "demo-rl"
    proc = subprocess.run([sys.executable, "scripts/demo_rl.py", "--out", str(out), "--benchmarks", "demo-yesno",
                           "--steps", "10"], capture_output=True, text=True, timeout=1500, cwd=REPO, env=env)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    record = json.loads((out / "demo_rl.json").read_text())
    before, after = record["untrained"]["demo-yesno"], record["rl_trained"]["demo-yesno"]
    assert after > before, proc.stdout
    assert re.search(r"demo-yesno\s+\d+\.\d\d\s+\d+\.\d\d", proc.stdout)  # the closing table
    assert Path(record["export"]).name == "tiny-qwen2.5-vl-rl-step10"  # named after the run
    page = Path(record["compare"][0]).read_text()
    table = page[page.index('flipped"'):]  # the flipped-samples table (class "samples flipped")
    table = table[: table.index("</table>")]
    rows = [json.loads(line) for f in (out / "runs" / "rl-trained" / "results").glob("demo-yesno*.jsonl")
            for line in f.read_text().splitlines()]
    right = [r["sample_id"] for r in rows if r["score"] > 0]  # the untrained model scored 0 on every sample
    assert right and all(sid in table for sid in right) and "<img" in table
