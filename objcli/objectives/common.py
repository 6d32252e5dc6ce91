"""What several objectives share without importing each other: option definitions that read the
same everywhere, and the checks behind them."""

from __future__ import annotations

from ..errors import ObjcliError
from ..kernels.spans import raw_lengths_for
from ..options import option
from .sentences import SPLITTERS

FINAL_CHUNKS = ("drop", "pad")
LAYOUTS = ("decoder", "encdec")


def mask_prob_option():
    return option(0.15, "Probability of selecting a token (0.25 is ELECTRA-large).", minimum=0, maximum=1)


def chat_template_option():
    return option(
        None,
        "Jinja chat template (.jinja, or a JSON file with chat_template) "
        "[default: the one in tokenizer_config.json beside the tokenizer].",
    )


def template_date_option():
    return option("2024-07-26", "The date strftime_now gives templates (fixed, not the day's).")


def sentences_option():
    return option("prose", "Sentence splitting: prose rules, or one sentence per line (code).", choices=SPLITTERS)


def layout_option(default: str):
    return option(default, "Rows for a decoder-only or an encoder-decoder model.", choices=LAYOUTS)


def final_chunk_option():
    return option(
        "drop", "A partition's last, short chunk: dropped, or used at its own length and padded.", choices=FINAL_CHUNKS
    )


def extra_ids_option():
    return option(
        None,
        "Sentinels appended when the model has no <extra_id_N> [default: 100, or as many as a row needs].",
        minimum=1,
        maximum=2**24,
    )


def check_probabilities(mask_prob: float, mask_replace: float, random_replace: float) -> None:
    if mask_prob == 0:
        raise ObjcliError("--mask-prob 0: nothing would be predicted; use a probability above 0")
    if mask_replace + random_replace > 1:
        raise ObjcliError(
            f"--mask-replace {mask_replace} + --random-replace {random_replace} = {mask_replace + random_replace:g}: "
            "must not exceed 1 (the rest stay unchanged)"
        )


def check_density(noise_density: float, mean_span: float) -> None:
    if not 0 < noise_density < 1:
        raise ObjcliError(f"--noise-density {noise_density}: must be between 0 and 1 (exclusive)")
    if mean_span < 1:
        raise ObjcliError(f"--mean-span {mean_span}: must be at least 1")


def raw_lengths_or_fail(
    inputs_length: int, noise_density: float, mean_span: float, what: str = "--seq-len"
) -> tuple[int, int]:
    lengths = raw_lengths_for(inputs_length, noise_density, mean_span)
    if lengths is None or lengths[0] < 2 or inputs_length < 3:
        raise ObjcliError(
            f"{what} {inputs_length}: no chunk length gives inputs of exactly that length at noise density "
            f"{noise_density} and mean span {mean_span}; choose a larger {what} (at least 3)"
        )
    return lengths
