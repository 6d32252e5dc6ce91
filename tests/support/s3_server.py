"""A real S3 endpoint for the tests: a moto server on a free loopback port, which this process and
every child reach through AWS_ENDPOINT_URL and the standard credential variables, as any S3 service."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "objcli-test",
    "AWS_SECRET_ACCESS_KEY": "objcli-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_s3():
    """Yields an s3fs client of the tests' own (listings not cached) while the server runs."""
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved = dict(os.environ)
    os.environ.update(
        {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        }
    )
    try:
        yield s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()
