"""The output folder of a run: what an earlier run left in it, resuming, and the final renames.

A run writes everything into ``OUT/.objcli-tmp/`` first:

- ``run.json``: the configuration hash and the run key (configuration + input sizes and mtimes);
- ``pNNNNN-sNNNNN.*``: the shards of partition NNNNN, each renamed from ``*.tmp`` when complete;
- ``pNNNNN.done.json``: the completion marker of partition NNNNN, written (atomically) after its
  last shard: its counts, its shards and their sha256, the configuration hash and the run key.

When every partition is done, the shards are renamed to ``OUT/part-XXXXX-of-N.*`` and
``manifest.json`` is written last. A run that dies at any point leaves either a complete manifest
or no manifest; a rerun of the same configuration keeps every partition whose marker and shards
check out, redoes the rest, and finishes the renames, so its output is the same bytes. An output in
object storage follows the same steps through ``places.RemotePlace`` (uploads, copies, a lock object).
"""

from __future__ import annotations

import errno
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import ObjcliError
from .faults import crash_point
from .files import WORK_FOLDER
from .manifest import MANIFEST_NAME, PENDING_RESHARD, decode_manifest, pending_reshard
from .ownership import (
    FINISHING,
    check_split_folders,
    delete_own,
    is_input,
    listed_files,
    own_files,
    refuse_foreign_targets,
    side_files_present,
)
from .partitions import PartitionResult, clear_partition, marker_name
from .places import LocalPlace, RemotePlace
from .shard_info import ShardRecord, work_prefix

RUN_FILE = "run.json"
SHARD_NAME = re.compile(r"[a-z][a-z0-9_]*-\d{5,}-of-\d{5,}[._]")  # part-00000-of-00012.arrow, train-…, validation-…


def is_shard_name(name: str) -> bool:
    return SHARD_NAME.match(name) is not None


class SideFileNames(Protocol):
    """What the output formats say about the files they write beside their shards (formats.SIDE_FILES)."""

    def is_side_file(self, name: str) -> bool: ...

    def remove_folders(self, place) -> None: ...


def output_error(error: OSError, folder: Path | str) -> ObjcliError:
    """An OS error while writing output, as one line a user can act on."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return ObjcliError(
            f"output {folder}: no space left on the device; free some space and rerun the same command "
            "(finished partitions are kept)"
        )
    if error.errno == errno.EFBIG:
        return ObjcliError(
            f"output {folder}: a file would pass the file-size limit (ulimit -f); raise the limit or pass a smaller "
            "--shard-size, then rerun the same command"
        )
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ObjcliError(f"output {folder}: not writable ({error.strerror}); choose another folder with -o")
    return ObjcliError(f"output {folder}: {error.strerror or error} ({error.filename or 'write'}); check the folder")


def final_names(shards: list[ShardRecord]) -> list[tuple[str, str]]:
    """Give the shards their final names ``part-XXXXX-of-N`` (in the order given), in place, and
    return the (work name, final name) pairs."""
    counts = Counter(s.split for s in shards)
    numbers: Counter = Counter()
    renames = []
    for shard in shards:
        prefix = work_prefix(shard.partition, shard.split, shard.ordinal)
        # Split outputs are named as Hugging Face infers splits: train-00000-of-00012.arrow.
        final_prefix = f"{shard.split or 'part'}-{numbers[shard.split]:05d}-of-{counts[shard.split]:05d}"
        numbers[shard.split] += 1
        new_files = []
        for name in shard.files:
            new_name = final_prefix + name.removeprefix(prefix)
            renames.append((name, new_name))
            new_files.append(new_name)
        shard.sha256 = {final_prefix + k.removeprefix(prefix): v for k, v in shard.sha256.items()}
        shard.bytes = {final_prefix + k.removeprefix(prefix): v for k, v in shard.bytes.items()}
        shard.files = new_files
    joined = [s for s in shards if s.ordinal < 0 and s.partition >= 0]
    for k, shard in enumerate(joined):  # work names kept clear of an appended output's: the manifest's count
        shard.ordinal = -1 - k
    return renames


@dataclass
class OutputFolder:
    """What an output (a local folder or an object-storage prefix) holds, and the decisions about
    it: start, resume, refuse or done."""

    place: LocalPlace | RemotePlace
    config_sha256: str
    run_key: str
    side_files: SideFileNames  # the formats' side files (formats.SIDE_FILES): objcli's own, like the shards
    kept: dict[int, PartitionResult] = field(default_factory=dict)
    complete_manifest: dict | None = None  # this configuration already finished here
    restarted: str = ""  # "interrupted" or "finished": an earlier run of this configuration read other inputs
    # This run's configuration and identity (storage/identity.py), to name what differs from an earlier run's.
    record: dict = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)  # the run's input files: never removed, whatever their name
    split_side_files: list[str] = field(default_factory=list)  # the side files this run writes in split folders

    def __post_init__(self):
        self.work_place = self.place.child(WORK_FOLDER)
        self._locked = False
        self.adopt = None
        self.owned: set[str] = set()  # what objcli wrote here before this run (own_files), found at open

    @property
    def work(self) -> Path:
        """Where this process writes work files: the work folder, or for object storage a local
        staging folder whose finished files are uploaded to the work prefix."""
        return self.work_place.staging()

    @property
    def task_folder(self) -> str:
        """What partitions are told to write to: a local path, or the work prefix's URL."""
        return self.work_place.url if self.place.remote else str(self.work)

    def open(self, partitions: int, overwrite: bool, resume: bool, adopt=None) -> None:
        """Check the folder, then clean it for a fresh run or keep what a resumable run finished.
        ``adopt(folder)``: ``--append``, which marks the output's own partitions done for this run."""
        self.adopt = adopt
        try:
            self._make_folder()
            self.place.lock()
            self._locked = True
            crash_point("locked")  # the resume tests kill a run here: only its lock is left
            self._prepare(partitions, overwrite, resume)
        except OSError as error:
            self.close()
            raise output_error(error, self.place.where) from None
        except BaseException:
            self.close()  # a refused or failed open leaves the folder free for the next try
            raise

    def _prepare(self, partitions: int, overwrite: bool, resume: bool) -> None:
        place, work = self.place, self.work_place
        pending = pending_reshard(place.path) if not place.remote and not overwrite else None
        if pending:
            raise ObjcliError(pending.replace("; run", "; pass --overwrite to replace the output, or run", 1))
        manifest = place.read_json(MANIFEST_NAME)
        run = work.read_json(RUN_FILE)
        earlier = (manifest or run or {}).get("config_sha256")
        check_split_folders(self.place, self.split_side_files)
        self.owned = own_files(place, self.side_files, work) | side_files_present(self.place, self.split_side_files)
        # Worth protecting: a manifest, shards, or partitions an interrupted run finished. A run that
        # failed before finishing any partition leaves nothing anyone would miss.
        # objcli's own names only (manifest, listed shards, format files): any other file is the user's, kept.
        leftovers = sorted(n for n in self.owned if not n.endswith(".tmp"))
        leftovers += [f"{WORK_FOLDER}/{n}" for n in work.names() if n.endswith(".done.json")]
        # A run killed before its first partition finished left only its run file: it is still
        # this configuration's run, and --resume may continue it.
        same = (bool(leftovers) or run is not None) and earlier == self.config_sha256
        if overwrite:
            self._remove_everything()
            manifest = run = None
            same = False
        elif leftovers and not same and self.adopt is None:
            what = "a run of another configuration" if earlier else f"files of an unknown run ({leftovers[0]})"
            if earlier:
                from .identity import what_changed  # names the edited files and options

                what += what_changed(manifest or run, self.record.get("config", {}), self.record.get("identity", {}))
            raise ObjcliError(
                f"output {place.where}: already holds {what}; pass --overwrite to replace it or choose another folder"
            )
        # --resume over a folder that holds only the lock of a run killed before it wrote anything: that
        # run is started, as the same command without --resume would (nothing of it can be lost).
        if resume and not same and not (place.took_over and not leftovers and run is None):
            raise ObjcliError(
                f"--resume: output {place.where} holds no earlier run of this configuration; drop --resume to start one"
            )
        if same and manifest and manifest.get("complete"):
            if manifest.get("run_key") == self.run_key:
                self._check_complete(manifest)
                return
            # The same options over inputs that changed (appended to, added to a folder) since the
            # run finished: its shards are stale, so the run is done again (the caller warns).
            self._remove_everything()
            manifest = run = None
            self.restarted = "finished"
        self._start_run(run, same)
        if self.adopt is not None:
            self.adopt(self)
        self._keep_finished(partitions)

    def _start_run(self, run: dict | None, same: bool) -> None:
        place, work = self.place, self.work_place
        for stale in [n for n in work.names() if n.endswith(".tmp")]:
            work.delete(stale)
        place.delete(MANIFEST_NAME + ".tmp")
        if run and run.get("run_key") != self.run_key:
            # Another configuration that finished nothing, or the same options with input files
            # that changed size or time since: nothing is reusable.
            self.restarted = "interrupted" if same else ""
            work.remove()
            if self.adopt is None:  # an append keeps the output's own
                shards = [n for n in self.owned if n != MANIFEST_NAME and not self.side_files.is_side_file(n)]
                delete_own(self.place, self.inputs, shards)
        work.staging()  # a local work folder is made here
        work.write_json(RUN_FILE, {"config_sha256": self.config_sha256, "run_key": self.run_key, **self.record})

    def close(self) -> None:
        if self._locked:
            self._locked = False
            self.place.unlock()
        self.work_place.close()

    def _make_folder(self) -> None:
        if self.place.remote:
            return  # a prefix needs no making; a missing bucket shows when the lock is taken
        path = self.place.path
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise ObjcliError(f"output {path}: exists and is not a folder; choose another with -o")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ObjcliError(f"output {path}: folder is not writable; choose another with -o")

    def _remove_everything(self) -> None:
        if any(is_input(self.place, name, self.inputs) for name in self.owned):
            delete_own(self.place, self.inputs, self.owned)  # refused, one line, before anything goes
        # The manifest first: a reader of the old run (reading.Rows) checks it after each file it reads,
        # so it stops there rather than reading this run's files as the old run's.
        self.place.delete(MANIFEST_NAME)
        self.place.delete(PENDING_RESHARD)  # a stopped in-place reshard of the output replaced
        self.side_files.remove_folders(self.place)  # named by dataset_dict.json: before it goes
        delete_own(self.place, self.inputs, self.owned)
        for name in self.split_side_files:
            self.place.delete(name)
        self.work_place.remove()

    def _check_complete(self, manifest: dict) -> None:
        for shard in decode_manifest(manifest, f"{self.place.where}/{MANIFEST_NAME}").shards:
            for name, digest in shard.sha256.items():
                found = self.place.matches(name, digest, shard.bytes.get(name))
                if not found:
                    problem = "is missing" if found is None else "does not match what the manifest records"
                    raise ObjcliError(
                        f"output {self.place.where}: {name} {problem} in the finished run of this configuration; "
                        "pass --overwrite to rebuild it"
                    )
        self.work_place.remove()  # left if the run died right after its manifest
        self.complete_manifest = manifest

    def stamp(self) -> None:
        """A rerun with nothing to do rewrites nothing, but moves ``manifest.json``'s mtime to now:
        with ``OUT/manifest.json`` as a Make target, a recipe whose prerequisites changed without
        changing the output (a touched Makefile, the same tokenizer copied anew) is then up to date."""
        try:
            self.place.stamp(MANIFEST_NAME)
        except OSError as error:
            raise output_error(error, self.place.where) from None

    def _keep_finished(self, partitions: int) -> None:
        results = {}
        for index in range(partitions):
            marker = self.work_place.read_json(marker_name(index))
            if marker and (marker.get("config_sha256"), marker.get("run_key")) == (self.config_sha256, self.run_key):
                results[index] = PartitionResult.from_json(marker["result"])
        # Final renames start only once every partition is done, so a shard is either still in the
        # work folder under its partition name or, if all partitions are done, maybe already renamed.
        renamed = {}
        if len(results) == partitions:
            copies = [PartitionResult.from_json(results[i].to_json()) for i in sorted(results)]
            renamed = dict(final_names([s for r in copies for s in r.shards]))
        for index, result in results.items():
            if all(
                self._shard_file_ok(name, digest, s.bytes.get(name), renamed)
                for s in result.shards
                for name, digest in s.sha256.items()
            ):
                self.kept[index] = result
            else:
                clear_partition(self.work_place, index)

    def _shard_file_ok(self, name: str, digest: str, size: int | None, renamed: dict[str, str]) -> bool:
        for place, stored_name in ((self.work_place, name), (self.place, renamed.get(name, name))):
            found = place.matches(stored_name, digest, size)
            if found is not None:
                return found
        return False

    def finish(self, renames: list[tuple[str, str]], manifest: dict, extra: dict[str, str] | None = None) -> None:
        """Move the shards to their final names, write the ``extra`` files (atomically), then the
        manifest (last), then clean up."""
        place = self.place
        try:
            finishing = sorted({new for _, new in renames} | set(extra or {}))
            refuse_foreign_targets(self.place, self.work_place, finishing, self.owned)
            self.work_place.write_json(FINISHING, {"files": [n for n in finishing if "/" not in n]})
            for name, text in (extra or {}).items():
                place.write_text(name, text)
            missing = place.promote(self.work_place, renames)
            if missing:
                raise ObjcliError(f"output {place.where}: shard {missing[0]} vanished while the run finished; rerun")
            place.write_json(MANIFEST_NAME, manifest)
            listed = listed_files(manifest)
            for name in sorted(self.owned - listed - set(finishing)):  # after --append: renumbered shards' old names
                side = name == MANIFEST_NAME or self.side_files.is_side_file(name)
                if not side and not is_input(self.place, name, self.inputs):
                    place.delete(name)
        except OSError as error:
            raise output_error(error, place.where) from None
        self.work_place.remove()
