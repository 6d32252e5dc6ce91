"""How many tokens an image of a given size becomes: each processor family's own resizing rules, from
the image's height and width alone (pure arithmetic, no pixel read).

Each function mirrors the image processor ``transformers`` ships for the family (the PIL backend's
``_preprocess``, which the torchvision one matches), so a count equals what the processor's
``pixel_values`` and ``image_grid_thw`` / ``rows`` / ``cols`` give for the same image.
"""

from __future__ import annotations

import math

IDEFICS3_MAX_IMAGE_SIZE = 4096  # transformers' MAX_IMAGE_SIZE: no side beyond 4k after the first resize


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's resize: both sides multiples of ``factor`` (patch x merge), the area within
    [min_pixels, max_pixels], the aspect ratio kept as closely as that allows."""
    if max(height, width) / min(height, width) > 200:
        ratio = max(height, width) / min(height, width)
        raise ValueError(f"an aspect ratio of {ratio:.0f} (the processor's limit: 200)")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def shortest_edge_size(height: int, width: int, shortest: int) -> tuple[int, int]:
    """CLIP's resize to a shortest edge, the other side scaled and truncated (``default_to_square=False``)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest, int(shortest * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def clip_output_size(height: int, width: int, config: dict) -> tuple[int, int]:
    """The (height, width) of LLaVA's ``pixel_values`` (CLIP's processor): padded to a square, resized,
    centre-cropped, each where the config says so (a crop pads an image smaller than it)."""
    if config.get("do_pad"):
        height = width = max(height, width)
    size = config.get("size") or {"shortest_edge": 224}
    if config.get("do_resize", True):
        if "shortest_edge" in size:
            height, width = shortest_edge_size(height, width, int(size["shortest_edge"]))
        else:
            height, width = int(size["height"]), int(size["width"])
    if config.get("do_center_crop", True):
        crop = config.get("crop_size") or {"height": 224, "width": 224}
        if isinstance(crop, int):
            crop = {"height": crop, "width": crop}
        height, width = int(crop["height"]), int(crop["width"])
    return height, width


def _rescale_to_longest(height: int, width: int, longest: int) -> tuple[int, int]:
    """Idefics3's first resize: the longest side to ``longest`` (up or down), the other rounded up to even."""
    aspect = width / height
    if width >= height:
        width, height = longest, int(longest / aspect)
        height += height % 2
    else:
        height, width = longest, int(longest * aspect)
        width += width % 2
    return max(height, 1), max(width, 1)


def _below_upper_bound(height: int, width: int, bound: int) -> tuple[int, int]:
    aspect = width / height
    if width >= height and width > bound:
        width, height = bound, int(bound / aspect)
    elif height > width and height > bound:
        height, width = bound, int(bound * aspect)
    return max(height, 1), max(width, 1)


def idefics3_tiles(height: int, width: int, config: dict) -> tuple[int, int]:
    """Idefics3's and SmolVLM's (rows, cols) of tiles (0, 0: the image is one tile): resized so its longest
    side is ``size["longest_edge"]``, then to multiples of the tile side, then cut into tiles."""
    if not config.get("do_image_splitting", True):
        return 0, 0
    tile = int((config.get("max_image_size") or {"longest_edge": 364})["longest_edge"])
    size = config.get("size") or {"longest_edge": 4 * 364}
    if config.get("do_resize", True):
        if size.get("longest_edge"):
            height, width = _rescale_to_longest(height, width, int(size["longest_edge"]))
            height, width = _below_upper_bound(height, width, IDEFICS3_MAX_IMAGE_SIZE)
        else:
            height, width = int(size["height"]), int(size["width"])
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    if height > tile or width > tile:
        return (height - tile) // tile + 1, (width - tile) // tile + 1
    return 0, 0
