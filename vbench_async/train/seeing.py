"""Supervised training of a seeing model: a tiny checkpoint taught to answer the seeing suite's questions from the
pixels, on the evaluation's own data path, so every test of a path that carries frames has a signal to lose.

The data is what an evaluation sends: seeing-suite videos generated with seeds no demo or test uses (so scores on
the suite measure seeing, not memory), the seeing cards' prompts and frame settings, frames from the frame cache, and
the processor call of the `hf` backend (`HFBackend.inputs`: the family's hand-off kwargs, source fps and frame
indices). The targets are the bare answers the scorers accept ("B", "Yes", "3").

What makes this learnable on a CPU in minutes (docs/seeing-models.md has the runs that did not work):
- each question's text is the same for every video, so the answer is a function of the pixels: no word of the
  question has to be looked up among the video's tokens (a 2-layer model did not learn that lookup in 8,000 steps);
- one sequence per step holds all four questions about one video as a conversation (the first turn is exactly the
  evaluation's prompt), so the vision tower runs once for all of them;
- a random vision tower's tokens barely differ, so a linear head on the max-pooled merger output, trained beside it
  and dropped afterwards, learns the scene's colour, kind, count and size, and that makes the shapes' tokens stand
  out for the language model.

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

from ..families.release_positions import use_release_positions

log = logging.getLogger(__name__)

# card -> the seeing suite's annotation group it reads
CARDS = {"seeing-color": "color", "seeing-count": "count", "seeing-size": "size", "seeing-when": "when"}
_KINDS = ("circle", "square", "triangle", "diamond")
N_LABELS = 4 + 3 + 1 + len(_KINDS)  # colour, count, large, kind
# Generator seeds: the seeing suite uses 0, the tests single digits; this is far from both.
TRAIN_SEED = 1000


@dataclass(frozen=True)
class SeeingConfig:
    """One training (the defaults are the recipe that builds the committed seeing models)."""

    base: str = field(metadata={"help": "the tiny model whose architecture, tokenizer and initial weights are used"})
    videos: int = field(default=1000, metadata={"help": "generated training videos (seeing suite, 2-8 s)"})
    seed: int = field(default=TRAIN_SEED, metadata={"help": "generator seed of the training videos"})
    steps: int = field(default=12000, metadata={"help": "optimizer steps (one video, all its questions, per step)"})
    lr: float = field(default=1e-3, metadata={"help": "peak learning rate (warm-up 30 steps, cosine to 5%)"})
    vision_head: float = field(default=1.0, metadata={"help": "weight of the auxiliary scene-label loss on the vision "
                                                               "tower (0: none)"})
    token_head: bool = field(default=True, metadata={"help": "also teach each vision token its colour class and its "
                                                              "frames' shape count (a "
                                                              "second auxiliary head, dropped afterwards)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads (the result depends on it, bitwise; one is "
                                                        "as fast as two for these short sequences)"})


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
    token_targets: torch.Tensor | None = None  # (tokens, 2): each merged vision token's colour class and count


def scene_labels(scene: dict[str, Any]) -> torch.Tensor:
    """Multi-hot: the shapes' colour (4), count (3), whether large (1) and kind (4), from suite.json's scene."""
    from ..demo.seeing_suite import SEEING_COLORS, is_large

    labels = torch.zeros(N_LABELS)
    shape = scene["shapes"][0]
    labels[SEEING_COLORS.index(shape["color"])] = 1
    labels[4 + len(scene["shapes"]) - 1] = 1
    labels[7] = float(is_large(shape["size"], scene["width"], scene["height"]))
    labels[8 + _KINDS.index(shape["kind"])] = 1
    return labels


def token_targets(scene: dict[str, Any], frame_indices: list[int], grid: torch.Tensor) -> torch.Tensor:
    """(tokens, 2), in the merger's (time, row, column) order: each merged vision token's colour class (0 background,
    1 + the shapes' colour where a shape covers a third of the token's area in either of its two frames) and the
    number of shapes its two frames show (the same for every token of a frame pair, so the tower learns to count)."""
    from ..demo.seeing_suite import SEEING_COLORS

    t, h, w = (int(v) for v in grid[0])
    h, w = h // 2, w // 2
    sx, sy = scene["width"] / w, scene["height"] / h
    out = torch.zeros(t, h, w, dtype=torch.long)
    counts = torch.zeros(t, h, w, dtype=torch.long)
    frames = list(frame_indices) + [frame_indices[-1]] * (2 * t - len(frame_indices))  # the processor pads so
    for k in range(t):
        for shape in scene["shapes"]:
            if not any(a <= f <= b for f in frames[2 * k: 2 * k + 2] for a, b in shape["intervals"]):
                continue
            counts[k] += 1
            x0, y0, side = shape["start"][0], shape["start"][1], shape["size"]
            for i in range(h):
                for j in range(w):
                    ox = max(0.0, min(x0 + side, (j + 1) * sx) - max(x0, j * sx))
                    oy = max(0.0, min(y0 + side, (i + 1) * sy) - max(y0, i * sy))
                    if ox * oy >= sx * sy / 3:
                        out[k, i, j] = 1 + SEEING_COLORS.index(shape["color"])
    return torch.stack([out.flatten(), counts.flatten()], dim=1)


def load_videos(suite: Path, model_path: str, cache_dir: Path) -> list[_Video]:
    """Every question of the suite, grouped by video, encoded as the `hf` backend would."""
    from transformers import AutoProcessor

    from ..backends.base import Request, SamplingParams, VideoInput
    from ..backends.hf import HFBackend
    from ..benchmarks import get_benchmark
    from ..frames import FrameCache
    from ..models import resolve
    from ..samples import sample_from

    ref = resolve(model_path)
    backend = HFBackend(model_path)
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
                        ids[end + len(question):], labels=scene_labels(scenes[sample.video]),
                        token_targets=token_targets(scenes[sample.video], cached.hf_metadata()["frames_indices"],
                                                    batch["video_grid_thw"]))
                answer = record["solution"].removeprefix("<answer>").removesuffix("</answer>")
                videos[sample.video].turns.append((question, tok.encode(answer, add_special_tokens=False) + [im_end],
                                                   group))
    finally:
        cache.close()
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
            head: torch.nn.Module | None = None, head_weight: float = 0.0,
            token_head: torch.nn.Module | None = None) -> tuple[torch.Tensor, dict[str, bool]]:
    """(mean cross-entropy over the answers' tokens, the vision tower run once (as the RL policy runs it), plus
    `head_weight` x the scene-label loss of `head` on the max-pooled vision tokens; whether each turn's first answer
    token is the most likely one, by group)."""
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
    hits = {turn[2]: int(logits[p - 1].argmax()) == a[0] for turn, (p, a) in zip(turns, targets)}
    if head is not None and head_weight and video.labels is not None:
        pooled = encoded["video"].pooler_output[0].max(0).values
        loss = loss + head_weight * torch.nn.functional.binary_cross_entropy_with_logits(head(pooled), video.labels)
    if token_head is not None and head_weight and video.token_targets is not None:
        predicted = token_head(encoded["video"].pooler_output[0])
        colors, counts = video.token_targets.unbind(1)
        loss = loss + head_weight * (torch.nn.functional.cross_entropy(predicted[:, :5], colors)
                                     + torch.nn.functional.cross_entropy(predicted[:, 5:], counts))
    return loss, hits


def train(cfg: SeeingConfig, out: Path, work: Path, progress: bool = True) -> dict[str, Any]:
    """Train from `cfg.base`'s weights; write `out` (a bf16 safetensors file). `work` keeps the generated videos and
    their frames between trainings. Returns the training's figures (also logged)."""
    from tqdm import tqdm
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    from ..demo.seeing_suite import generate_seeing_suite
    from ..demo.tiny_models import ensure_tiny_model

    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    base = str(ensure_tiny_model(cfg.base))
    suite = work / f"seeing-seed{cfg.seed}-n{cfg.videos}"
    if not (suite / "suite.json").is_file():
        generate_seeing_suite(suite, n_videos=cfg.videos, seed=cfg.seed)
    videos = load_videos(suite, base, work / "frames")
    n_questions = sum(len(v.turns) for v in videos)
    log.info("%d videos, %d questions, loaded in %.0f s", len(videos), n_questions, time.perf_counter() - t0)

    tok = AutoTokenizer.from_pretrained(base)
    turn_ids = tok.encode("\n<|im_start|>user\n", add_special_tokens=False)
    torch.manual_seed(cfg.seed)
    model = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32).train()
    use_release_positions(model)  # trained with the positions vLLM evaluates it with
    width = model.config.vision_config.out_hidden_size
    head = torch.nn.Linear(width, N_LABELS)  # both heads are dropped after training
    token_head = torch.nn.Linear(width, 5 + 4) if cfg.token_head else None  # colour class, shape count
    params = [*model.parameters(), *head.parameters(), *(token_head.parameters() if token_head else ())]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    rng = random.Random(cfg.seed)
    losses: list[float] = []
    hits: dict[str, list[bool]] = {}
    bar = tqdm(range(cfg.steps), desc=f"training {out.stem}", disable=not progress, unit="step")
    for step in bar:
        video = videos[rng.randrange(len(videos))]
        turns = rng.sample(video.turns, len(video.turns))
        rate = cfg.lr * min(1.0, (step + 1) / 30) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / cfg.steps)))
        for group in opt.param_groups:
            group["lr"] = rate
        loss, step_hits = loss_of(model, video, turns, turn_ids, head, cfg.vision_head, token_head)
        for group, hit in step_hits.items():
            hits.setdefault(group, []).append(hit)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 49:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / 50:.3f}")
        if step % 500 == 499:  # training accuracy of the last 500 steps, by question group
            log.info("step %d: %s", step + 1, " ".join(f"{g} {sum(h[-500:]) / len(h[-500:]):.2f}"
                                                       for g, h in sorted(hits.items())))
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
