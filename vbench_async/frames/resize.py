"""Resize decoded frames exactly as the Qwen reference does (torchvision bicubic, antialiased), kept as uint8.

The reference resizes a uint8 tensor with torchvision, which interpolates in float, rounds and clamps back to
0..255 before the final `.float()`; so uint8 storage loses nothing against it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..failure_kinds import FailureKind
from .errors import FrameError
from .spec import FrameSpec


def resize_frames(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """(N, h, w, 3) uint8 -> (N, height, width, 3) uint8, bicubic with antialias."""
    if frames.shape[1:3] == (height, width):
        return np.ascontiguousarray(frames)
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()
    y = F.interpolate(x, size=(height, width), mode="bicubic", align_corners=False, antialias=True)
    y = y.round_().clamp_(0, 255).to(torch.uint8)
    return y.permute(0, 2, 3, 1).contiguous().numpy()


def load_image(path: Path, spec: FrameSpec | str) -> np.ndarray:
    """An image file as RGB uint8 (H, W, 3), resized within the image budget of `spec` (or of a family's defaults).

    Every way a file can fail to be an image raises FrameError: PIL raises more than OSError (DecompressionBombError
    for a small file claiming a huge size, ValueError for modes it cannot convert, SyntaxError for some headers)."""
    from PIL import Image

    if isinstance(spec, str):
        spec = FrameSpec(family=spec)
    path = Path(path)
    if not path.is_file():
        raise FrameError(FailureKind.VIDEO_MISSING, f"image not found: {path}")
    try:
        with Image.open(path) as img:
            rgb = _to_rgb(img)
    except Image.DecompressionBombError as exc:
        raise FrameError(FailureKind.IMAGE_TOO_LARGE, f"image {path} is too large to load safely: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any decoder failure is this image's, never the run's
        raise FrameError(FailureKind.DECODE_ERROR, f"cannot read image {path}: {type(exc).__name__}: {exc}") from exc
    height, width = spec.image_size(rgb.height, rgb.width)
    if (height, width) != (rgb.height, rgb.width):
        rgb = rgb.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(rgb, dtype=np.uint8)


def _to_rgb(img):
    """RGB copy of a loaded image: transparent pixels become white (as in the reference); 16-bit and float greyscale
    are scaled to 8 bits, which PIL's convert("RGB") would clip instead."""
    from PIL import Image

    img.load()  # decode now, inside the caller's error handling (a truncated file fails here)
    if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        grey = np.asarray(img, dtype=np.float64)
        top = 65535.0 if img.mode.startswith("I;16") else max(float(grey.max()), 1.0)
        img = Image.fromarray(np.clip(grey / top * 255.0, 0, 255).astype(np.uint8), "L")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        rgb = Image.new("RGB", rgba.size, (255, 255, 255))
        rgb.paste(rgba, mask=rgba.split()[3])
        return rgb
    return img.convert("RGB")
