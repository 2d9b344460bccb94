"""`FrameSpec` and the pure frame math: how many frames, which source frames, and what size.

The rules follow the Qwen reference utilities (qwen-vl-utils `smart_nframes`, `calculate_video_frame_range`,
`smart_resize` and the per-frame budget in `fetch_video`; indices use torch's float32 linspace as they do), with
deliberate differences only where the reference raises: a video shorter than the requested frame count, a 1-frame
video or a 1-frame window are clamped to what the video has (the last frame repeated up to the temporal patch)
and recorded (`FrameCount.clamped`); a max_pixels below the default per-frame floor lowers the floor.
The per-video budget applies to every family (the predecessor's Qwen2.5 path ignored it when max_pixels was set).
`second_resize_max_pixels` (off by default) adds what Qwen3-VL's HF video processor does to such frames when an
engine is left to resize them (`do_resize` on, as Qwen3-VL's own evaluation does): frames x height x width capped at
its `size.longest_edge` (transformers' qwen3_vl video `smart_resize`); the cache then holds the twice-resized frames.
Which rules apply is the family's (vbench_async/families): its resize multiple or fixed side, its temporal patch and
its frame selection; the Qwen rules above are the default and the math for "smart"-resize families.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from .. import families
from ..errors import UserError
from ..failure_kinds import FailureKind
from ..families.qwen_common import linspace_pick
from .errors import FrameError
from .frame_settings import FrameSettings

VIDEO_MIN_TOKENS, VIDEO_MAX_TOKENS = 128, 768  # per frame, in units of factor**2 pixels
IMAGE_MIN_TOKENS, IMAGE_MAX_TOKENS = 4, 16384
DEFAULT_SEQ_TOKENS = 128000  # qwen-vl-utils' MODEL_SEQ_LEN; the default video budget is 90 % of it
MAX_ASPECT_RATIO = 200

Window = tuple[float | None, float | None]


def round_by_factor(number: float, factor: int) -> int:
    return round(number / factor) * factor  # Python round: half to even, as in the reference


def ceil_by_factor(number: float, factor: int) -> int:
    return math.ceil(number / factor) * factor


def floor_by_factor(number: float, factor: int) -> int:
    return math.floor(number / factor) * factor


def smart_resize(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """Target (height, width): multiples of `factor`, area in [min_pixels, max_pixels], aspect ratio kept."""
    if min(height, width) <= 0:
        raise FrameError(FailureKind.ASPECT_RATIO, f"frame size {width}x{height} is empty")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise FrameError(
            FailureKind.ASPECT_RATIO, f"frame size {width}x{height} has an aspect ratio above {MAX_ASPECT_RATIO}"
        )
    h_bar = max(factor, round_by_factor(height, factor))
    w_bar = max(factor, round_by_factor(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = floor_by_factor(height / beta, factor)
        w_bar = floor_by_factor(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = ceil_by_factor(height * beta, factor)
        w_bar = ceil_by_factor(width * beta, factor)
    return h_bar, w_bar


def second_resize(frames: int, height: int, width: int, factor: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) after the Qwen3-VL video processor's resize of `frames` frames of height x width (multiples of
    `factor`, as the first resize leaves them): frames x height x width at most `max_pixels`, aspect ratio kept.
    Its floor (`size.shortest_edge`, 4096 px for Qwen3-VL-8B) is not applied: a video of at least one temporal patch
    of frames over the first resize's floor (128 tokens a frame by default) is far above it."""
    if frames * height * width <= max_pixels:
        return height, width
    beta = math.sqrt(frames * height * width / max_pixels)
    return max(factor, floor_by_factor(height / beta, factor)), max(factor, floor_by_factor(width / beta, factor))


def normalize_window(window: Window | None) -> Window | None:
    """Canonical form of a (start, end) window in seconds: None when it covers the whole video."""
    if window is None:
        return None
    start, end = window
    start = float(start) if start else 0.0
    end = float(end) if end is not None else None
    if not math.isfinite(start) or start < 0 or (end is not None and (not math.isfinite(end) or end <= start)):
        raise FrameError(FailureKind.WINDOW_INVALID, f"window {window!r} is not a valid (start, end) range in seconds")
    if start == 0.0 and end is None:
        return None
    return (start, end)


def frame_range(total_frames: int, fps: float, window: Window | None) -> tuple[int, int, int]:
    """(first, last, count) source frames inside the window (the reference's calculate_video_frame_range)."""
    if window is None:
        return 0, total_frames - 1, total_frames
    start, end = window
    max_duration = total_frames / fps
    first = math.ceil(max(0.0, min(start, max_duration)) * fps) if start is not None else 0
    last = total_frames - 1
    if end is not None:
        last = min(math.floor(max(0.0, min(end, max_duration)) * fps), total_frames - 1)
    if first > last:
        raise FrameError(
            FailureKind.WINDOW_INVALID,
            f"window {start}-{end} s selects no frame of a {max_duration:.2f} s video ({total_frames} frames)",
        )
    return first, last, last - first + 1


def linspace_indices(first: int, last: int, n: int) -> list[int]:
    """round(linspace(first, last, n)) computed exactly as the reference does (torch float32, half to even)."""
    return linspace_pick(first, last, n)


@dataclass(frozen=True)
class FrameCount:
    n: int  # frames to sample (a multiple of the family's temporal patch, at least one patch)
    requested: int  # what the rule asked for before the video's length capped it

    @property
    def clamped(self) -> bool:
        return self.n < self.requested


@dataclass(frozen=True)
class FrameSpec:
    """How to turn one video into model-ready frames. Hashable; `to_dict`/`from_dict` round-trip through JSON.

    Pixel fields given as None are filled with the family defaults at construction: video frames between 128
    and 768 tokens (the floor drops to max_pixels when that is lower), a per-video budget of 90 % of 128k tokens,
    images between 4 and 16384 tokens (a token is factor**2 pixels). Image budgets are independent of video
    budgets and do not affect cached frames. A fixed-size family (InternVL, LLaVA-OneVision) resizes every frame to a
    `side` x `side` square, the checkpoint's vision input size (models.resolve reads it from config.json).
    """

    family: str
    fps: float = 2.0
    max_frames: int = 32
    nframes: int | None = None  # exact frame count; overrides fps / max_frames
    min_frames: int = 4
    min_pixels: int | None = None  # per video frame
    max_pixels: int | None = None  # per video frame (also capped by total_pixels / frames)
    total_pixels: int | None = None  # per video
    image_min_pixels: int | None = None
    image_max_pixels: int | None = None
    side: int | None = None  # fixed-size families: the square frame side (default: the family's reference size)
    second_resize_max_pixels: int | None = None  # frames x height x width cap of the processor's second resize

    def __post_init__(self) -> None:
        rules = families.get(self.family).frames  # ValueError for an unknown family
        object.__setattr__(self, "family", families.canonical(self.family))
        if rules.resize == "fixed":
            object.__setattr__(self, "side", rules.default_side if self.side is None else self.side)
            _check_int("side", self.side, 1)
        elif self.side is not None:
            raise ValueError(f"side is for fixed-size families; {self.family} resizes within a pixel budget")
        if self.second_resize_max_pixels is not None:
            if rules.resize == "fixed":
                raise ValueError(f"second_resize_max_pixels is for families that resize within a pixel budget; "
                                 f"{self.family} resizes every frame to a fixed side")
            _check_int("second_resize_max_pixels", self.second_resize_max_pixels, 1)
        if not (isinstance(self.fps, (int, float)) and math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"fps must be a positive number, got {self.fps!r}")
        object.__setattr__(self, "fps", float(self.fps))
        _check_int("max_frames", self.max_frames, self.temporal)
        _check_int("min_frames", self.min_frames, 1)
        if self.nframes is not None:
            _check_int("nframes", self.nframes, self.temporal)
        token = self.factor**2
        # A max_pixels below the family's floor lowers the floor with it (the reference would assert instead).
        floor = VIDEO_MIN_TOKENS * token
        defaults = {
            "min_pixels": min(floor, self.max_pixels) if isinstance(self.max_pixels, int) else floor,
            "max_pixels": VIDEO_MAX_TOKENS * token,
            "total_pixels": round(DEFAULT_SEQ_TOKENS * 0.9) * token,
            "image_min_pixels": IMAGE_MIN_TOKENS * token,
            "image_max_pixels": IMAGE_MAX_TOKENS * token,
        }
        for name, default in defaults.items():
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, default)
            else:
                _check_int(name, value, 1)
        if self.max_pixels < self.min_pixels:
            raise ValueError(f"max_pixels ({self.max_pixels}) is below min_pixels ({self.min_pixels})")
        if self.image_max_pixels < self.image_min_pixels:
            raise ValueError(
                f"image_max_pixels ({self.image_max_pixels}) is below image_min_pixels ({self.image_min_pixels})"
            )

    @property
    def rules(self) -> families.FrameRules:
        return families.get(self.family).frames

    @property
    def factor(self) -> int:
        """Spatial resize factor: frame sides are multiples of it (the side itself for fixed-size families)."""
        rules = self.rules
        return rules.factor if rules.resize == "smart" else self.side

    @property
    def temporal(self) -> int:
        """Frames per temporal patch: frame counts are multiples of it."""
        return self.rules.temporal

    # -- the rules ----------------------------------------------------------------------------------------
    def frame_count(self, total_frames: int, source_fps: float) -> FrameCount:
        """How many frames to take from `total_frames` source frames at `source_fps` (smart_nframes)."""
        t = self.temporal
        if self.nframes is not None:
            requested = round_by_factor(self.nframes, t)
        else:
            low = ceil_by_factor(self.min_frames, t)
            high = floor_by_factor(self.max_frames, t)
            wanted = total_frames / source_fps * self.fps
            requested = floor_by_factor(min(max(wanted, low), high), t)
        n = min(requested, floor_by_factor(total_frames, t))
        # A 1-frame video (or window) still yields one temporal patch: the frame is repeated.
        return FrameCount(n=max(n, t), requested=requested)

    def indices(self, first: int, last: int, n: int) -> list[int]:
        """The n source frames the family's selection rule takes from frames first..last."""
        return self.rules.pick(first, last, n)

    def frame_cap(self, n: int) -> float:
        """Per-frame pixel ceiling for an n-frame video: the total budget spread over the frames, within limits."""
        limit = max(
            min(VIDEO_MAX_TOKENS * self.factor**2, self.total_pixels / n * self.temporal),
            int(self.min_pixels * 1.05),
        )
        return min(self.max_pixels, limit)

    def frame_size(self, height: int, width: int, n: int) -> tuple[int, int]:
        """Resized (height, width) of each frame of an n-frame video: what the model sees."""
        return self.resize_steps(height, width, n)[-1]

    def resize_steps(self, height: int, width: int, n: int) -> tuple[tuple[int, int], ...]:
        """The (height, width) each resize of an n-frame video leaves: the first resize's, then the second's when
        `second_resize_max_pixels` changes it (the frames are resized twice, as the maker's pipeline does)."""
        if self.rules.resize == "fixed":
            if min(height, width) <= 0:
                raise FrameError(FailureKind.ASPECT_RATIO, f"frame size {width}x{height} is empty")
            return ((self.side, self.side),)
        first = smart_resize(height, width, self.factor, self.min_pixels, self.frame_cap(n))
        if self.second_resize_max_pixels is None:
            return (first,)
        second = second_resize(n, *first, self.factor, self.second_resize_max_pixels)
        return (first,) if second == first else (first, second)

    def image_size(self, height: int, width: int) -> tuple[int, int]:
        """Resized (height, width) of a still image (independent image budget). Fixed-size families keep the image
        as it is: their processors tile it themselves."""
        if self.rules.resize == "fixed":
            return height, width
        return smart_resize(height, width, self.factor, self.image_min_pixels, self.image_max_pixels)

    # -- identity -----------------------------------------------------------------------------------------
    def key_fields(self) -> dict[str, Any]:
        """Exactly the settings that change the cached frames (not the family name, not image budgets)."""
        exact = self.nframes is not None
        rules = self.rules
        # Only what differs from the Qwen rules is added, so the Qwen families' cache keys stay what they were.
        family_rules = {k: v for k, v, default in (("side", self.side, None), ("temporal", rules.temporal, 2),
                                                   ("selection", rules.pick.__name__, "linspace_pick"))
                        if v != default}
        # Present only when set, as `side`: caches filled without a second resize keep their keys.
        if self.second_resize_max_pixels is not None:
            family_rules["second_resize_max_pixels"] = self.second_resize_max_pixels
        return {**family_rules,
            "factor": self.factor,
            "nframes": self.nframes,
            "fps": None if exact else self.fps,
            "min_frames": None if exact else self.min_frames,
            "max_frames": None if exact else self.max_frames,
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            "total_pixels": self.total_pixels,
        }

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name in ("side", "second_resize_max_pixels"):  # unset: run configs (and config hashes) stay as they were
            if out[name] is None:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown FrameSpec field(s): {', '.join(unknown)}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> FrameSpec:
        """A copy with some fields changed (None values are ignored, so CLI overrides can be passed as-is)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def _check_int(name: str, value: Any, minimum: int) -> None:
    # Not FrameSettings' caps: they bound what a user asks for; a fixed-size family's filled-in pixel defaults
    # (768 tokens of side**2 pixels) are beyond them and must still round-trip through to_dict/from_dict.
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def resolve_frame_spec(family: str, card: FrameSettings | Mapping[str, Any] | None,
                       checkpoint: Mapping[str, Any], overrides: FrameSettings | Mapping[str, Any] | None,
                       where: str) -> FrameSpec:
    """The one resolution of a sample's frame settings, for `run`, `plan`, `preprocess`, sweeps and training alike:
    the benchmark card's (its preset applied; none for training records), then what the checkpoint decides (its
    family, and a fixed-side family's frame side), then the user's overrides (unset values ignored). A mapping is read
    as `FrameSettings` (its bounds). `where` names the settings in the message of a UserError."""
    layers = [FrameSettings.read(card, f"{where}.frames"), FrameSettings.read(checkpoint, f"{where} checkpoint"),
              FrameSettings.read(overrides, where)]
    settings = FrameSettings()
    for layer in layers:
        settings = layer.over(settings)
    try:
        return FrameSpec(family=family, **settings.to_dict())
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: invalid frame settings {settings.to_dict()}: {exc}") from exc
