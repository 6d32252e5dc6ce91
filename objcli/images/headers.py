"""Each image's size, read from its header: never its pixels.

Pillow's ``Image.open`` reads a file's header and stops (its pixels are decoded only on ``load()``),
so a JPEG, PNG, WebP, GIF or BMP of any size costs a few kilobytes: an object (``s3://``, ``gs://``,
``https://``) is read by ranged requests of ``HEADER_BLOCK`` bytes. The size is the one the model's
processor sees: ``transformers.image_utils.load_image`` applies the EXIF orientation, so orientations
5-8 (a quarter turn) swap height and width (the EXIF the header holds: a PNG's eXIf chunk written after
its pixels, which no camera writes, is not looked for). Sizes are remembered for the last ``CACHE`` references
(an image many records show is read once; memory stays flat however many images a corpus holds).
"""

from __future__ import annotations

import os
from collections import OrderedDict

from ..storage.remote import filesystem, is_url, storage_errors

HEADER_BLOCK = 64 << 10  # one ranged request holds the header of nearly every image (EXIF of phones too)
CACHE = 4096
TRANSPOSED = frozenset({5, 6, 7, 8})  # EXIF orientations that turn the image a quarter
EXIF_ORIENTATION = 0x0112


class BadImage(Exception):
    """An image that cannot be used: ``reason`` is the counter (``image_missing``, ``image_unreadable``)."""

    def __init__(self, reason: str, reference: str, detail: str):
        super().__init__(f"image {reference}: {detail}")
        self.reason, self.reference = reason, reference


def resolve(reference: str, media_dir: str | None) -> str:
    """A record's image reference as a path or URL to open: relative paths below ``--media-dir``."""
    if media_dir is None or is_url(reference) or os.path.isabs(reference):
        return reference
    return media_dir.rstrip("/") + "/" + reference if is_url(media_dir) else os.path.join(media_dir, reference)


class ImageSizes:
    """(height, width) of images by reference, as their processor will see them."""

    def __init__(self):
        self._known: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def size(self, reference: str) -> tuple[int, int]:
        known = self._known.get(reference)
        if known is not None:
            self._known.move_to_end(reference)
            return known
        found = self._read(reference)
        self._known[reference] = found
        if len(self._known) > CACHE:
            self._known.popitem(last=False)
        return found

    def _read(self, reference: str) -> tuple[int, int]:
        from PIL import Image, UnidentifiedImageError

        try:
            with _open(reference) as stream, Image.open(stream) as image:
                width, height = image.size
                orientation = _orientation(image)
        except FileNotFoundError:
            raise BadImage("image_missing", reference, "no such file or object") from None
        except (UnidentifiedImageError, Image.DecompressionBombError, SyntaxError, ValueError, EOFError) as error:
            raise BadImage("image_unreadable", reference, f"not an image Pillow reads ({error})") from None
        except storage_errors() as error:
            raise BadImage("image_unreadable", reference, f"not readable ({error})") from None
        if width < 1 or height < 1:
            raise BadImage("image_unreadable", reference, f"its header says {width}x{height}")
        return (width, height) if orientation in TRANSPOSED else (height, width)


def _orientation(image) -> int:
    """The EXIF orientation the header holds (JPEG's APP1, WebP's and PNG's EXIF chunk before the pixels).
    ``getexif()`` is not called: for a PNG it decodes the pixels to look past them."""
    from PIL import Image

    data = image.info.get("exif")
    if not data:
        return 1
    exif = Image.Exif()
    exif.load(data)
    return exif.get(EXIF_ORIENTATION, 1)


def _open(reference: str):
    if not is_url(reference):
        if os.path.exists(reference) and not os.path.isfile(reference):  # a folder, a FIFO: never waited on
            raise BadImage("image_unreadable", reference, "not a regular file")
        return open(reference, "rb")  # noqa: SIM115 - closed by the caller's with
    fs, inner = filesystem(reference)
    return fs.open(inner, "rb", block_size=HEADER_BLOCK, cache_type="readahead")
