"""Supervised training of a seeing model: a tiny checkpoint taught to answer the synthetic generator's questions from
the pixels, on the evaluation's own data path, so every test of a path that carries frames has a signal to lose.

The data is what an evaluation sends: videos generated with seeds no demo, test or demo-rl suite uses (so scores on
the demo measure seeing, not memory), the demo cards' prompts and frame settings, frames from the frame cache, and
the processor call of the `hf` backend (`HFBackend.inputs`: the family's hand-off kwargs, source fps and frame
indices). The targets are the bare answers the scorers accept ("B", "Yes", "3").

Two things make a 2-layer model learn this in minutes on a CPU:
- one sequence per step holds several questions about one video as a conversation (the first turn is exactly the
  evaluation's prompt), so the vision tower runs once for all of them;
- an auxiliary turn asks to "Describe each shape in the video." and answers from the scene's ground truth ("the red
  circle moves to the left. the blue square flashes 3 times."): dense targets that bind each colour to its shape,
  its direction and its flashes, which the short answers alone teach slowly.

Deterministic for a seed and thread count (fixed data, order and initialisation; CPU float32).

    python scripts/train_seeing_model.py seeing-qwen2.5-vl   # writes vbench_async/demo/weights/<name>.safetensors
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

# card -> the generator's annotation group it reads (the demo cards whose answers are closed: choice, yes/no, count)
CARDS = {"demo-mc": "mc", "demo-yesno": "yesno", "demo-count": "count"}
DESCRIBE = "Describe each shape in the video."
_TOWARD = {"left": "to the left", "right": "to the right", "up": "up", "down": "down"}
# Generator seeds: the demo uses 0, demo-rl's training split 1, the tests single digits; these are far from all.
TRAIN_SEED = 1000


@dataclass(frozen=True)
class SeeingConfig:
    """One training of a seeing model (the defaults are the shipped models' recipe)."""

    base: str = field(metadata={"help": "the tiny model whose architecture, tokenizer and initial weights are used"})
    videos: int = field(default=200, metadata={"help": "generated training videos (2-60 s, all question groups)"})
    seed: int = field(default=TRAIN_SEED, metadata={"help": "generator seed of the training videos"})
    steps: int = field(default=3000, metadata={"help": "optimizer steps (one video per step)"})
    lr: float = field(default=2e-3, metadata={"help": "peak learning rate (warm-up 30 steps, cosine to 5%)"})
    questions_per_step: int = field(default=8, metadata={"help": "turns per sequence, the description included"})
    describe: bool = field(default=True, metadata={"help": "add the auxiliary description turn"})
    threads: int = field(default=2, metadata={"help": "torch CPU threads (the result depends on it, bitwise)"})


@dataclass
class _Video:
    """One video's shared prefix (system, frames) and its questions as token ids."""

    pixels: torch.Tensor  # bf16 to halve memory; cast back to float32 per step
    grid: torch.Tensor
    seconds: torch.Tensor | None  # Qwen2.5-VL's second_per_grid_ts
    prefix: list[int]  # the prompt up to the last <|vision_end|>
    prefix_types: torch.Tensor
    suffix: list[int]  # after the question: <|im_end|>\n<|im_start|>assistant\n
    turns: list[tuple[list[int], list[int], str]] = field(default_factory=list)  # (question, answer, group)


def describe(shape: dict[str, Any]) -> str:
    """A shape of a scene (suite.json) in one sentence: how it moves, or how often it flashes."""
    dx, dy = shape["end"][0] - shape["start"][0], shape["end"][1] - shape["start"][1]
    label = f"the {shape['color']} {shape['kind']}"
    if dx == dy == 0:
        n = len(shape["intervals"])
        return f"{label} flashes {n} time{'s' if n > 1 else ''}."
    direction = ("right" if dx > 0 else "left") if abs(dx) >= abs(dy) else ("down" if dy > 0 else "up")
    return f"{label} moves {_TOWARD[direction]}."


def load_videos(suite: Path, model_path: str, cache_dir: Path, describe_turn: bool) -> list[_Video]:
    """Every question of the suite's closed-answer groups, grouped by video, encoded as the `hf` backend would."""
    from ..backends.base import Request, SamplingParams, VideoInput
    from ..backends.hf import HFBackend
    from ..benchmarks import get_benchmark
    from ..frames import FrameCache
    from ..models import resolve
    from ..samples import sample_from

    ref = resolve(model_path)
    backend = HFBackend(model_path)
    from transformers import AutoProcessor

    backend.processor = AutoProcessor.from_pretrained(model_path)
    tok = backend.processor.tokenizer
    vision_end, im_end = tok.convert_tokens_to_ids("<|vision_end|>"), tok.convert_tokens_to_ids("<|im_end|>")
    cache = FrameCache(cache_dir)
    scenes = {f"{s['name']}.mp4": s for s in json.loads((suite / "suite.json").read_text())["scenes"]}
    videos: dict[str, _Video] = {}
    try:
        for card, group in CARDS.items():
            bench = get_benchmark(card)
            spec = bench.frame_spec(ref)
            for i, record in enumerate(json.loads((suite / "annotations" / f"{group}.json").read_text())):
                sample = sample_from(record, card, i)
                if isinstance(sample, Exception):
                    raise sample
                text = bench.render_prompt(sample)
                question = tok.encode(text, add_special_tokens=False)
                if sample.video not in videos:
                    cached = cache.get_or_decode(suite / "videos" / sample.video, spec, sample.window)
                    video = VideoInput(frames=cached.frames, metadata=cached.hf_metadata(), uuid=cached.key)
                    batch = backend.inputs(Request(request_id=sample.key, prompt=text, videos=(video,), images=(),
                                                   sampling=SamplingParams(), n=1))
                    ids = batch["input_ids"][0].tolist()
                    end = max(j for j, t in enumerate(ids) if t == vision_end) + 1
                    if ids[end: end + len(question)] != question:  # the splice below relies on it
                        raise RuntimeError(f"{sample.key}: the prompt's tokens are not the question's after the video")
                    videos[sample.video] = _Video(
                        batch["pixel_values_videos"].to(torch.bfloat16), batch["video_grid_thw"],
                        batch.get("second_per_grid_ts"), ids[:end], batch["mm_token_type_ids"][0][:end].clone(),
                        ids[end + len(question):])
                answer = record["solution"].removeprefix("<answer>").removesuffix("</answer>")
                videos[sample.video].turns.append((question, tok.encode(answer, add_special_tokens=False) + [im_end],
                                                   group))
    finally:
        cache.close()
    if describe_turn:
        question = tok.encode(DESCRIBE, add_special_tokens=False)
        for name, v in videos.items():
            text = " ".join(describe(s) for s in scenes[name.removeprefix("videos/")]["shapes"])
            v.turns.append((question, tok.encode(text, add_special_tokens=False) + [im_end], "describe"))
    return [videos[k] for k in sorted(videos)]


def conversation(video: _Video, turns: list[tuple[list[int], list[int], str]], turn_ids: list[int]
                 ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, list[int]]]]:
    """(input ids (1, L), token types (1, L), [(position of each answer, its ids)]) of one multi-turn sequence."""
    ids = list(video.prefix)
    targets = []
    for k, (question, answer, _) in enumerate(turns):
        if k:
            ids += turn_ids
        ids += question + video.suffix
        targets.append((len(ids), answer))
        ids += answer
    types = torch.zeros(len(ids), dtype=torch.long)
    types[: len(video.prefix)] = video.prefix_types
    return torch.tensor([ids]), types[None], targets


def loss_of(model: Any, video: _Video, turns: list[tuple[list[int], list[int], str]], turn_ids: list[int]
            ) -> torch.Tensor:
    """Mean cross-entropy over the answers' tokens, the vision tower run once (as the RL policy runs it)."""
    from .policy import run_vision

    ids, types, targets = conversation(video, turns, turn_ids)
    media = {"video_pixels": video.pixels.float(), "video_grid_unique": video.grid,
             "video_index": torch.zeros(1, dtype=torch.long), "video_grid_thw": video.grid}
    encoded, _ = run_vision(model, media, torch.device("cpu"))
    extra = {"second_per_grid_ts": video.seconds} if video.seconds is not None else {}
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=types, use_cache=False,
                   mm_encoder_outputs=encoded, video_grid_thw=video.grid, **extra).logits[0]
    total = sum(torch.nn.functional.cross_entropy(logits[p - 1: p - 1 + len(a)], torch.tensor(a), reduction="sum")
                for p, a in targets)
    return total / sum(len(a) for _, a in targets)


def train(cfg: SeeingConfig, out: Path, work: Path, progress: bool = True) -> dict[str, Any]:
    """Train from `cfg.base`'s weights; write `out` (a bf16 safetensors file). `work` keeps the generated videos and
    their frames between trainings. Returns the training's figures (also logged)."""
    from tqdm import tqdm
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    from ..demo.suite import generate_suite
    from ..demo.tiny_models import ensure_tiny_model

    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    base = str(ensure_tiny_model(cfg.base))
    suite = work / f"suite-seed{cfg.seed}-n{cfg.videos}"
    if not (suite / "suite.json").is_file():
        generate_suite(suite, n_videos=cfg.videos, questions_per_video=64, seed=cfg.seed, min_s=2.0, max_s=60.0)
    videos = load_videos(suite, base, work / "frames", cfg.describe)
    n_questions = sum(len(v.turns) for v in videos)
    log.info("%d videos, %d turns, loaded in %.0f s", len(videos), n_questions, time.perf_counter() - t0)

    tok = AutoTokenizer.from_pretrained(base)
    turn_ids = tok.encode("\n<|im_start|>user\n", add_special_tokens=False)
    torch.manual_seed(cfg.seed)
    model = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32).train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    rng = random.Random(cfg.seed)
    losses: list[float] = []
    bar = tqdm(range(cfg.steps), desc=f"training {out.stem}", disable=not progress, unit="step")
    for step in bar:
        video = videos[rng.randrange(len(videos))]
        turns = rng.sample(video.turns, min(cfg.questions_per_step, len(video.turns)))
        described = [t for t in video.turns if t[2] == "describe"]
        if described and described[0] not in turns:
            turns[-1] = described[0]
        rng.shuffle(turns)
        warm = min(1.0, (step + 1) / 30)
        for group in opt.param_groups:
            group["lr"] = cfg.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / cfg.steps)))
        loss = loss_of(model, video, turns, turn_ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 49:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / 50:.3f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:  # save_pretrained writes the checkpoint's key names
        model.to(torch.bfloat16).save_pretrained(tmp)
        shutil.move(str(Path(tmp) / "model.safetensors"), str(out))
    figures = {"videos": len(videos), "turns": n_questions, "steps": cfg.steps,
               "final_loss": round(sum(losses[-100:]) / max(1, len(losses[-100:])), 4),
               "seconds": round(time.perf_counter() - t0, 1)}
    log.info("wrote %s: %s", out, figures)
    return figures
