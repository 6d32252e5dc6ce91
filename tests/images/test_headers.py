"""An image's size from its header: as the processor sees it (EXIF quarter turns swap the sides),
remembered for a bounded number of references, and a folder or a FIFO is unreadable, never waited on."""

from __future__ import annotations

import os

import pytest

from objcli.images import headers

PIL = pytest.importorskip("PIL")


def _jpeg(path, width: int, height: int, orientation: int):
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.new("RGB", (width, height)).save(path, exif=exif.tobytes())
    return str(path)


@pytest.mark.parametrize(
    "orientation, turned",
    [
        (1, False),
        (6, True),
        *(pytest.param(o, t, marks=pytest.mark.heavy) for o, t in [(3, False), (5, True), (7, True), (8, True)]),
    ],
)
def test_exif_quarter_turns_swap_the_sides_as_load_image_does(tmp_path, orientation, turned):
    from transformers.image_utils import load_image

    path = _jpeg(tmp_path / "a.jpg", 40, 30, orientation)
    loaded = load_image(path)
    assert headers.ImageSizes().size(path) == (loaded.height, loaded.width) == ((40, 30) if turned else (30, 40))


def test_sizes_are_remembered_for_a_bounded_number_of_references(tmp_path, monkeypatch):
    monkeypatch.setattr(headers, "CACHE", 3)
    sizes = headers.ImageSizes()
    paths = [_jpeg(tmp_path / f"{k}.jpg", 10 + k, 20, 1) for k in range(6)]
    assert [sizes.size(p) for p in paths] == [(20, 10 + k) for k in range(6)]
    assert list(sizes._known) == paths[-3:]


def test_what_is_not_an_image_file_is_unreadable(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    (tmp_path / "text").write_text("hello")
    for name in ("pipe", "folder", "text"):
        with pytest.raises(headers.BadImage) as raised:
            headers.ImageSizes().size(str(tmp_path / name))
        assert raised.value.reason == "image_unreadable"
    with pytest.raises(headers.BadImage) as raised:
        headers.ImageSizes().size(str(tmp_path / "nothing.png"))
    assert raised.value.reason == "image_missing"


@pytest.mark.heavy
def test_an_image_by_https_url_is_read_as_on_disk(tmp_path):
    """A URL (an HTTP server on loopback; fsspec's client, aiohttp) gives the size the file on disk gives;
    a URL that answers 404 is a missing image."""
    import functools
    import http.server
    import threading

    pytest.importorskip("aiohttp")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    path = _jpeg(tmp_path / "a.jpg", 64, 48, 6)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/a.jpg"
        assert headers.ImageSizes().size(url) == headers.ImageSizes().size(path) == (64, 48)
        with pytest.raises(headers.BadImage) as raised:
            headers.ImageSizes().size(url.replace("a.jpg", "b.jpg"))
        assert raised.value.reason == "image_missing"
    finally:
        server.shutdown()
        server.server_close()
