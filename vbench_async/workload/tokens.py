"""Exact prompt lengths without an engine: the chat template and tokenizer of the model, and its family's rule for
what replaces a video or image placeholder (vbench_async/families: each family's `visual_tokens`, e.g. the Qwen rules
in families/qwen_common.py). tests/test_workload_tokens.py and tests/test_families_e2e.py compare these counts with
the prompt lengths the engines report.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Callable, Sequence, cast

from .. import families
from ..backends.base import chat_messages
from ..families.base import VideoShape, count_runs
from ..families.qwen_common import timestamps
from . import snapshot
from .counts import TextCounter, frame_tokens
from .memo import ProcessorMemo
from .pieces import LineTokenizer

SENTINEL = "\x00vbench-prompt\x00"
# Texts a template that does more than insert the prompt would render differently: surrounding whitespace (trim),
# an empty text, tool-response and thinking tags, a template's own control tokens.
_PROBES = ("", "  padded question \n\n", "\nleading newline", "<tool_response>\nx\n</tool_response>",
           "<think>\nreasoning\n</think>\n\nanswer", "<|im_end|>", "{{ not jinja }}")

_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "float8_e4m3fn": 1}


@dataclass(frozen=True)
class ModelLimits:
    """What the checkpoint's config says about context and KV-cache size."""

    max_position_embeddings: int
    num_layers: int
    num_kv_heads: int
    head_dim: int
    kv_dtype_bytes: int

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.kv_dtype_bytes  # K and V


def model_limits(model_path: str, on_cpu: bool = False) -> ModelLimits:
    """ModelLimits from the model's config.json (its text config for a vision-language model)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path)
    text = getattr(config, "text_config", None) or config
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    dtype = str(getattr(text, "dtype", None) or getattr(config, "dtype", None) or "bfloat16").replace("torch.", "")
    return ModelLimits(
        max_position_embeddings=int(text.max_position_embeddings),
        num_layers=int(text.num_hidden_layers),
        num_kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
        head_dim=head_dim,
        kv_dtype_bytes=2 if on_cpu else _DTYPE_BYTES.get(dtype, 2),  # the CPU engine serves bfloat16
    )


# What the engine receives for one video: frame count and size after sampling and resizing, and the source frame
# numbers and rate that timestamps come from.
VideoGeometry = VideoShape


@dataclass(frozen=True)
class PromptCount:
    visual_tokens: int  # embeddings the vision encoder produces (video + images)
    prompt_tokens: int  # the whole prompt the engine sees, placeholders expanded
    largest_item_tokens: int  # the largest single video or image (what the encoder cache must hold)


class PromptCounter:
    """Counts prompt tokens exactly as the engine will, from the model directory's processor files. `memo`: the
    processor's answers from an earlier plan of this model (memo.py); the processor is loaded only for what it lacks.
    `system`: the system turn every request of the run sends (`Request.system`: a recipe's), counted in each prompt."""

    def __init__(self, model_path: str, family: str, memo: ProcessorMemo | None = None, system: str | None = None):
        self.model_path = model_path
        self.family = family
        self.memo = memo if memo is not None else ProcessorMemo()
        self.system = system
        self.video_target: tuple[int, ...] = tuple(self.memo.answer("rule", "video_target",
                                                                    lambda: list(self.rule.video_target)))
        self.image_id: int = self.memo.answer("rule", "image_id", lambda: int(self.rule.image_id))
        self._frames: dict[tuple[int, int], tuple[str, str] | None] = {}
        self._backend: Any = False  # the fast tokenizer (a `tokenizers.Tokenizer`), or None; False: not yet known
        self._lines: LineTokenizer | None | bool = False  # made on first use (False: not yet)
        self._texts: TextCounter | None | bool = False  # likewise
        self._frame_counts: dict[tuple[int, int], int | None] = {}
        self._one_video: dict[tuple[int, VideoGeometry], PromptCount] = {}  # PromptCount is immutable: shared
        # Per geometry, and per counter (a cache on the method would keep every counter and its processor alive).
        self._replacement = lru_cache(maxsize=65536)(self._remembered("video_replacement"))
        self._video_tokens = lru_cache(maxsize=65536)(self._remembered("video_tokens"))
        self._image_tokens = lru_cache(maxsize=65536)(self._image_rule)

    # -- the processor, loaded when the memo lacks an answer -------------------------------------------------------
    @cached_property
    def processor(self) -> Any:
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(self.model_path)

    @cached_property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    @cached_property
    def rule(self) -> families.VisualTokens:
        return families.get(self.family).visual_tokens(self.processor)

    def _remembered(self, name: str) -> Callable[[VideoGeometry], int]:
        def answer(video: VideoGeometry) -> int:
            # A digest of the fields: hundreds of frame indices per key would make the memo file large.
            fields = json.dumps([video.frames, video.height, video.width, list(video.indices), video.fps])
            key = hashlib.blake2b(fields.encode(), digest_size=16).hexdigest()
            return self.memo.answer(name, key, lambda: int(getattr(self.rule, name)(video)))
        return answer

    def _image_rule(self, height: int, width: int, resize: bool) -> int:
        return self.memo.answer("image_tokens", f"{height},{width},{int(resize)}",
                                lambda: int(self.rule.image_tokens(height, width, resize)))

    def fast_tokenizer(self) -> Any:
        """The processor's fast tokenizer (`tokenizers.Tokenizer`), from the memo's copy of its state when there is
        one; None for a tokenizer without one."""
        if self._backend is False:
            self._backend = snapshot.load(self.memo.tokenizer_file) if self.memo.tokenizer_file else None
            if self._backend is None:
                self._backend = getattr(self.tokenizer, "_tokenizer", None)
                if not hasattr(self._backend, "encode_batch_fast"):
                    self._backend = None
                elif self.memo.tokenizer_file is not None:
                    snapshot.save(self._backend, self.memo.tokenizer_file)
        return self._backend

    def save(self) -> None:
        """Keep what the processor answered for the next plan (memo.py)."""
        self.memo.save()

    # -- pieces ----------------------------------------------------------------------------------------------------
    def render(self, prompt: str, n_videos: int, n_images: int) -> str:
        """The prompt string the backends send: the model's chat template around the media and the text."""
        frame = self._frame(n_videos, n_images)
        if frame is not None and SENTINEL not in prompt:
            return frame[0] + prompt + frame[1]
        return self._render(prompt, n_videos, n_images)

    def _render(self, prompt: str, n_videos: int, n_images: int) -> str:
        return self.processor.apply_chat_template(chat_messages(prompt, n_videos, n_images, self.system),
                                                  tokenize=False, add_generation_prompt=True)

    def _frame(self, n_videos: int, n_images: int) -> tuple[str, str] | None:
        """(text before, text after) the prompt in the rendered template, when the template inserts the text verbatim
        (checked once per media layout on probe texts that a trimming or content-sniffing template would change);
        None: every prompt goes through the template. Rendering the template per prompt cost more than tokenizing."""
        layout = (n_videos, n_images)
        if layout not in self._frames:
            found = self.memo.answer("frame", self._layout_key(n_videos, n_images),
                                     lambda: self._find_frame(n_videos, n_images))
            self._frames[layout] = (found[0], found[1]) if found is not None else None
        return self._frames[layout]

    def _layout_key(self, n_videos: int, n_images: int) -> str:
        """The memo's key of a media layout's frame; a system turn is part of the frame (the key without one is the
        one earlier plans wrote)."""
        key = f"{n_videos},{n_images}"
        if self.system is None:
            return key
        return f"{key},system:{hashlib.blake2b(self.system.encode(), digest_size=8).hexdigest()}"

    def _find_frame(self, n_videos: int, n_images: int) -> list[str] | None:
        parts = self._render(SENTINEL, n_videos, n_images).split(SENTINEL)
        if len(parts) != 2 or any(self._render(t, n_videos, n_images) != parts[0] + t + parts[1] for t in _PROBES):
            return None
        return parts

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids of rendered prompts, as the engine's processor tokenizes them (one batched call). The fast
        tokenizer's own batch call, without the offsets and wrappers transformers adds (the same ids)."""
        if not texts:
            return []
        backend = self.fast_tokenizer()
        if backend is None:
            return self.tokenizer(texts)["input_ids"]
        if self._lines is False:
            self._lines = LineTokenizer.of(backend)
        if isinstance(self._lines, LineTokenizer):  # shared lines tokenized once (pieces.py: the same ids)
            return self._lines.encode(texts)
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=True)]

    def _text_counter(self) -> TextCounter | None:
        if self._texts is False:
            backend = self.fast_tokenizer()
            self._texts = TextCounter.of(backend, {*self.video_target, self.image_id}) if backend else None
        return self._texts if isinstance(self._texts, TextCounter) else None

    def _frame_tokens(self, n_videos: int, n_images: int) -> int | None:
        """The frame's tokens for this media layout, placeholders not counted, when a text's count adds to it
        (counts.frame_tokens); None: prompts of this layout are tokenized whole."""
        layout = (n_videos, n_images)
        if layout not in self._frame_counts:
            frame, texts = self._frame(n_videos, n_images), self._text_counter()
            self._frame_counts[layout] = None if frame is None or texts is None else frame_tokens(
                texts.backend, frame[0], frame[1], self.video_target, self.image_id)
        return self._frame_counts[layout]

    def video_tokens(self, video: VideoGeometry) -> int:
        """Embeddings of one video (what its encoder output, and the encoder cache, hold)."""
        return self._video_tokens(video)

    def video_replacement(self, video: VideoGeometry) -> int:
        """Length of the token run that replaces the video's placeholder in the prompt."""
        return self._replacement(video)

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        """Embeddings of one image of this (already loaded and resized) size; `resize`: the engine's processor resizes
        it again (it does when the request has no video, whose do_resize=False would cover images too)."""
        return self._image_tokens(height, width, resize)

    # -- a whole prompt --------------------------------------------------------------------------------------------
    def count(self, prompt: str, videos: Sequence[VideoGeometry] = (),
              images: Sequence[tuple[int, int]] = ()) -> PromptCount:
        (ids,) = self.tokenize([self.render(prompt, len(videos), len(images))])
        return self.count_ids(ids, videos, images)

    def counts(self, prompts: Sequence[tuple[str, Sequence[VideoGeometry], Sequence[tuple[int, int]]]]
               ) -> list[PromptCount]:
        """`count` of each (prompt, videos, images), for many prompts at once (a plan's). Where the chat template's
        frame around the text is cut off from it by added tokens (counts.frame_tokens), a prompt's length is the
        frame's, counted once per media layout, plus the text's token count (TextCounter); the other prompts are
        rendered and tokenized whole, in one batch."""
        out: list[PromptCount | None] = []
        slow: list[int] = []
        texts = self._text_counter()
        frames = self._frame_counts
        for prompt, videos, images in prompts:
            layout = (len(videos), len(images))
            base = frames[layout] if layout in frames else self._frame_tokens(*layout)
            n = texts.count(prompt) if base is not None and texts is not None and SENTINEL not in prompt else None
            if base is None or not n:  # no shortcut, or an empty text (the frame's halves then meet: counted whole)
                slow.append(len(out))
                out.append(None)
            else:
                out.append(self._expand(base + n, videos, images))
        rendered = [self.render(prompts[i][0], len(prompts[i][1]), len(prompts[i][2])) for i in slow]
        for i, ids in zip(slow, self.tokenize(rendered)):
            out[i] = self.count_ids(ids, prompts[i][1], prompts[i][2])
        return cast(list[PromptCount], out)  # every None was filled

    def count_ids(self, ids: Sequence[int], videos: Sequence[VideoGeometry] = (),
                  images: Sequence[tuple[int, int]] = ()) -> PromptCount:
        """The prompt's length once the engine expands the placeholders in `ids` (the tokenized rendered prompt)."""
        ids = list(ids)
        return self._expand(len(ids) - count_runs(ids, self.video_target) * len(self.video_target)
                            - ids.count(self.image_id), videos, images)

    def _expand(self, unexpanded: int, videos: Sequence[VideoGeometry], images: Sequence[tuple[int, int]]
                ) -> PromptCount:
        """The count from the prompt's tokens other than the placeholders (`unexpanded`) and its media."""
        if len(videos) == 1 and not images:  # most prompts: one video (the general case below, spelt out)
            key = (unexpanded, videos[0])
            found = self._one_video.get(key)
            if found is None:
                if len(self._one_video) >= 65536:
                    self._one_video.clear()
                size = self.video_tokens(videos[0])
                found = self._one_video[key] = PromptCount(
                    visual_tokens=size, prompt_tokens=unexpanded + self.video_replacement(videos[0]),
                    largest_item_tokens=size)
            return found
        total = unexpanded
        items = [self.video_tokens(v) for v in videos]
        total += sum(self.video_replacement(v) for v in videos)
        resize = not videos
        items += [self.image_tokens(h, w, resize) for h, w in images]
        total += sum(items[len(videos):])
        return PromptCount(visual_tokens=sum(items), prompt_tokens=total, largest_item_tokens=max(items, default=0))


__all__ = ["ModelLimits", "model_limits", "VideoGeometry", "PromptCount", "PromptCounter", "timestamps", "count_runs"]
