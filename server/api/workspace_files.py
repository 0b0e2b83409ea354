"""`/api/conversations/<id>/files`: upload, list and download the files of a conversation's workspace,
the folder its agents' commands see as `/workspace` (README, "Command sandbox").

Only regular files at the top of the folder are listed and served, never through a symbolic link (a
command may leave one pointing anywhere on the host). An upload is written beside the workspace first
and renamed into place, so a command never reads half a file and a failed upload leaves nothing.
"""

from __future__ import annotations

import mimetypes
import os
import stat
import uuid
from pathlib import Path
from typing import IO

from flask import Blueprint, Response, request, send_file
from werkzeug.exceptions import RequestEntityTooLarge

from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.serializers import iso
from server.errors import ApiError, not_found

bp = Blueprint("workspace_files", __name__, url_prefix="/api/conversations")

# Room for the multipart envelope (boundaries, part headers) around a file of the largest allowed size.
MULTIPART_SLACK = 64 * 1024
MAX_NAME_BYTES = 255
COPY_CHUNK = 64 * 1024


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "file_too_large", f"the file is larger than UPLOAD_MAX_MB ({limit / 2**20:g} MiB)")


def checked_name(name: str | None) -> str:
    """The name as stored, or 400 `invalid_filename`: one path component, no `..`, no NUL or control
    characters, at most 255 bytes."""
    if (not name or name != name.strip() or "/" in name or "\\" in name or ".." in name or name == "."
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise ApiError(400, "invalid_filename", "the file name must be one path component without `/`, `..`, "
                                                "NUL or control characters")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ApiError(400, "invalid_filename", "the file name is not valid Unicode") from None
    if size > MAX_NAME_BYTES:
        raise ApiError(400, "invalid_filename", f"the file name is longer than {MAX_NAME_BYTES} bytes")
    return name


def _file_out(name: str, st: os.stat_result) -> out.WorkspaceFile:
    return out.WorkspaceFile(name=name, size=st.st_size, modified=iso(st.st_mtime))


def _regular(path: Path) -> os.stat_result | None:
    """The file's own status when it is a regular file (not a link, a folder or a device), else None."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _store(source: IO[bytes], target: Path, staging: Path, limit: int) -> os.stat_result:
    """Copy the upload to `staging`, then rename it to `target`; 413 (and nothing kept) past `limit` bytes."""
    staging.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    try:
        with open(staging, "wb") as sink:
            while chunk := source.read(COPY_CHUNK):
                written += len(chunk)
                if written > limit:
                    raise _too_large(limit)
                sink.write(chunk)
        os.chmod(staging, 0o644)
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target.lstat()


@bp.post("/<conversation_id>/files")
@endpoint({201: out.WorkspaceFile}, errors=(400, 404, 413), upload="file")
def upload_file(conversation_id: str, user_id: int) -> tuple[out.WorkspaceFile, int]:
    """Upload a file into the conversation's workspace (multipart field `file`).

    Larger than UPLOAD_MAX_MB answers 413 `file_too_large`; a name with `/`, `..` or NUL answers 400
    `invalid_filename`. A file of the same name is replaced."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    limit = int(rt.settings.upload_max_mb * 2**20)
    if request.content_length is not None and request.content_length > limit + MULTIPART_SLACK:
        raise _too_large(limit)
    request.max_content_length = limit + MULTIPART_SLACK
    try:
        upload = request.files.get("file")
    except RequestEntityTooLarge:
        raise _too_large(limit) from None
    if upload is None:
        raise ApiError(400, "missing_file", "send the file as the multipart form field `file`")
    name = checked_name(upload.filename)
    workspace = rt.workspace(conv.id)
    staging = rt.settings.data_dir / "uploads.tmp" / f"{uuid.uuid4().hex}.part"
    st = _store(upload.stream, workspace / name, staging, limit)
    return _file_out(name, st), 201


@bp.get("/<conversation_id>/files")
@endpoint({200: out.WorkspaceFileList}, errors=(404,))
def list_files(conversation_id: str, user_id: int) -> out.WorkspaceFileList:
    """The regular files at the top of the conversation's workspace, by name."""
    conv = owned_conversation(conversation_id, user_id)
    folder = runtime().settings.workspaces_dir / conv.id
    found = []
    if folder.is_dir():
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            st = _regular(Path(entry.path))
            if st is not None:
                found.append(_file_out(entry.name, st))
    return out.WorkspaceFileList(data=found)


@bp.get("/<conversation_id>/files/<name>")
@endpoint({}, errors=(400, 404), files={200: "application/octet-stream"})
def download_file(conversation_id: str, name: str, user_id: int) -> Response:
    """Download one file of the conversation's workspace (as an attachment)."""
    conv = owned_conversation(conversation_id, user_id)
    name = checked_name(name)
    path = runtime().settings.workspaces_dir / conv.id / name
    if _regular(path) is None:
        raise not_found("file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise not_found("file") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise not_found("file")
    mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return send_file(handle, mimetype=mimetype, as_attachment=True, download_name=name)
