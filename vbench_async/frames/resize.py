"""Resize decoded frames exactly as the Qwen reference does (torchvision bicubic, antialiased), kept as uint8.

The reference resizes a uint8 tensor with torchvision, which interpolates in float, rounds and clamps back to
0..255 before the final `.float()`; so uint8 storage loses nothing against it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import DECODE_ERROR, VIDEO_MISSING, FrameError
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
    """An image file as RGB uint8 (H, W, 3), resized within the image budget of `spec` (or of a family's defaults)."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(spec, str):
        spec = FrameSpec(family=spec)
    path = Path(path)
    if not path.is_file():
        raise FrameError(VIDEO_MISSING, f"image not found: {path}")
    try:
        with Image.open(path) as img:
            if img.mode == "RGBA":  # transparent pixels become white, as in the reference
                rgb = Image.new("RGB", img.size, (255, 255, 255))
                rgb.paste(img, mask=img.split()[3])
            else:
                rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise FrameError(DECODE_ERROR, f"cannot read image {path}: {exc}") from exc
    height, width = spec.image_size(rgb.height, rgb.width)
    if (height, width) != (rgb.height, rgb.width):
        rgb = rgb.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(rgb, dtype=np.uint8)
