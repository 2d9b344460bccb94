"""What a model family declares: its frame rules, how pre-sampled frames reach vLLM and transformers, its chat quirks,
its prompt-token rule and the reference it follows. Pure data and small functions: no engine, no decoder imported."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence


@dataclass(frozen=True)
class Reference:
    """Where the family's video protocol comes from (cited in `vbench-async list --models`)."""

    source: str  # "model card" or "authors' evaluation code"
    url: str
    follows: str  # what exactly is taken from it


@dataclass(frozen=True)
class FrameRules:
    """How many frames, which ones, at what size, and whether timestamps enter the prompt."""

    count: str  # how the frame count is decided (human-readable; the math is FrameSpec.frame_count)
    selection: str  # which source frames (human-readable; the math is `pick`)
    pick: Callable[[int, int, int], list[int]]  # (first, last, n) -> n source-frame indices
    resize: str  # "smart": multiples of `factor` within a pixel budget; "fixed": a square side from the config
    temporal: int  # frames per temporal patch: counts are multiples of it
    timestamps: str  # "none" or how the prompt carries each frame's time
    factor: int | None = None  # smart resize: sides are multiples of it
    default_side: int | None = None  # fixed resize: the reference's side when no checkpoint config says otherwise


@dataclass(frozen=True)
class Handoff:
    """How pre-sampled, pre-resized frames and their metadata are passed to an engine."""

    vllm_processor_kwargs: Mapping[str, Any]  # vLLM `mm_processor_kwargs` (metadata rides in the video tuple)
    hf_processor_kwargs: Mapping[str, Any]  # transformers processor call kwargs (besides videos= / video_metadata=)
    note: str


@dataclass(frozen=True)
class VideoShape:
    """One video as the engine receives it (what prompt-token rules need)."""

    frames: int
    height: int
    width: int
    indices: tuple[int, ...]
    fps: float

    def __hash__(self) -> int:
        """The fields' hash, computed once: a plan looks each question's video up in the token rules' caches, and
        hashing its frame indices every time cost more than the look-up."""
        try:
            return self.__dict__["_hash"]  # type: ignore[no-any-return]
        except KeyError:
            value = self.__dict__["_hash"] = hash((self.frames, self.height, self.width, self.indices, self.fps))
            return value


class VisualTokens(Protocol):
    """A family's placeholder rule, bound to one checkpoint's processor."""

    video_target: tuple[int, ...]  # the token run in the rendered prompt that a video replaces
    image_id: int  # the token an image replaces

    def video_tokens(self, video: VideoShape) -> int:
        """Embeddings of one video (what the encoder cache holds)."""

    def video_replacement(self, video: VideoShape) -> int:
        """Length of the token run that replaces the video's placeholder."""

    def image_tokens(self, height: int, width: int, resize: bool) -> int:
        """Embeddings (= placeholder replacement length) of one image."""


@dataclass(frozen=True)
class Family:
    name: str  # the family id runs record ("qwen2.5-vl", "internvl")
    model_types: tuple[str, ...]  # config.json model_type values of this family
    reference: Reference
    frames: FrameRules
    handoff: Handoff
    chat: str  # chat-template quirks the backends and the tiny template honour
    tiny_model: str  # the tiny random checkpoint recipe (demo/tiny_models.py)
    visual_tokens: Callable[[Any], VisualTokens]  # processor -> placeholder rule
    # config.json (a dict) -> FrameSpec fields the checkpoint decides (e.g. the fixed frame side); raises ValueError
    frame_settings: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda config: {}
    aliases: tuple[str, ...] = ()  # other spellings accepted for `name` (--family, old run records)

    def describe(self) -> dict[str, Any]:
        """The family as `vbench-async list --models` shows it."""
        f = self.frames
        size = f"multiples of {f.factor} px within a pixel budget" if f.resize == "smart" else (
            f"square, side from the checkpoint config (reference {f.default_side} px)")
        return {
            "family": self.name, "model_types": list(self.model_types), "tiny_model": self.tiny_model,
            "frames": {"count": f.count, "selection": f.selection, "resolution": size,
                       "temporal_patch": f.temporal, "timestamps": f.timestamps},
            "handoff": {"vllm": dict(self.handoff.vllm_processor_kwargs), "hf": dict(self.handoff.hf_processor_kwargs),
                        "note": self.handoff.note},
            "chat": self.chat,
            "reference": {"source": self.reference.source, "url": self.reference.url,
                          "follows": self.reference.follows},
        }


# The hand-off every family here uses: the frame cache already sampled and resized the frames.
PRESAMPLED = {"do_resize": False, "do_sample_frames": False}


def side_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A fixed-size family's frame side: its vision tower's input size in config.json (an int or [h, w])."""
    size = (config.get("vision_config") or {}).get("image_size")
    side = size[0] if isinstance(size, (list, tuple)) and size else size
    if not isinstance(side, int) or isinstance(side, bool) or side <= 0:
        raise ValueError("config.json has no vision_config.image_size")
    return {"side": side}


def count_runs(ids: Sequence[int], target: Sequence[int]) -> int:
    """Non-overlapping occurrences of the token run `target` in `ids`."""
    if len(target) == 1:
        return list(ids).count(target[0])
    n, i, k = 0, 0, len(target)
    while i <= len(ids) - k:
        if list(ids[i:i + k]) == list(target):
            n, i = n + 1, i + k
        else:
            i += 1
    return n
