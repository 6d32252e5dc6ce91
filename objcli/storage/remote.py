"""Object storage and other fsspec filesystems: telling URLs from local paths, opening them, and
turning their failures into one line a user can act on.

objcli reaches ``s3://``, ``gs://``, ``hf://`` and every other protocol through fsspec, the layer
that Hugging Face ``datasets``, datatrove and Dask already use: one interface for listing, ranged
reads and uploads, with the protocol's own package (s3fs, gcsfs, huggingface_hub) as an extra.
Credentials come only from each package's standard chain (environment, config files, instance
roles); objcli never takes, logs or records them, and ``public_url`` strips what a URL may carry.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit, urlunsplit

from ..errors import ObjcliError

URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# The extra that brings each well-known protocol's package (pip install 'objcli[s3]').
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "hf": "hf"}
# Storage clients that log warnings and tracebacks of their own (gcsfs: each retry, each fallback).
CLIENT_LOGGERS = ("gcsfs", "s3fs", "fsspec", "aiobotocore", "botocore", "huggingface_hub")
# The variables storage clients take their endpoint and credentials from when they are made.
CLIENT_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "STORAGE_EMULATOR_HOST",
    "HF_ENDPOINT",
    "HF_TOKEN",
)
_clients_environment: dict[str, tuple] = {}
READ_BLOCK = 16 << 20  # one ranged GET per 16 MiB read ahead: bounded memory, few requests and round trips
# How throttling shows once the client's own retries are spent (s3fs turns S3's SlowDown into EBUSY).
THROTTLED = (
    "SlowDown",
    "Throttl",
    "TooManyRequests",
    "RequestLimitExceeded",
    "reduce your request rate",
    "Rate exceeded",
    "Service Unavailable",
    "503",
    "429",
)


def is_url(spec: str | os.PathLike) -> bool:
    return isinstance(spec, str) and URL.match(spec) is not None


def check_url_path(url: str, what: str) -> None:
    """An object-store URL whose path has an empty (``//``), ``.`` or ``..`` component names keys
    that listings do not give back as written (``s3://b//a//``: every shard "vanished" after a whole
    run): refused before any work, with the URL as it should be written."""
    if not is_url(url):
        return
    path = urlsplit(url).path
    parts = path.strip("/").split("/") if path.strip("/") else []
    if any(p in ("", ".", "..") for p in parts) or path.startswith("//"):
        clean = "/".join(p for p in parts if p not in ("", "."))
        host = urlsplit(url).netloc.rpartition("@")[2]
        fix = (
            "name the key without '..'"
            if ".." in parts
            else f"write {url.split('://', 1)[0]}://{host}/{clean}{'/' if clean and path.endswith('/') else ''}"
        )
        raise ObjcliError(
            f"{what} {public_url(url)}: the path has an empty, '.' or '..' part, which object storage "
            f"keeps as written; {fix}"
        )


def public_url(url: str) -> str:
    """The URL without credentials or a signed query string: what manifests and messages show."""
    if not is_url(url):
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def filesystem(url: str):
    """(fsspec filesystem, path without the protocol) for a URL; one line when the protocol is
    unknown or its package is not installed."""
    protocol = url.split("://", 1)[0].lower()
    for client in CLIENT_LOGGERS:  # their retries and fallbacks end in an error objcli reports in one line
        logging.getLogger(client).setLevel(logging.CRITICAL)
    try:
        import fsspec.core

        _forget_clients_if_the_environment_changed(protocol)
        return fsspec.core.url_to_fs(url)
    except ImportError:
        extra = EXTRAS.get(protocol)
        how = f"pip install 'objcli[{extra}]'" if extra else f"install the fsspec package that provides {protocol}://"
        raise ObjcliError(f"{public_url(url)}: {protocol}:// needs a package that is not installed; {how}") from None
    except ValueError as error:
        if "Protocol not known" not in str(error):
            raise storage_error(error, url) from None
        raise ObjcliError(
            f"{public_url(url)}: unknown protocol {protocol}://; use a local path, or s3://, gs://, hf:// "
            "(pip install 'objcli[s3]', 'objcli[gcs]' or 'objcli[hf]') or another fsspec protocol"
        ) from None


def _forget_clients_if_the_environment_changed(protocol: str) -> None:
    """fsspec keeps one client per protocol and options, made with the endpoint and credentials the
    environment named then; a process that changes them (a notebook, a service, the tests' servers)
    gets a client of the new ones, never one still pointing at the old endpoint."""
    now = tuple(os.environ.get(name) for name in CLIENT_ENVIRONMENT)
    if _clients_environment.setdefault(protocol, now) == now:
        return
    import fsspec

    _clients_environment[protocol] = now
    fsspec.get_filesystem_class(protocol).clear_instance_cache()


def join(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name


def storage_error(error: BaseException, url: str, action: str = "") -> ObjcliError:
    """An error of the storage client, as one line naming the object and what to do."""
    where = public_url(url)
    name = type(error).__name__
    text = str(error).splitlines()[0] if str(error) else name
    doing = f" ({action})" if action else ""
    if name in ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError") or "credentials" in text.lower():
        return ObjcliError(
            f"{where}: no credentials found{doing}; set them the standard way (AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials, an instance role; gcloud auth for gs://)"
        )
    if isinstance(error, FileNotFoundError) and "bucket" in text.lower():
        bucket = urlsplit(where).netloc
        return ObjcliError(f"{where}: no such bucket {bucket!r}{doing}; check the name, or create the bucket")
    if isinstance(error, FileNotFoundError):
        return ObjcliError(f"{where}: no such object or prefix{doing}; check the URL")
    if isinstance(error, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        return ObjcliError(f"{where}: access denied{doing} ({text}); check the credentials' permissions on it")
    if getattr(error, "errno", None) == errno.EBUSY or any(code in text or code in name for code in THROTTLED):
        return ObjcliError(
            f"{where}: the storage service is throttling requests and retries did not get through{doing} ({text}); "
            "rerun later or with fewer --workers (finished partitions are kept)"
        )
    return ObjcliError(f"{where}: {text}{doing}; check the URL and the connection, then rerun the same command")


def storage_errors() -> tuple[type[BaseException], ...]:
    """What a storage client raises: OSError (s3fs maps S3's error codes onto it) and botocore's
    own errors where botocore is installed."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return (OSError,)
    return (OSError, BotoCoreError)


def open_input(path: str) -> BinaryIO:
    """A local file or an object, opened for reading in blocks (an object is read with ranged
    requests of ``READ_BLOCK`` bytes, never downloaded whole)."""
    if not is_url(path):
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    fs, inner = filesystem(path)
    try:
        return fs.open(inner, "rb", block_size=READ_BLOCK, cache_type="readahead")
    except storage_errors() as error:
        raise storage_error(error, path, "opening it") from None


def version_of(info: dict) -> str:
    """What changes when an object is replaced: its ETag (S3, GCS), else its modification time."""
    for key in ("ETag", "etag", "md5Hash", "generation", "LastModified", "mtime", "updated", "last_commit"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def tokenizer_location(path: str) -> str:
    """The tokenizer as the manifest records it: an absolute path, or the URL it was read from."""
    return public_url(path) if is_url(path) else str(Path(path).resolve())


@contextmanager
def readable_output(folder: str, only: tuple[str, ...] | None = None) -> Iterator[str]:
    """A finished output to read (``inspect``, ``stats``, ``verify``): a local folder as it is, or an
    output in object storage copied to a temporary folder first (every file of it is read anyway;
    ``only``: just these names, as ``export-tokenizer`` reads the manifest alone); errors name the
    URL, not the copy."""
    if not is_url(folder):
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise ObjcliError(
                f"{folder}: a file, not an output folder; give the folder objcli transform or tokenize wrote (-o)"
            )
        yield folder
        return
    fs, inner = filesystem(folder)
    with tempfile.TemporaryDirectory(prefix="objcli-read-") as copy:
        try:
            names = [e["name"] for e in fs.ls(inner.rstrip("/"), detail=True) if e.get("type") == "file"]
            for name in names:
                base = name.rsplit("/", 1)[-1]
                if not base.startswith(".") and (only is None or base in only):
                    fs.get_file(name, os.path.join(copy, name.rsplit("/", 1)[-1]))
        except storage_errors() as error:
            raise storage_error(error, folder, "downloading it") from None
        try:
            yield copy
        except ObjcliError as error:
            raise ObjcliError(str(error).replace(copy, public_url(folder.rstrip("/")))) from None
