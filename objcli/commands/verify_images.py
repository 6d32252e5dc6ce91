"""``verify``'s check of rows with images (``--processor``): each image's span lies in its row, in order,
starts and ends on its image token, takes no loss and stays in one packed sequence; every image token of
the row is inside a span, and a row names as many images as it has spans."""

from __future__ import annotations

import numpy as np

from ..formats import Column
from ..kernels import IGNORE


def _row(column: Column | None, row: int) -> np.ndarray | None:
    return None if column is None else column.values[column.offsets[row] : column.offsets[row + 1]]


def check_image_spans(tokens: Column, spans: Column, images: Column | None, labels: Column | None,
                      segments: Column | None) -> list[str]:  # fmt: skip
    for row, row_spans in enumerate(spans.values):
        ids, row_labels, row_segments = _row(tokens, row), _row(labels, row), _row(segments, row)
        if images is not None and len(images.values[row]) != len(row_spans):
            return [f"row {row}: {len(images.values[row])} images for {len(row_spans)} image spans"]
        covered = np.zeros(len(ids), dtype=bool)
        end_before = 0
        for start, end in row_spans:
            if not end_before <= start < end <= len(ids):
                return [f"row {row}: image span [{start}, {end}) out of order or outside the row"]
            if ids[start] != ids[end - 1] or ids[start] != ids[row_spans[0][0]]:
                return [f"row {row}: image span [{start}, {end}) does not start and end on the image token"]
            if row_labels is not None and np.any(row_labels[start:end] != IGNORE):
                return [f"row {row}: an image token of span [{start}, {end}) carries loss"]
            if row_segments is not None and len(np.unique(row_segments[start:end])) != 1:
                return [f"row {row}: image span [{start}, {end}) crosses packed sequences"]
            covered[start:end], end_before = True, end
        if len(row_spans) and np.any((ids == ids[row_spans[0][0]]) & ~covered):
            return [f"row {row}: an image token lies outside every image span"]
    return []
