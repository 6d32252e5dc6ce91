"""The options of how examples become rows that would do nothing, or the wrong thing, in a run: each one
line before any work (``TransformConfig`` asks here)."""

from __future__ import annotations

from ..errors import ObjcliError


def check_row_options(config) -> None:
    """--packing against the format, --row-tokens, --remainder, --pack-window and --pad-to-multiple against
    the packer and the objective."""
    if config.format.packers is not None and config.packing not in config.format.packers:
        raise ObjcliError(
            f"--format {config.output_format} writes whole documents back to back and the trainer cuts "
            f"its windows; it takes --packing {' or '.join(config.format.packers)}, not {config.packing}"
        )
    if config.row_tokens != "seq-len":
        _check_row_tokens(config)
    if config.remainder != "drop" and config.packing != "concat":
        raise ObjcliError(f"--remainder {config.remainder}: applies to --packing concat, not {config.packing}")
    if config.pack_window != 4_000_000 and config.packing != "best-fit":
        raise ObjcliError(f"--pack-window applies to --packing best-fit, not {config.packing}")
    if config.pad_to_multiple != 1:
        _check_pad_to_multiple(config)


def _check_row_tokens(config) -> None:
    from ..objectives import REGISTRY

    if not REGISTRY.named(config.objective).next_token_rows:
        raise ObjcliError(
            f"--row-tokens {config.row_tokens}: applies to next-token objectives (clm, fim, mtp), whose "
            f"trainers shift labels; {config.objective}'s rows carry their own labels"
        )
    if config.format.whole_documents and config.packing == "none":
        raise ObjcliError(
            f"--row-tokens {config.row_tokens}: --format {config.output_format} holds whole documents and "
            "the trainer cuts its own windows of seq_len + 1; drop --row-tokens"
        )


def _check_pad_to_multiple(config) -> None:
    from ..objectives import REGISTRY

    flag = f"--pad-to-multiple {config.pad_to_multiple}"
    if config.packing != "best-fit":
        raise ObjcliError(
            f"{flag}: pads each sequence of a packed row; it takes --packing best-fit, not {config.packing}"
        )
    objective = REGISTRY.named(config.objective)
    if not objective.pads_sequences:
        raise ObjcliError(
            f"{flag}: the padding inside a sequence is kept out of the loss by its labels (-100), and "
            f"{config.objective}'s rows have none; use it with --objective chat"
        )
    if config.sequence_limit < config.pad_to_multiple:
        raise ObjcliError(
            f"{flag}: --seq-len {config.seq_len} holds no sequence padded to a multiple of {config.pad_to_multiple}"
            f"{' plus the token the reader shifts' if config.format.shifts_each_sequence else ''}; raise --seq-len"
        )
