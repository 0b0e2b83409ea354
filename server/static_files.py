"""The built UI (frontend/dist) served by Flask (README, "Browser UI").

Vite names every file under `assets/` by a hash of its content, so those are cached for a year and never
revalidated; `index.html` (which names the current assets) and the other root files are revalidated on
every load. Text files are sent gzip-compressed to a client that accepts it, compressed once per file version.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

from flask import Flask, Response, abort, request, send_from_directory

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
COMPRESSIBLE = {".js", ".mjs", ".css", ".html", ".svg", ".json", ".webmanifest", ".map", ".txt"}
MIN_COMPRESS_BYTES = 1024


@lru_cache(maxsize=256)
def _gzipped(path: Path, mtime_ns: int, size: int) -> bytes:
    """The file's gzip body; the key holds its version (mtime, size), so a rebuild is compressed anew."""
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)


def _send(root: Path, rel: str) -> Response:
    path = root / rel
    response = send_from_directory(root, rel)
    response.headers["Cache-Control"] = IMMUTABLE if rel.startswith("assets/") else REVALIDATE
    response.vary.add("Accept-Encoding")
    st = path.stat()
    wants_gzip = "gzip" in request.headers.get("Accept-Encoding", "").lower()
    if wants_gzip and path.suffix in COMPRESSIBLE and st.st_size >= MIN_COMPRESS_BYTES and response.status_code == 200:
        body = _gzipped(path, st.st_mtime_ns, st.st_size)
        response.direct_passthrough = False
        response.set_data(body)
        response.headers["Content-Encoding"] = "gzip"
        response.headers["Content-Length"] = str(len(body))
    return response


def register_frontend(app: Flask, root: Path) -> None:
    @app.get("/")
    def index() -> Response:
        return _send(root, "index.html")

    @app.get("/<path:path>")
    def asset(path: str) -> Response:
        if path.startswith("api/") or not (root / path).is_file():
            abort(404)
        return _send(root, path)
