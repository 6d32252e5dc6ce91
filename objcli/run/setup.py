"""A run's setup, decided before any partition runs: its inputs and partitions, the tokenizer and its
engine, the objective and its columns, the pool, and the config_sha256 that names the configuration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import TransformConfig
from ..errors import ObjcliError
from ..formats import FORMATS
from ..formats.store import STORE, store_columns
from ..inputs import RecordLog, read_documents
from ..inputs.input_kinds import is_store_input
from ..inputs.origins import number_records
from ..inputs.pieces import InputKind
from ..inputs.text_formats import check_text_unit
from ..inputs.token_store import store_manifest
from ..objectives import REGISTRY
from ..objectives.base import Objective
from ..recipe import build_objective
from ..rows import ColumnSpec
from ..storage.identity import changed_store_inputs, run_identity, side_digests
from ..storage.remote import public_url
from ..tokenizers import Tokenizer, open_tokenizer, remember_tokenizer
from ..tokenizers.engine_probe import EngineChoice, choose_engine
from .first_pass import value_types
from .fitness import check_fitness, store_supply
from .input_groups import open_group
from .run_inputs import check_output_outside_inputs, check_sources_disjoint
from .stages import build_packer, run_columns
from .stores import (
    adopt_store_settings,
    check_plan_run,
    check_store_identity,
    check_store_run,
    check_tokenize_inputs,
)
from .token_inputs import check_token_run, token_supplies


@dataclass
class RunSetup:
    """What ``set_up_stages`` decides before any partition runs."""

    config: TransformConfig
    files: list
    partitions: list
    tokenizer: object
    objective: object
    columns: list
    config_sha256: str  # the configuration and the tokenizer's identity: what the manifest calls it
    pool: str = ""  # threads or processes: chosen by the executor (executors/pools.py)
    split_bounds: tuple = ()  # --split: each held-out split's interval of the keyed hash (splits.py)
    mixture: dict = dataclasses.field(default_factory=dict)  # --source: each source's estimate and rate
    task_tokenizer: str = ""  # where partitions load the tokenizer from, if not --tokenizer's path
    identity: dict = dataclasses.field(default_factory=dict)  # every file read besides the inputs (storage/identity.py)

    def input_names(self) -> tuple[str, ...]:
        """The run's input files as the manifest names them (what --provenance's files index); a
        token store's are the files it was tokenized from, as its own manifest names them."""
        names = []
        for f in self.files:
            stored = store_manifest(f.path)["inputs"] if f.format == STORE else [{"path": public_url(f.path)}]
            names += [entry["path"] for entry in stored]
        return tuple(names)


def _store_inputs(config: TransformConfig) -> list[str]:
    """The run's inputs that are token stores (``objcli tokenize``'s outputs)."""
    paths = config.mixture.paths if config.source else config.inputs
    return [path for path in paths if is_store_input(path)]


def _input_groups(paths: list[str], breaks) -> list[list[str]]:
    edges = [0, *sorted(b for b in set(breaks) if 0 < b < len(paths)), len(paths)]
    return [list(paths[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _files_and_partitions(config: TransformConfig, warn) -> tuple[list, list]:
    """Every input file and the run's partitions, numbered, each with its source (partitions never
    mix sources, nor inputs an --append added); with --provenance, records counted from each file's start."""
    files, partitions, by_source = [], [], {}
    for source, paths in (config.mixture.sources if config.source else {"": tuple(config.inputs)}).items():
        source_files = by_source[source] = []
        for group in _input_groups(paths, config.input_breaks if not config.source else ()):
            group_files, planned = open_group(group, config, source, warn)
            partitions += [
                dataclasses.replace(p, index=len(partitions) + i, source=source) for i, p in enumerate(planned)
            ]
            source_files += group_files
        files += source_files
    check_sources_disjoint(by_source)
    return files, number_records(partitions) if config.locates_records else partitions


def _supplies(files: list, partitions: list, config: TransformConfig) -> list:
    """What each token input and store gives an objective (text gives everything: not listed)."""
    sources = {p.input: p.source for p in partitions}
    stores = [store_supply(store_manifest(f.path), f.path) for f in files if f.kind is InputKind.STORE]
    return stores + token_supplies([f for f in files if f.kind is InputKind.TOKENS], config, sources)


def set_up_stages(config: TransformConfig, warn=None, before_tokenizer=None) -> RunSetup:
    """Inputs, partitions, tokenizer, objective and columns, all checked before any work (the pool is
    the executor's to choose). ``before_tokenizer(partitions)`` runs once the partitions are known,
    before the tokenizer loads: the local executor starts its fork server there, to load it at once."""
    check_output_outside_inputs(config)
    stores = _store_inputs(config)
    config = adopt_store_settings(config, stores)  # a token store fixes its documents and batches
    files, partitions = _files_and_partitions(config, warn)
    check_text_unit([f.format for f in files], config.text_unit)
    check_tokenize_inputs(config, partitions)
    if before_tokenizer is not None:
        before_tokenizer(partitions)
    encodes = REGISTRY.named(config.objective).encodes_rows(config.objective_options)  # FIM from a store encodes
    reads_text = any(p.input.kind is InputKind.TEXT for p in partitions) or not partitions or encodes
    config, tokenizer, objective, columns = set_up_objective(config, warn, first_texts(partitions, config), reads_text)
    if stores:
        check_store_run(stores, tokenizer, objective, tokenizer.special)
    check_token_run(partitions, config, tokenizer)
    check_fitness(objective, _supplies(files, partitions, config))
    if objective.inferred_values:  # value columns of the records' own types: a first pass finds them
        config = dataclasses.replace(config, value_types=value_types(config, partitions, tokenizer, objective))
        objective = build_objective(config, tokenizer)
        columns = run_columns(config, objective, build_packer(config, objective))
    if config.store_kind:  # objcli tokenize: the store's columns, whatever the objective would write
        columns = store_columns(tokenizer.total_vocab_size, config.store_kind, config.provenance)
    check_whole_documents(config, objective, columns)
    identity = run_identity(tokenizer, objective)
    check_store_identity(stores, identity)
    check_plan_run(config, stores, partitions)
    for store in stores if warn is not None else ():
        for line in changed_store_inputs(store, store_manifest(store)["inputs"]):
            warn(line)
    return RunSetup(
        config,
        files,
        partitions,
        tokenizer,
        objective,
        columns,
        config.config_sha256(tokenizer.sha256, side_digests(identity)),
        identity=identity,
    )


def check_whole_documents(config: TransformConfig, objective, columns) -> None:
    """Megatron's and the flat formats hold token sequences only; the trainer rebuilds positions and
    boundaries (and a mixture's blend file says each shard's source). The formats suggested hold every
    column the run writes."""
    kept = ("segment_ids", "positions", "per_segment", *(("category",) if config.format.blends_sources else ()))
    lost = [c.name for c in columns if c.name != "input_ids" and c.role not in kept]
    if "labels" in lost and objective.labels_are_inputs and config.format.whole_documents:
        stored = {c.name for c in config.format.recorded_columns(columns)}
        lost = [name for name in lost if name != "labels" or "loss_mask" not in stored]  # Megatron's chat mask
    refused = config.format.refuses(objective, columns)
    if refused:
        raise ObjcliError(refused)
    values = [c.name for c in columns if c.kind == "value"]
    fits = [
        n
        for n, f in FORMATS.items()
        if not (f.whole_documents or f.packs_positions)
        and (f.stores_values or not values)
        and not f.refuses(objective, columns)
    ]
    choose = f"choose --format {', '.join(fits[:-1])} or {fits[-1]}" if len(fits) > 1 else f"choose --format {fits[0]}"
    if config.format.whole_documents and lost:
        raise ObjcliError(
            f"--format {config.output_format} stores input_ids only, and {objective.name} also writes "
            f"{', '.join(lost)}; {choose}"
        )
    if values and not config.format.stores_values:
        raise ObjcliError(
            f"--format {config.output_format} stores integer columns, and {objective.name} also writes "
            f"{', '.join(values)} (strings, numbers or records); {choose}"
        )


def set_up_objective(
    config: TransformConfig, warn=None, sample: list[str] = (), reads_text: bool = True
) -> tuple[TransformConfig, Tokenizer, Objective, list[ColumnSpec]]:
    """Load the tokenizer, choose its engine and build the objective in the main process: this
    fixes the special tokens (and the order they are allocated in) and the engine (probed on
    ``sample``, the run's first batch) before any worker starts. The configuration comes back with
    the BOS policy (``--bos`` not given: the tokenizer's own template) and the engine resolved. A run
    that reads no text (token stores, tokenized files) encodes at most a piece or two: under ``auto``
    it takes the reference engine, which needs no probe (a fast engine's setup is seconds for a 128k
    vocabulary, in each worker)."""
    tokenizer = open_tokenizer(config.tokenizer)
    if reads_text or config.engine != "auto":
        tokenizer.engine_choice = choose_engine(tokenizer, config.engine, list(sample), warn)
    else:
        # The reference, recorded: a tokenizer.json's library reads the file only where something encodes after all.
        reference = tokenizer.deferred_reference() or choose_engine(tokenizer, "reference", [], warn).engine
        tokenizer.engine_choice = EngineChoice(reference, "not needed: no text is encoded (token inputs)")
    tokenizer.use_engine(tokenizer.engine_choice.engine)
    config = dataclasses.replace(config, engine=tokenizer.engine.name)
    remember_tokenizer(config.tokenizer, config.engine, tokenizer)  # threads of this process reuse it
    template_bos = tokenizer.template_bos()
    roles = (("bos", config.bos_token or template_bos), ("eos", config.eos_token), ("pad", config.pad_token))
    tokenizer.role_pieces = {r: p for r, p in roles if p}
    if config.pad_token and tokenizer.model_id(config.pad_token) is None:
        raise ObjcliError(
            f"--pad-token {config.pad_token!r}: not a piece of the tokenizer {config.tokenizer}; "
            f"{_pad_hint(config, tokenizer)}"
        )
    if config.bos is None:
        config = dataclasses.replace(config, bos=template_bos is not None)
    objective = build_objective(config, tokenizer)
    check_special_roles(tokenizer, warn)
    return config, tokenizer, objective, run_columns(config, objective, build_packer(config, objective))


def _pad_hint(config: TransformConfig, tokenizer: Tokenizer) -> str:
    """A hint that works when followed: a special piece of the tokenizer that no other role takes
    (the run's roles as they would be without the bad --pad-token), else leaving the option out."""
    bos = config.bos if config.bos is not None else tokenizer.template_bos() is not None
    without_pad = dataclasses.replace(config, pad_token=None, bos=bos)
    try:
        build_objective(without_pad, tokenizer)
        taken = set(tokenizer.special.ids.values())
        control = tokenizer.control_mask()
    except ObjcliError:
        return "leave --pad-token out to use the tokenizer's own pad token (or one objcli adds)"
    free = [i for i in range(min(len(control), tokenizer.vocab_size)) if control[i] and i not in taken]
    own = "leave --pad-token out to use the tokenizer's own pad token (or one objcli adds)"
    if not free:
        return own
    return f"name a special piece no other role uses, such as --pad-token {tokenizer.piece(free[0])!r}, or {own}"


def first_texts(partitions, config: TransformConfig) -> list[str]:
    """The run's first batch of text, for the engine probe: none from a stream (read once, later)."""
    first = partitions[0] if partitions else None
    if first is None or first.input.is_stream or first.input.kind is not InputKind.TEXT:
        return []  # a stream is read once, later; a token store or tokenized input has no text
    options = config.read_options(False, first.source)
    try:
        return next(read_documents(partitions[0], options, RecordLog(strict=False)), [])
    except (ObjcliError, OSError):
        return []  # the partition itself reports what is wrong with its input


def check_special_roles(tokenizer: Tokenizer, warn=None) -> None:
    """Two special roles on one id (EOS = [MASK], a FIM sentinel = EOS) would make the objective's
    output ambiguous: an error. BOS = EOS, as some BPE models ship, and a special that is an
    ordinary piece text can produce (``--eos-token ▁the``) are warnings."""
    special, roles_of = tokenizer.special, {}
    for role, token_id in special.ids.items():
        roles_of.setdefault(token_id, []).append(role)
    for token_id, roles in roles_of.items():
        if len(roles) > 1 and set(roles) != {"bos", "eos"}:
            pieces = ", ".join(f"{r} {special.pieces.get(r)!r}" for r in roles)
            raise ObjcliError(
                f"special tokens collide: {pieces} are all id {token_id}; give each role a piece of "
                "its own (--bos-token, --eos-token, --pad-token, --fim-tokens)"
            )
        if len(roles) > 1 and warn:
            warn(f"BOS and EOS are the same id ({token_id}); documents are separated by one token")
    control = tokenizer.control_mask()
    for role, token_id in special.ids.items():
        if warn and role != "unk" and token_id < tokenizer.vocab_size and not control[token_id]:
            warn(
                f"the {role} token {special.pieces.get(role)!r} (id {token_id}) is an ordinary piece: "
                "text can produce it"
            )
