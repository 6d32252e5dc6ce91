"""``objcli transform NEW -o OUT --append``: new inputs become new partitions after the output's own.

The run is the transform of the output's inputs followed by the new ones, with the output's
configuration (its manifest's recipe; an option given that differs is an error naming it). The
output's finished partitions are adopted as if an interrupted run of that configuration had
finished them: their shards are hard-linked into the work folder under their partition names and
a completion marker is written for each, so only the new partitions run, and their keyed
randomness continues from their partition index. So appending B to transform(A) writes exactly the
shards transform(A + B) writes. The old manifest stays until the new one replaces it (last,
atomically): a crash leaves the old output valid, and the same command resumes the append.

An output on object storage is appended the same way, its objects copied server-side into the work
prefix. Refused where an append cannot give what a whole run would: ``--shuffle-rows`` (one
permutation of every row), ``--source`` mixtures (rates follow from every source's size),
held-out splits given as counts (they follow from the corpus size), streams, and inputs whose
files changed since the output was written.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ObjcliError
from ..storage.manifest import MANIFEST_NAME, decode_manifest, final_prefix, reshard_command, reshard_converts
from ..storage.partitions import PartitionResult, write_marker
from ..storage.shard_info import ShardRecord, work_prefix
from .run_inputs import make_run_key

COMPARED_AWAY = {"inputs", "output", "engine", "input_breaks"}  # what an append may differ in


def appended_values(given: dict, execution: dict) -> tuple[dict, dict]:
    """(the run's option values, the output's manifest) for ``--append``."""
    import json

    from ..recipe import load_recipe

    if execution.get("recipe") is not None or execution.get("overwrite") or execution.get("print_recipe"):
        raise ObjcliError(
            "--append takes the output's own configuration: drop --recipe, --overwrite and --print-recipe"
        )
    output = given.get("output")
    if not output or not given.get("inputs"):
        raise ObjcliError("--append: give the new INPUTS and the finished output with -o")
    if output == "-":
        raise ObjcliError("--append: standard output holds no earlier shards to add to; name the output folder with -o")
    import tempfile

    from ..storage.places import open_place

    manifest = open_place(output).read_json(MANIFEST_NAME)  # a folder or an object-storage prefix
    if not manifest or not manifest.get("complete"):
        raise ObjcliError(f"--append: {output} holds no finished output ({MANIFEST_NAME}); run the transform first")
    if manifest.get("merged_from"):
        count = len(manifest["merged_from"])
        raise ObjcliError(
            f"--append: {output} was made by 'objcli merge' of {count} output{'s' * (count != 1)} and "
            "has no one configuration to append with; transform the new inputs to a folder of their own "
            "and merge it in, or append to one of the merged outputs and merge again"
        )
    with tempfile.TemporaryDirectory(prefix="objcli-append-") as folder:
        path = Path(folder) / MANIFEST_NAME
        path.write_text(json.dumps(manifest), encoding="utf-8")
        recipe = load_recipe(str(path))
    recipe = _with_tokenizer(given, recipe, manifest.get("tokenizer") or {})
    return append_values(given, recipe, _found_inputs(recipe, manifest)), manifest


def _found_inputs(recipe: dict, manifest: dict) -> list[str]:
    """The output's inputs as named, or where the manifest recorded them (``resolved``) for a relative name
    that does not lead to them from here (an append run from another folder)."""
    resolved = {e.get("path"): e.get("resolved") for e in manifest.get("inputs", []) if isinstance(e, dict)}
    found = []
    for path in recipe.get("inputs", []):
        elsewhere = resolved.get(path)
        here = os.path.isabs(path) or os.path.exists(path) or not elsewhere or not os.path.exists(elsewhere)
        found.append(path if here else elsewhere)
    return found


def _with_tokenizer(given: dict, recipe: dict, recorded: dict) -> dict:
    """The output's tokenizer is a file's content, not the path it was named by: ``-t`` naming the same
    tokenizer by another path (absolute, from another folder, a copy) is that tokenizer, and without
    ``-t`` the run takes it where the manifest recorded it (its absolute path), from any folder."""
    from ..tokenizers import open_tokenizer

    named = given.get("tokenizer")
    if named is None or named == recipe.get("tokenizer"):
        if named is None and recorded.get("path") and os.path.exists(recorded["path"]):
            return {**recipe, "tokenizer": recorded["path"]}
        return recipe
    try:
        same = open_tokenizer(named).sha256 == recorded.get("sha256")
    except ObjcliError:
        same = False
    if not same:
        raise ObjcliError(
            f"--append: --tokenizer {named!r} is not the output's tokenizer ({recorded.get('path', '?')}, "
            "compared by content); an appended output keeps its tokenizer: give that one, or drop -t"
        )
    return {**recipe, "tokenizer": named}


def append_values(given: dict, recipe: dict, existing_inputs: list[str]) -> dict:
    """The run's option values: the output's recipe, its inputs then the new ones. Options given
    that differ from the recipe are an error naming them; inputs already in the output are an
    error (they would be read twice)."""
    from ..objectives import REGISTRY

    if "objective" in given:  # an alias is the objective it names (t5: span-corruption)
        given = {**given, "objective": REGISTRY.aliases.get(given["objective"], given["objective"])}
    different = sorted(
        k
        for k, v in given.items()
        if k not in COMPARED_AWAY and recipe.get(k, _Missing) != v and not (k not in recipe and v in (None, False))
    )
    if different:
        name = different[0]
        raise ObjcliError(
            f"--append: --{name.replace('_', '-')} {given[name]!r} differs from the output's configuration "
            f"({recipe.get(name, 'its default')!r}); an appended output keeps its configuration: drop it"
        )
    old = {os.path.realpath(p) for p in existing_inputs}
    again = [p for p in given.get("inputs", []) if os.path.realpath(p) in old]
    if again:
        raise ObjcliError(f"--append: input {again[0]} is already in the output; give only the new inputs")
    breaks = [*recipe.get("input_breaks", []), len(existing_inputs)]  # the new inputs start partitions of their own
    return {
        **recipe,
        "inputs": [*existing_inputs, *given.get("inputs", [])],
        "output": given["output"],
        "input_breaks": breaks,
    }


class _Missing:
    pass


def check_appendable(config) -> None:
    if config.shuffle_rows:
        raise ObjcliError(
            "--append: the output was written with --shuffle-rows, one permutation of all its rows; "
            "appending cannot extend it: transform everything again, or write the new inputs apart and merge"
        )
    if config.source:
        raise ObjcliError(
            "--append: a --source mixture's rates follow from every source's size; transform the mixture again"
        )
    if config.split and any(not part.strip().endswith("%") for part in config.split.split(",")):
        raise ObjcliError("--append: held-out splits given as counts follow from the corpus size; use percentages")


def adopted_results(setup, manifest_data: dict) -> list[tuple[PartitionResult, dict[str, str]]]:
    """The output's partitions as finished results of this run, after checking that the run sets
    them up exactly as the output was made (same files, unchanged, same byte ranges)."""
    manifest = decode_manifest(manifest_data, MANIFEST_NAME)
    entries = manifest_data["partitions"]
    count = len(entries)
    # An input found where the manifest recorded it (``_found_inputs``) is compared under its recorded name.
    recorded = {e["resolved"]: e["path"] for e in manifest_data["inputs"] if isinstance(e, dict) and e.get("resolved")}
    expected = [_named(p.to_json(), recorded) for p in setup.partitions[:count]]
    keys = [k for k in expected[0] if k not in ("index", "source")] if expected else []
    files = setup.files[: len(manifest_data["inputs"])]
    names = [recorded.get(f.path, f.path) for f in files]
    if any(f.is_stream for f in setup.files):
        raise ObjcliError("--append: a stream cannot be appended (what it held cannot be checked); give files")
    if (
        len(expected) < count
        or any({k: p.get(k) for k in keys} != {k: e.get(k) for k in keys} for p, e in zip(expected, entries))
        or make_run_key(manifest.config_sha256, files, names) != manifest.run_key
    ):
        raise ObjcliError(
            "--append: the output's inputs changed since it was written (or are given differently); "
            "rerun the whole transform with --overwrite"
        )
    _refuse_other_identity(manifest_data, setup)
    _refuse_other_columns(manifest, setup)
    _refuse_copies(files, setup.files[len(files) :])
    by_partition: dict[int, list] = {}
    for shard in manifest.shards:
        by_partition.setdefault(shard.partition, []).append(shard)
    results = []
    for index, entry in enumerate(entries):
        pairs = [_work_shard(s) for s in by_partition.get(index, [])]
        result = PartitionResult(
            index=index,
            documents_read=entry["documents_read"],
            skipped=entry["skipped_by_reason"],
            first_examples=_first_skipped(entry),
            counters=entry["counters"],
            shards=[shard for shard, _ in pairs],
            text_bytes=manifest.totals.get("text_bytes", 0) if index == 0 else 0,
            seconds=0.0,
        )
        results.append((result, {final: work for _, renames in pairs for final, work in renames.items()}))
    return results


def _named(partition: dict, recorded: dict[str, str]) -> dict:
    pieces = [{**piece, "input": recorded.get(piece["input"], piece["input"])} for piece in partition["pieces"]]
    return {**partition, "pieces": pieces}


def _refuse_other_columns(manifest, setup) -> None:
    """Columns typed otherwise than the output's (a value column whose records now hold another field)
    would mix two schemas under one manifest: refused."""
    now = {c.name: c.arrow_type for c in setup.config.format.recorded_columns(setup.columns)}
    was = {c.name: c.arrow_type for c in manifest.columns}
    changed = [name for name in {**was, **now} if was.get(name) != now.get(name)]
    if changed:
        name = changed[0]
        raise ObjcliError(
            f"--append: with the new inputs, column {name} is {now.get(name, 'absent')}, and the output's is "
            f"{was.get(name, 'absent')}; the output is left as it was: rerun the whole transform with --overwrite"
            + (
                f" (written before columns took their values' width, it converts with "
                f"'{reshard_command(setup.config.output, manifest)}')" * reshard_converts(was.get(name), now.get(name))
            )
        )


def _first_skipped(entry: dict) -> dict[str, str]:
    """A partition's first skips as its manifest says them (a hand-edited value of another type: none)."""
    found = entry.get("first_skipped")
    ok = isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())
    return found if ok else {}


def _refuse_other_identity(manifest_data: dict, setup) -> None:
    """The files the run reads besides its inputs (template, tokenizer config) must be those the
    output was written with: appending with an edited one would mix two renderings under one manifest."""
    from ..storage.identity import changed_files

    recorded = manifest_data.get("identity") or {
        "tokenizer": {"path": manifest_data["tokenizer"]["path"], "sha256": manifest_data["tokenizer"]["sha256"]}
    }
    changes = changed_files(
        recorded,
        setup.identity
        if manifest_data.get("identity")
        else {"tokenizer": {**setup.identity["tokenizer"], "sha256": setup.tokenizer.sha256}},
    )
    if changes:
        raise ObjcliError(
            f"--append: the output was written with other files than this run reads "
            f"({', '.join(changes)}); the output is left as it was: rerun the whole transform with "
            "--overwrite, or put the files back"
        )


def _refuse_copies(old_files, new_files) -> None:
    """A new input with the same bytes as one already in the output (a copy under another name)
    would put its documents in twice: refused. Only files of equal size are hashed, each once."""
    from functools import cache

    from ..storage.files import file_sha256
    from ..storage.remote import is_url

    digest = cache(file_sha256)
    by_size: dict[int, list] = {}
    for f in old_files:
        if not is_url(f.path):
            by_size.setdefault(f.size, []).append(f)
    for new in new_files:
        for old in by_size.get(new.size, []) if not is_url(new.path) else ():
            if digest(new.path) == digest(old.path):
                raise ObjcliError(
                    f"--append: input {new.path} holds the same bytes as {old.path}, which is already "
                    "in the output; leave it out (its documents would be written twice)"
                )


def _work_shard(shard) -> tuple[ShardRecord, dict[str, str]]:
    """A finished shard under its work name (``p00003-s00000.arrow``) again."""
    final = final_prefix(shard.files[0])
    work = work_prefix(shard.partition, shard.split, shard.ordinal)
    rename = {name: work + name[len(final) :] for name in shard.files}
    return shard.renamed(rename), rename


def adopt(folder, results: list[tuple], config_sha256: str, run_key: str) -> None:
    """Hard-link each adopted shard into the work folder under its work name and mark its
    partition done for this run (what ``OutputFolder`` then keeps, as for a resumed run)."""
    place, work = folder.place, folder.work_place
    staging = work.staging()
    for result, renames in results:
        if work.read_json(f"p{result.index:05d}.done.json"):
            continue
        if place.remote:  # server-side copies into the work prefix (the output's objects stay)
            work.promote(place, list(renames.items()))
        for final, name in renames.items() if not place.remote else ():
            target = staging / name
            if not target.exists():
                os.link(Path(place.path) / final, target)
        write_marker(work, result, config_sha256, run_key)
