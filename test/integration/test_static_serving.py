"""The built UI as the server sends it: hashed assets cached for good and gzip-compressed, index.html
revalidated, the web app manifest served (server/static_files.py)."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest
import requests

from test.conftest import ROOT

DIST = ROOT / "frontend" / "dist"


@pytest.fixture
def dist() -> None:
    if not (DIST / "index.html").is_file():  # as the browser suite does
        if os.environ.get("CI"):
            pytest.fail("frontend/dist is missing: build the UI with `make frontend`", pytrace=False)
        pytest.skip("frontend/dist is missing: build the UI with `make frontend`")


def _raw(server, path: str, encoding: str) -> requests.Response:
    return requests.get(server.url + path, headers={"Accept-Encoding": encoding}, stream=True, timeout=10)


def test_hashed_assets_are_cached_for_good_and_sent_compressed(server, dist):
    index = requests.get(server.url + "/", timeout=10)
    assert index.headers["Cache-Control"] == "no-cache"
    script = re.search(r'src="(/assets/index-[^"]+\.js)"', index.text)
    assert script, index.text
    res = _raw(server, script[1], "gzip, br")
    body = res.raw.read()
    assert res.headers["Content-Encoding"] == "gzip"
    assert res.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "Accept-Encoding" in res.headers["Vary"]
    original = (DIST / script[1].lstrip("/")).read_bytes()
    assert gzip.decompress(body) == original
    assert len(body) < len(original) / 2

    plain = _raw(server, script[1], "identity")
    assert "Content-Encoding" not in plain.headers
    assert plain.raw.read() == original


def test_the_web_app_manifest_is_served_and_linked(server, dist):
    index = requests.get(server.url + "/", timeout=10).text
    assert '<link rel="manifest" href="/manifest.webmanifest"' in index
    res = requests.get(server.url + "/manifest.webmanifest", timeout=10)
    manifest = json.loads(res.content)
    assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
    assert requests.get(server.url + manifest["icons"][0]["src"], timeout=10).status_code == 200
