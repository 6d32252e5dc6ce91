"""Each family's resizing arithmetic (``objcli/images/sizes.py``) against the image processors
``transformers`` ships, run on images of the same sizes: Qwen2-VL's grid, LLaVA's (CLIP's) output size
and Idefics3's tiles, for sizes hypothesis draws (tiny, extreme ratios, large)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from objcli.images import sizes

pytest.importorskip("transformers")
pytest.importorskip("PIL")

SIDES = st.integers(min_value=3, max_value=1600)
RESIZED_SIDES = st.integers(min_value=3, max_value=900)  # processors that resample every image: fewer pixels


def _image(height: int, width: int):
    from PIL import Image

    return Image.new("RGB", (width, height))


@settings(max_examples=8, deadline=None)
@given(
    RESIZED_SIDES,
    RESIZED_SIDES,
    st.sampled_from([(3136, 12845056), (3136, 256 * 28 * 28), (256 * 28 * 28, 1280 * 28 * 28)]),
)
def test_qwen2_vl_grid_equals_the_processors(height, width, pixels):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    if max(height, width) / min(height, width) > 200:
        with pytest.raises(ValueError):
            sizes.smart_resize(height, width, 28, *pixels)
        return
    processor = Qwen2VLImageProcessorPil(min_pixels=pixels[0], max_pixels=pixels[1])
    grid = processor(_image(height, width), return_tensors="np")["image_grid_thw"][0]
    resized = sizes.smart_resize(height, width, 28, *pixels)
    assert (1, resized[0] // 14, resized[1] // 14) == tuple(int(g) for g in grid)


@settings(max_examples=10, deadline=None)
@given(RESIZED_SIDES, RESIZED_SIDES, st.booleans(), st.booleans())
def test_clip_output_size_equals_llavas(height, width, crop, pad):
    from transformers.models.llava.image_processing_pil_llava import LlavaImageProcessorPil

    config = {"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}, "do_center_crop": crop,
              "do_pad": pad}  # fmt: skip
    pixels = LlavaImageProcessorPil(**config)(_image(height, width), return_tensors="np")["pixel_values"][0]
    assert sizes.clip_output_size(height, width, config) == pixels.shape[1:]


@settings(max_examples=10, deadline=None)
@given(SIDES, SIDES, st.sampled_from([(4 * 364, 364), (4 * 384, 384), (2 * 512, 512)]), st.booleans())
def test_idefics3_tiles_equal_the_processors(height, width, edges, splitting):
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    config = {"size": {"longest_edge": edges[0]}, "max_image_size": {"longest_edge": edges[1]},
              "do_image_splitting": splitting}  # fmt: skip
    out = Idefics3ImageProcessorPil(**config)(_image(height, width), return_row_col_info=True, return_tensors="np")
    assert sizes.idefics3_tiles(height, width, config) == (out["rows"][0][0], out["cols"][0][0])
