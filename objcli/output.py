"""The output folder of a run: what an earlier run left in it, resuming, and the final renames.

A run writes everything into ``OUT/.objcli-tmp/`` first:

- ``run.json``: the configuration hash and the run key (configuration + input sizes and mtimes);
- ``pNNNNN-sNNNNN.*``: the shards of partition NNNNN, each renamed from ``*.tmp`` when complete;
- ``pNNNNN.done.json``: the completion marker of partition NNNNN, written (atomically) after its
  last shard: its counts, its shards and their sha256, the configuration hash and the run key.

When every partition is done, the shards are renamed to ``OUT/part-XXXXX-of-N.*`` and
``manifest.json`` is written last. A run that dies at any point leaves either a complete manifest
or no manifest; a rerun of the same configuration keeps every partition whose marker and shards
check out, redoes the rest, and finishes the renames, so its output is the same bytes.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import socket
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ObjcliError
from .faults import crash_point
from .files import file_sha256, write_json_atomically
from .manifest import MANIFEST_NAME, decode_manifest
from .writers import ShardInfo
from .writers.base import work_prefix

WORK_FOLDER = ".objcli-tmp"
RUN_FILE = "run.json"
LOCK_FILE = ".objcli-lock"  # hidden: never an input, never a shard
HF_FILES = ("state.json", "dataset_info.json")  # --format hf: what datasets.load_from_disk reads
# Files that come with a format's shards (format_files.py): Megatron's data-args files, one per split
# (megatron.txt for train), and HF's saved-dataset files. A rebuild removes them with the shards.
FORMAT_FILE = re.compile(r"megatron(-[a-z][a-z0-9_]*)?\.txt|state\.json|dataset_info\.json")


def data_args_name(split: str) -> str:
    """Megatron-LM's --data-args-path file of a split (weight prefix per shard)."""
    return "megatron.txt" if split in ("", "train") else f"megatron-{split}.txt"
SHARD_NAME = re.compile(r"[a-z][a-z0-9_]*-\d{5}-of-\d{5}[._]")  # part-00000-of-00012.arrow, train-…, validation-…


def is_shard_name(name: str) -> bool:
    return SHARD_NAME.match(name) is not None


@dataclass
class PartitionResult:
    index: int
    documents_read: int
    skipped: dict[str, int]
    first_examples: dict[str, str]
    counters: dict[str, int]
    shards: list[ShardInfo]
    text_bytes: int
    seconds: float

    @property
    def documents_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def documents_written(self) -> int:
        return self.documents_read - self.documents_skipped

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PartitionResult:
        return cls(**{**data, "shards": [ShardInfo.from_json(s) for s in data["shards"]]})


def marker_path(work: Path, partition: int) -> Path:
    return work / f"p{partition:05d}.done.json"


def clear_partition(work: Path, partition: int) -> None:
    """Remove whatever an earlier attempt at this partition left (shards, temp files, marker)."""
    for path in work.glob(f"p{partition:05d}[.-]*"):
        path.unlink(missing_ok=True)


def write_marker(work: Path, result: PartitionResult, config_sha256: str, run_key: str) -> None:
    marker = {"config_sha256": config_sha256, "run_key": run_key, "result": result.to_json()}
    write_json_atomically(marker_path(work, result.index), marker)
    crash_point("partition-done")


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


def final_names(shards: list[ShardInfo]) -> list[tuple[str, str]]:
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
        shard.files = new_files
    return renames


def _read_json(path: Path) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class OutputFolder:
    """What an output folder holds, and the decisions about it: start, resume, refuse or done."""

    path: Path
    config_sha256: str
    run_key: str
    kept: dict[int, PartitionResult] = field(default_factory=dict)
    complete_manifest: dict | None = None  # this configuration already finished here
    restarted: str = ""  # "interrupted" or "finished": an earlier run of this configuration read other inputs

    @property
    def work(self) -> Path:
        return self.path / WORK_FOLDER

    def open(self, partitions: int, overwrite: bool, resume: bool) -> None:
        """Check the folder, then clean it for a fresh run or keep what a resumable run finished."""
        self._make_folder()
        self._lock()
        try:
            self._prepare(partitions, overwrite, resume)
        except BaseException:
            self.close()  # a refused or failed open leaves the folder free for the next try
            raise

    def _prepare(self, partitions: int, overwrite: bool, resume: bool) -> None:
        manifest = _read_json(self.path / MANIFEST_NAME)
        run = _read_json(self.work / RUN_FILE)
        earlier = (manifest or run or {}).get("config_sha256")
        # Worth protecting: a manifest, shards, or partitions an interrupted run finished. A run that
        # failed before finishing any partition leaves nothing anyone would miss.
        leftovers = sorted(p.name for p in self.path.iterdir() if p.name == MANIFEST_NAME or is_shard_name(p.name))
        leftovers += [f"{WORK_FOLDER}/{p.name}" for p in sorted(self.work.glob("p*.done.json"))]
        # A run killed before its first partition finished left only its run file: it is still
        # this configuration's run, and --resume may continue it.
        same = (bool(leftovers) or run is not None) and earlier == self.config_sha256
        if overwrite:
            self._remove_everything()
            manifest = run = None
            same = False
        elif leftovers and not same:
            what = "a run of another configuration" if earlier else f"files of an unknown run ({leftovers[0]})"
            raise ObjcliError(
                f"output {self.path}: already holds {what}; pass --overwrite to replace it or choose another folder"
            )
        if resume and not same:
            raise ObjcliError(
                f"--resume: output {self.path} holds no earlier run of this configuration; drop --resume to start one"
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
        try:
            self.work.mkdir(exist_ok=True)
            for stale in [*self.work.glob("*.tmp"), self.path / (MANIFEST_NAME + ".tmp")]:
                stale.unlink(missing_ok=True)
            if run and run.get("run_key") != self.run_key:
                # Another configuration that finished nothing, or the same options with input files
                # that changed size or time since: nothing is reusable.
                self.restarted = "interrupted" if same else ""
                for path in [*self.work.iterdir(), *(p for p in self.path.iterdir() if is_shard_name(p.name))]:
                    path.unlink()
            write_json_atomically(self.work / RUN_FILE, {"config_sha256": self.config_sha256, "run_key": self.run_key})
        except OSError as error:
            raise output_error(error, self.path) from None
        self._keep_finished(partitions)

    def _lock(self) -> None:
        """One writer per output folder: an exclusive ``flock`` on a lock file inside it, held until
        ``close`` (or the process ends; the kernel drops a dead run's lock)."""
        path = self.path / LOCK_FILE
        try:
            self._lock_file = open(path, "a+")  # noqa: SIM115 - held for the run, closed in close()
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.seek(0)
            holder = self._lock_file.read().strip() or "another process"
            self._lock_file.close()
            self._lock_file = None
            raise ObjcliError(
                f"output {self.path}: another run ({holder}) is writing it; wait for it to finish or choose another -o"
            ) from None
        except OSError as error:
            raise output_error(error, self.path) from None
        self._lock_file.truncate(0)
        self._lock_file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        self._lock_file.flush()

    def close(self) -> None:
        if getattr(self, "_lock_file", None) is not None:
            self._lock_file.truncate(0)  # an empty lock file: no writer (the same bytes after every run)
            self._lock_file.close()  # releases the lock
            self._lock_file = None

    def _make_folder(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise output_error(error, self.path) from None
        if not self.path.is_dir():
            raise ObjcliError(f"output {self.path}: exists and is not a folder; choose another with -o")
        if not os.access(self.path, os.W_OK | os.X_OK):
            raise ObjcliError(f"output {self.path}: folder is not writable; choose another with -o")

    def _remove_everything(self) -> None:
        for path in self.path.iterdir():
            if path.name in (MANIFEST_NAME, MANIFEST_NAME + ".tmp") or is_shard_name(path.name) or FORMAT_FILE.fullmatch(path.name):
                path.unlink()
        shutil.rmtree(self.work, ignore_errors=True)

    def _check_complete(self, manifest: dict) -> None:
        for shard in decode_manifest(manifest, str(self.path / MANIFEST_NAME)).shards:
            for name, digest in shard.sha256.items():
                path = self.path / name
                if not path.exists() or file_sha256(path) != digest:
                    problem = "is missing" if not path.exists() else "does not match its sha256"
                    raise ObjcliError(
                        f"output {self.path}: {name} {problem} in the finished run of this configuration; "
                        "pass --overwrite to rebuild it"
                    )
        shutil.rmtree(self.work, ignore_errors=True)  # left if the run died right after its manifest
        self.complete_manifest = manifest

    def stamp(self) -> None:
        """A rerun with nothing to do rewrites nothing, but moves ``manifest.json``'s mtime to now:
        with ``OUT/manifest.json`` as a Make target, a recipe whose prerequisites changed without
        changing the output (a touched Makefile, the same tokenizer copied anew) is then up to date."""
        try:
            os.utime(self.path / MANIFEST_NAME)
        except OSError as error:
            raise output_error(error, self.path) from None

    def _keep_finished(self, partitions: int) -> None:
        results = {}
        for index in range(partitions):
            marker = _read_json(marker_path(self.work, index))
            if marker and (marker.get("config_sha256"), marker.get("run_key")) == (self.config_sha256, self.run_key):
                results[index] = PartitionResult.from_json(marker["result"])
        # Final renames start only once every partition is done, so a shard is either still in the
        # work folder under its partition name or, if all partitions are done, maybe already renamed.
        renamed = {}
        if len(results) == partitions:
            copies = [PartitionResult.from_json(results[i].to_json()) for i in sorted(results)]
            renamed = dict(final_names([s for r in copies for s in r.shards]))
        for index, result in results.items():
            if all(self._shard_file_ok(name, digest, renamed) for s in result.shards for name, digest in s.sha256.items()):
                self.kept[index] = result
            else:
                clear_partition(self.work, index)

    def _shard_file_ok(self, name: str, digest: str, renamed: dict[str, str]) -> bool:
        for path in (self.work / name, self.path / renamed.get(name, name)):
            if path.exists():
                return file_sha256(path) == digest
        return False

    def finish(self, renames: list[tuple[str, str]], manifest: dict, extra: dict[str, str] | None = None) -> None:
        """Move the shards to their final names, write the ``extra`` files (atomically), then the
        manifest (last), then clean up."""
        try:
            for name, text in (extra or {}).items():
                temp = self.path / (name + ".tmp")
                temp.write_text(text, encoding="utf-8")
                os.replace(temp, self.path / name)
            for old, new in renames:
                if (self.work / old).exists():
                    os.replace(self.work / old, self.path / new)
                    crash_point("rename")
                elif not (self.path / new).exists():
                    raise ObjcliError(f"output {self.path}: shard {old} vanished while the run finished; rerun")
            write_json_atomically(self.path / MANIFEST_NAME, manifest)
        except OSError as error:
            raise output_error(error, self.path) from None
        shutil.rmtree(self.work, ignore_errors=True)
