"""Supervised training toward a seeing model: a tiny checkpoint taught to answer the synthetic generator's questions
from the pixels, on the evaluation's own data path, so every test of a path that carries frames has a signal to lose.
Experimental: docs/seeing-models.md records how far this recipe gets (not yet above the blank-frames reading on the
questions that bind a word to one shape).

The data is what an evaluation sends: videos generated with seeds no demo, test or demo-rl suite uses (so scores on
the demo measure seeing, not memory), the demo cards' prompts and frame settings, frames from the frame cache, and
the processor call of the `hf` backend (`HFBackend.inputs`: the family's hand-off kwargs, source fps and frame
indices). The targets are the bare answers the scorers accept ("B", "Yes", "3").

What helps a 2-layer model learn this on a CPU (measured: docs/seeing-models.md):
- the demo cards' resolution (12,544 pixels a frame, 16 tokens a frame pair) and videos of 2-30 s keep a step cheap;
- one sequence per step holds several questions about one video as a conversation (the first turn is exactly the
  evaluation's prompt), so the vision tower runs once for all of them;
- a random vision tower's tokens barely differ (a shape is a few tokens among a background's), so nothing reaches
  the language model to learn from: a linear head on the max-pooled merger output, trained beside it and dropped
  afterwards, learns which colours, shapes, colour-shape pairs and colour-direction pairs the scene holds, and that
  makes the tokens of a shape stand out;
- auxiliary turns answer from the scene's ground truth: "Which colors appear in the video?" ("blue, red.") and
  "Describe each shape in the video." ("the red circle moves to the left. the blue square flashes 3 times."): dense
  targets that bind each colour to its shape, its direction and its flashes.

Deterministic for a seed and thread count (fixed data, order and initialisation; CPU float32).

    python scripts/train_seeing_model.py tiny-qwen2.5-vl --out FILE.safetensors
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

# card -> the generator's annotation group it reads (choice, yes/no, count, and when: temporal grounding)
CARDS = {"demo-mc": "mc", "demo-yesno": "yesno", "demo-count": "count", "demo-tg": "tg"}
DESCRIBE = "Describe each shape in the video."
COLORS_PRESENT = "Which colors appear in the video?"
_TOWARD = {"left": "to the left", "right": "to the right", "up": "up", "down": "down"}
_COLORS = ("red", "green", "blue", "yellow", "white", "purple", "orange", "cyan")  # demo.videos.COLORS' order
_KINDS = ("circle", "square", "triangle", "diamond")
_DIRECTIONS = ("left", "right", "up", "down")
N_LABELS = len(_COLORS) + len(_KINDS) + len(_COLORS) * len(_KINDS) + len(_COLORS) * len(_DIRECTIONS)
# Generator seeds: the demo uses 0, demo-rl's training split 1, the tests single digits; these are far from all.
TRAIN_SEED = 1000


@dataclass(frozen=True)
class SeeingConfig:
    """One training (the defaults are the recipe docs/seeing-models.md measured last)."""

    base: str = field(metadata={"help": "the tiny model whose architecture, tokenizer and initial weights are used"})
    videos: int = field(default=200, metadata={"help": "generated training videos (2-60 s, all question groups)"})
    seed: int = field(default=TRAIN_SEED, metadata={"help": "generator seed of the training videos"})
    max_seconds: float = field(default=30.0, metadata={"help": "longest training video (2 s to this)"})
    steps: int = field(default=8000, metadata={"help": "optimizer steps (one video per step)"})
    lr: float = field(default=2e-3, metadata={"help": "peak learning rate (warm-up 30 steps, cosine to 5%)"})
    questions_per_step: int = field(default=8, metadata={"help": "turns per sequence, the description included"})
    describe: bool = field(default=True, metadata={"help": "add the auxiliary turns (colours, description)"})
    vision_lr: float = field(default=1.0, metadata={"help": "the vision tower's and the head's learning rate, as a "
                                                            "multiple of lr"})
    vision_head: float = field(default=1.0, metadata={"help": "weight of the auxiliary scene-label loss on the vision "
                                                               "tower (0: none)"})
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
    labels: torch.Tensor | None = None  # the scene's labels for the auxiliary vision head (`scene_labels`)


def describe(shape: dict[str, Any]) -> str:
    """A shape of a scene (suite.json) in one sentence: how it moves, or how often it flashes."""
    label = f"the {shape['color']} {shape['kind']}"
    direction = _direction(shape)
    if direction is None:
        n = len(shape["intervals"])
        return f"{label} flashes {n} time{'s' if n > 1 else ''}."
    return f"{label} moves {_TOWARD[direction]}."


def _direction(shape: dict[str, Any]) -> str | None:
    dx, dy = shape["end"][0] - shape["start"][0], shape["end"][1] - shape["start"][1]
    if dx == dy == 0:
        return None
    return ("right" if dx > 0 else "left") if abs(dx) >= abs(dy) else ("down" if dy > 0 else "up")


def scene_labels(scene: dict[str, Any]) -> torch.Tensor:
    """Multi-hot: colours present, shapes present, colour-shape pairs, colour-direction pairs (moving shapes)."""
    labels = torch.zeros(N_LABELS)
    pairs, moves = len(_COLORS) + len(_KINDS), len(_COLORS) + len(_KINDS) + len(_COLORS) * len(_KINDS)
    for shape in scene["shapes"]:
        c, k = _COLORS.index(shape["color"]), _KINDS.index(shape["kind"])
        labels[c] = labels[len(_COLORS) + k] = labels[pairs + c * len(_KINDS) + k] = 1
        direction = _direction(shape)
        if direction is not None:
            labels[moves + c * len(_DIRECTIONS) + _DIRECTIONS.index(direction)] = 1
    return labels


def _answer(record: dict[str, Any], group: str) -> str:
    """The target text: the bare answer the scorers accept; a span in seconds rounded to 0.1 s, in its tags."""
    answer = record["solution"].removeprefix("<answer>").removesuffix("</answer>")
    if group != "tg":
        return answer
    start, end = json.loads(answer)["time"]
    return "<answer>" + json.dumps({"time": [round(start, 1), round(end, 1)]}) + "</answer>"


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
                answer = tok.encode(_answer(record, group), add_special_tokens=False) + [im_end]
                videos[sample.video].turns.append((question, answer, group))
    finally:
        cache.close()
    for name, v in videos.items():
        scene = scenes[name]
        v.labels = scene_labels(scene)
        if describe_turn:
            colors = ", ".join(sorted({s["color"] for s in scene["shapes"]})) + "."
            text = " ".join(describe(s) for s in scene["shapes"])
            v.turns += [(tok.encode(COLORS_PRESENT, add_special_tokens=False),
                         tok.encode(colors, add_special_tokens=False) + [im_end], "aux"),
                        (tok.encode(DESCRIBE, add_special_tokens=False),
                         tok.encode(text, add_special_tokens=False) + [im_end], "aux")]
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


def loss_of(model: Any, video: _Video, turns: list[tuple[list[int], list[int], str]], turn_ids: list[int],
            head: torch.nn.Module | None = None, head_weight: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the answers' tokens, the vision tower run once (as the RL policy runs it), plus
    `head_weight` x the scene-label loss of `head` on the max-pooled vision tokens."""
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
    loss = total / sum(len(a) for _, a in targets)
    if head is not None and head_weight and video.labels is not None:
        pooled = encoded["video"].pooler_output[0].max(0).values
        loss = loss + head_weight * torch.nn.functional.binary_cross_entropy_with_logits(head(pooled), video.labels)
    return loss


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
    suite = work / f"suite-seed{cfg.seed}-n{cfg.videos}-{cfg.max_seconds:g}s"
    if not (suite / "suite.json").is_file():
        generate_suite(suite, n_videos=cfg.videos, questions_per_video=64, seed=cfg.seed, min_s=2.0,
                       max_s=cfg.max_seconds)
    videos = load_videos(suite, base, work / "frames", cfg.describe)
    n_questions = sum(len(v.turns) for v in videos)
    log.info("%d videos, %d turns, loaded in %.0f s", len(videos), n_questions, time.perf_counter() - t0)

    tok = AutoTokenizer.from_pretrained(base)
    turn_ids = tok.encode("\n<|im_start|>user\n", add_special_tokens=False)
    torch.manual_seed(cfg.seed)
    model = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32).train()
    head = torch.nn.Linear(model.config.vision_config.out_hidden_size, N_LABELS)  # dropped after training
    params = [*model.parameters(), *head.parameters()]
    vision = [*model.model.visual.parameters(), *head.parameters()]
    seen = {id(p) for p in vision}
    groups = [{"params": [p for p in model.parameters() if id(p) not in seen], "scale": 1.0},
              {"params": vision, "scale": cfg.vision_lr}]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    rng = random.Random(cfg.seed)
    losses: list[float] = []
    bar = tqdm(range(cfg.steps), desc=f"training {out.stem}", disable=not progress, unit="step")
    for step in bar:
        video = videos[rng.randrange(len(videos))]
        turns = rng.sample(video.turns, min(cfg.questions_per_step, len(video.turns)))
        for k, aux in enumerate(t for t in video.turns if t[2] == "aux"):  # every step has the dense turns
            if aux not in turns:
                turns[-1 - k] = aux
        rng.shuffle(turns)
        rate = cfg.lr * min(1.0, (step + 1) / 30) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / cfg.steps)))
        for group in opt.param_groups:
            group["lr"] = group["scale"] * rate
        loss = loss_of(model, video, turns, turn_ids, head, cfg.vision_head)
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
    out.chmod(0o644)
    figures = {"videos": len(videos), "turns": n_questions, "steps": cfg.steps,
               "final_loss": round(sum(losses[-100:]) / max(1, len(losses[-100:])), 4),
               "seconds": round(time.perf_counter() - t0, 1)}
    log.info("wrote %s: %s", out, figures)
    return figures
