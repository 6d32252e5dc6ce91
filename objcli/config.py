"""The resolved configuration of one ``transform`` run, validated before any work starts."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .errors import ObjcliError
from .formats import FORMAT_NAMES as OUTPUT_FORMATS
from .formats import format_of
from .formats.sizes import ShardSize, parse_bytes
from .inputs.partitioning import INPUT_FORMATS
from .options import INPUT, ORDER, OUTPUT, ROWS, RUN, TEXT_UNITS, LiveChoices, check_field, option
from .order.mixture import Mixture
from .order.option_checks import check_order_options
from .packing import PACKERS
from .packing.option_checks import check_row_options
from .storage.remote import check_url_path
from .stores import StoreKind

ENGINE_CHOICES = ("auto", "reference", "sentencepiece", "tokenizers", "quicktok", "gigatoken", "tiktoken", "python")

MIN_PARTITION_BYTES = 16 * 2**10
REMAINDERS = ("drop", "pad")
ROW_TOKENS = ("seq-len", "seq-len+1")


@dataclass(frozen=True)
class TransformConfig:
    """Every setting of a run that shapes its output; the ``option`` metadata is the one definition
    of each ``objcli transform`` option (help, default, choices, range)."""

    inputs: tuple[str, ...] = option(
        (), "Files, folders (searched recursively) and globs; '-' reads standard input.", cli=False
    )
    tokenizer: str = option(
        "", "SentencePiece .model, or Hugging Face tokenizer.json (or its folder).", short="-t", group=INPUT
    )
    objective: str = option("clm", "{objectives}.", group=ROWS)
    objective_options: Any = None
    output: str = option("", "Output folder, or '-' for an Arrow IPC stream on stdout.", short="-o", group=OUTPUT)
    seq_len: int = option(
        2048, "Tokens per row (the most per row with --packing none).", minimum=2, maximum=2**24, group=ROWS
    )
    output_format: str = option("arrow", "Shard format.", choices=OUTPUT_FORMATS, flag="--format", group=OUTPUT)
    shard_size: str = option("256MB", "Rows per shard (10000) or bytes of token data (256MB).", group=OUTPUT)
    provenance: bool = option(
        False, "Record each row segment's file, record and character span (see 'objcli trace').", group=OUTPUT
    )
    input_format: str = option(
        "auto", "Input format; auto uses extension, then content.", choices=INPUT_FORMATS, group=INPUT
    )
    text_key: str = option(
        "text", "Text field or column (meta.body: nested; code=content: one --source's).", group=INPUT
    )
    text_unit: str = option(
        "line",
        "Plain text: a document per line, per blank-line paragraph, or per file.",
        choices=TEXT_UNITS,
        group=INPUT,
    )
    strict: bool = option(False, "Stop at the first bad record instead of skipping and counting it.", group=INPUT)
    bos: bool | None = option(
        None, "Put BOS before every document [default: as the tokenizer's own template].", group=ROWS
    )
    eos: bool | None = option(
        None, "Put EOS after every document [default: the objective's, as its paper].", group=ROWS
    )
    seed: int = option(
        0, "Seed for objectives that draw random numbers.", minimum=0, maximum=2**64 - 1, group=ROWS
    )  # keyed hashes take it as an unsigned 64-bit integer
    bos_token: str | None = option(
        None, "BOS piece instead of the tokenizer's own (looked up, else allocated).", group=ROWS
    )
    eos_token: str | None = option(
        None, "EOS piece instead of the tokenizer's own (looked up, else allocated).", group=ROWS
    )
    pad_token: str | None = option(
        None, "Padding piece, one the tokenizer has (else its own pad, or <pad> added).", group=ROWS
    )
    partition_size: str = option("16MiB", "Size of a work unit: small files are grouped, large ones cut.", group=RUN)
    batch_size: str = option("1MiB", "Text per tokenizer batch (memory per worker grows with it).", group=RUN)
    max_document_chars: int = option(
        10_000_000, "Longer records become several documents (0: never cut).", minimum=0, group=INPUT
    )
    packing: str | None = option(
        None,
        "How examples become rows [default: the objective's first; see --help].",
        choices=LiveChoices(PACKERS.names),
        group=ROWS,
    )
    pack_window: int = option(
        4_000_000, "[--packing best-fit] Tokens gathered before packing.", minimum=1, maximum=2**31 - 1, group=ROWS
    )
    pad_to_multiple: int = option(
        1,
        "[--packing best-fit] Pad each packed sequence to a multiple (2 x CP x TP).",
        minimum=1,
        maximum=2**20,
        group=ROWS,
    )
    remainder: str = option(
        "drop", "[--packing concat] The last partial row of each partition.", choices=REMAINDERS, group=ROWS
    )
    row_tokens: str = option(
        "seq-len", "[clm, fim, mtp] seq-len+1: overlap by a token (Megatron, nanoGPT).", choices=ROW_TOKENS, group=ROWS
    )
    shuffle_documents: str | None = option(
        None, "Shuffle documents in windows of this much text (e.g. 16MiB).", group=ORDER
    )
    shuffle_rows: bool = option(
        False, "Shuffle every row of the run across all shards (a second pass, bounded memory).", group=ORDER
    )
    input_breaks: tuple[int, ...] = option(
        (),
        "Indices of INPUTS where a partition must start (what --append records: "
        "each appended set of inputs begins partitions of its own).",
        cli=False,
        group=INPUT,
    )
    source: tuple[str, ...] = option(
        (), "NAME=PATH: one source of a mixture (repeat it); instead of INPUTS.", group=ORDER
    )
    weights: str = option(
        "", "With --source: shares of the output's tokens (web=0.7,code=0.3) or budgets (code=2B).", group=ORDER
    )
    max_epochs: str = option(
        "",
        "With --source: the most copies of a source's documents (code=4); more is capped, and said.",
        group=ORDER,
    )
    split: str = option("", "Held-out splits by a keyed hash of each document: validation=0.5%,test=0.1%.", group=ORDER)
    # Not an option: `objcli tokenize` sets it (what the store holds: a stores.StoreKind), and the run writes a
    # token store instead of an objective's rows; the manifest spells it as config.token_store.
    store_kind: StoreKind | None = None
    # Not an option: the options the user gave (command line or recipe), by field name. A token store
    # fixes how its text was read; an option left at its default takes the store's value, one given is
    # compared with it, even where it is the default (Click knows which were given).
    given: frozenset[str] = dataclasses.field(default=frozenset(), compare=False, repr=False)
    # Not an option: the types of value columns that the records decide (objectives/value_types.py),
    # found by the first pass ((column, type) pairs); from the data, as the rows are.
    value_types: tuple = dataclasses.field(default=(), compare=False, repr=False)
    engine: str = option(
        "auto",
        "What encodes: auto (the fastest installed engine that passes the parity probe), "
        "reference (the file's own library), or one by name.",
        choices=ENGINE_CHOICES,
        group=INPUT,
    )

    def __post_init__(self):
        from .objectives import REGISTRY

        for f in dataclasses.fields(self):
            check_field(f, getattr(self, f.name))
        objective = REGISTRY.named(self.objective)
        if self.objective_options is None:
            object.__setattr__(self, "objective_options", objective.options_type())
        if self.eos is None:
            object.__setattr__(self, "eos", objective.default_eos)
        accepted = objective.packers(self.objective_options)
        if self.packing is None:
            # Megatron and the flat token formats hold whole documents: their trainers pack themselves.
            whole = self.format.whole_documents and "none" in accepted
            object.__setattr__(self, "packing", "none" if whole else accepted[0])
        elif self.packing not in accepted:
            raise ObjcliError(
                f"--packing {self.packing}: {objective.name} takes {', '.join(accepted)}" + self._options_hint()
            )
        self._check_ignored_options()
        check_url_path(self.output, "-o")
        for where in (*self.inputs, *(s.partition("=")[2] for s in self.source)):
            check_url_path(where, "input")
        check_url_path(self.tokenizer, "--tokenizer")
        if self.output == "-" and not self.format.streams_to_stdout:
            raise ObjcliError("-o - writes an Arrow IPC stream; use --format arrow or write to a folder")
        ShardSize.parse(self.shard_size)
        if parse_bytes(self.partition_size, "--partition-size") < MIN_PARTITION_BYTES:
            raise ObjcliError(
                f"--partition-size {self.partition_size}: must be at least 16KiB (each partition is a task "
                "with its own shards)"
            )
        parse_bytes(self.batch_size, "--batch-size")
        check_order_options(self)

    def _check_ignored_options(self) -> None:
        """An option that would do nothing in this run is an error, not a silent no-op."""
        check_row_options(self)
        breaks = list(self.input_breaks)
        if breaks and (
            self.source
            or breaks != sorted(set(breaks))
            or not all(isinstance(b, int) and 0 < b < len(self.inputs) for b in breaks)
        ):
            raise ObjcliError(
                f"input-breaks {breaks}: increasing indices between 1 and {len(self.inputs) - 1} of "
                "INPUTS, written by --append; fix the recipe or leave it out"
            )
        object.__setattr__(self, "input_breaks", tuple(breaks))
        if "," in self.text_key or "=" in self.text_key:
            self.mixture  # noqa: B018 - parsed now: a bad SOURCE=KEY is said before anything runs
        if self.text_key != "text" and self.reads.records:
            raise ObjcliError(
                f"--text-key {self.text_key}: {self.objective} reads whole records; name the messages "
                "field with --messages-key"
            )
        for name in ("bos_token", "eos_token", "pad_token"):
            if getattr(self, name) == "":
                flag = "--" + name.replace("_", "-")
                raise ObjcliError(
                    f"{flag} '': an empty piece is no token; name a piece, or leave {flag} out to use "
                    "the tokenizer's own"
                )

    @property
    def reads(self):
        """What the objective reads with its options (``supply.Reads``): whole records, pieces it tokenizes, ..."""
        from .objectives import REGISTRY

        return REGISTRY.named(self.objective).reads(self.objective_options)

    def read_options(self, strict: bool, source: str = ""):
        """How this run reads a source's inputs: text fields, or whole records for objectives that read them."""
        from .inputs import ReadOptions

        key = self.mixture.text_key_of(source)
        records, located = self.reads.records, self.locates_records
        return ReadOptions(key, self.text_unit, strict, self.batch_bytes, records, located)

    @property
    def locates_records(self) -> bool:
        """Whether records are read with their origin (file, record): for --provenance, and for
        objectives that read whole records, whose skips name their first record's line."""
        return self.provenance or self.reads.records

    @property
    def shuffle_pass(self) -> bool:
        """Whether the run shuffles its rows in a second pass (``--shuffle-rows``; a plan's rows are put in
        the same order on read instead)."""
        return self.shuffle_rows and not self.format.packs_positions

    @property
    def sequence_limit(self) -> int:
        """The most tokens of one example a row holds: the row's, or with ``--pad-to-multiple N`` the
        most whose padded sequence fits (a multiple of N, plus the token the reader shifts in NVIDIA's
        layouts)."""
        if self.pad_to_multiple == 1:
            return self.row_length
        shift = int(self.format.shifts_each_sequence)
        return (self.row_length - shift) // self.pad_to_multiple * self.pad_to_multiple

    @functools.cached_property
    def mixture(self) -> Mixture:
        """``--source``, ``--weights``, ``--max-epochs`` and ``--text-key``, parsed once."""
        return Mixture.parse(self.source, self.weights, self.max_epochs, self.text_key)

    @property
    def format(self):
        """The output format (formats/): what it stores and which packers it takes."""
        return format_of("store" if self.store_kind else self.output_format)

    @property
    def row_length(self) -> int:
        """Tokens per row: ``seq_len``, or one more whose label is in the row (``--row-tokens seq-len+1``)."""
        return self.seq_len + (self.row_tokens == "seq-len+1")

    def _options_hint(self) -> str:
        layout = getattr(self.objective_options, "layout", None) or getattr(self.objective_options, "fim_level", None)
        return f" with these options ({layout})" if layout else ""

    @property
    def shard_limit(self) -> ShardSize:
        return ShardSize.parse(self.shard_size)

    @property
    def partition_bytes(self) -> int:
        return parse_bytes(self.partition_size, "--partition-size")

    @property
    def shuffle_window_bytes(self) -> int | None:
        return None if self.shuffle_documents is None else parse_bytes(self.shuffle_documents, "--shuffle-documents")

    @property
    def batch_bytes(self) -> int:
        return parse_bytes(self.batch_size, "--batch-size")

    def to_json(self) -> dict:
        """Every setting that shapes the output (not where it goes, how many workers run, or which
        exact engine encodes)."""
        data = dataclasses.asdict(self)
        data["objective_options"] = dataclasses.asdict(self.objective_options)
        data["inputs"] = list(self.inputs)
        del data["output"]
        del data["engine"]  # every engine writes the same tokens (the parity probe sees to it)
        if not self.input_breaks:
            del data["input_breaks"]  # as before appends existed: the config_sha256 of other runs stays
        else:
            data["input_breaks"] = list(self.input_breaks)
        if self.pad_token is None:
            del data["pad_token"]  # as before --pad-token existed
        if not self.provenance:
            del data["provenance"]  # as before --provenance existed: the config_sha256 of other runs stays
        del data["store_kind"]
        if self.store_kind:
            data["token_store"] = str(self.store_kind)
        del data["given"]  # how the values were chosen, not what they are
        del data["value_types"]  # what the data holds, not a setting
        if not self.max_epochs:
            del data["max_epochs"]  # as before --max-epochs existed: the config_sha256 of other runs stays
        if self.pad_to_multiple == 1:
            del data["pad_to_multiple"]  # as before --pad-to-multiple existed: the config_sha256 of other runs stays
        return data

    def config_sha256(self, tokenizer_sha256: str, side_files: dict[str, str] | None = None) -> str:
        """sha256 of the configuration, the tokenizer and the digests of the other files the run reads
        (``storage/identity.py``): two runs with equal ``config_sha256`` write the same bytes."""
        identity = {"config": self.to_json(), "tokenizer": tokenizer_sha256}
        if side_files:  # as before identities existed, where there are none: config_sha256 stays
            identity["files"] = side_files
        payload = json.dumps(identity, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()
