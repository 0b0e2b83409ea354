"""`/api/conversations/<id>/files`: upload, list and download the files of a conversation's workspace,
the folder its agents' commands see as `/workspace` (README, "Command sandbox").

Only regular files at the top of the folder are listed and served, never through a symbolic link (a
command may leave one pointing anywhere on the host). A command may also swap a named pipe in under a
name between any check and the open: a download opens without following links and without blocking
(`O_NONBLOCK`), then serves the file only when the opened file itself is regular, so nothing here ever
waits in the kernel on the event loop every client shares. An upload is written into a nameless file in the
workspace (O_TMPFILE: on the workspace's own file system, where its quota holds) and given its name when
whole, so a command never reads half a file and a failed upload (too large, a full workspace) leaves nothing.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import stat
import uuid
from pathlib import Path
from typing import IO

from flask import Blueprint, Response, request, send_file
from werkzeug.exceptions import RequestEntityTooLarge

from modules.keyed_locks import KeyedLocks
from modules.storage import conversations as conversation_store
from modules.tools.disk_guard import DiskGuard
from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.file_names import checked_name
from server.api.request_models import FileListQuery
from server.api.serializers import iso
from server.api.workspace_listing import list_page
from server.errors import ApiError, not_found

bp = Blueprint("workspace_files", __name__, url_prefix="/api/conversations")

# Room for the multipart envelope (boundaries, part headers) around a file of the largest allowed size.
MULTIPART_SLACK = 64 * 1024
COPY_CHUNK = 64 * 1024


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "file_too_large", f"the file is larger than UPLOAD_MAX_MB ({limit / 2**20:g} MiB)")


def _file_out(name: str, st: os.stat_result) -> out.WorkspaceFile:
    return out.WorkspaceFile(name=name, size=st.st_size, modified=iso(st.st_mtime))


def _open_regular(path: Path) -> tuple[int, os.stat_result] | None:
    """An open descriptor of `path` and its status when the file opened is regular, else None. Opening a
    named pipe for reading would wait for a writer: O_NONBLOCK returns at once, and fstat tells."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def _name_is_folder(name: str) -> ApiError:
    return ApiError(409, "name_is_folder", f"`{name}` is a folder in the workspace; upload under another name")


def _workspace_full(quota_mb: int) -> ApiError:
    return ApiError(507, "workspace_full", f"the workspace has no room for this file (WORKSPACE_MAX_MB={quota_mb}): "
                    "nothing was stored; delete files in it first")


def _quota_room(disk: DiskGuard | None, target: Path) -> int | None:
    """What the workspace's quota has left for the upload where a poll holds it (no file system refuses the
    write there), counting the room of the file it replaces; None where the kernel holds it, or none holds."""
    room = disk.room(target.parent) if disk is not None else None
    if room is None:
        return None
    try:
        replaced = os.lstat(target)
    except OSError:
        return room
    return room + replaced.st_blocks * 512 if stat.S_ISREG(replaced.st_mode) else room


# One upload at a time per workspace, the others waiting in their green threads: where a poll holds the quota
# each reads the workspace's size (a scan, in the thread pool) and then writes at most what was left, so two at
# once would each pass it by what the other wrote, and many at once would hold the pool's threads for everyone.
UPLOADS = KeyedLocks[Path]()


def _store(source: IO[bytes], target: Path, limit: int, quota_mb: int, room: int | None = None) -> os.stat_result:
    """Write the upload into a nameless file in `target`'s folder, then give it `target`'s name; 413 (and
    nothing kept) past `limit` bytes, 507 `workspace_full` (and nothing kept) when the workspace's file
    system, or past `room` bytes its quota, has no room, 409 `name_is_folder` (and nothing kept) when a folder
    holds the name."""
    folder = os.open(target.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _store_in(source, folder, target, limit, quota_mb, room)
    finally:
        os.close(folder)


def _store_in(source: IO[bytes], folder: int, target: Path, limit: int, quota_mb: int,
              room: int | None) -> os.stat_result:
    staged = f".upload-{uuid.uuid4().hex}.part"
    try:
        fd, named = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o644, dir_fd=folder), False
    except OSError as exc:  # a file system without nameless files (O_TMPFILE): a hidden name from the start
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        fd, named = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                            dir_fd=folder), True
    try:
        written = 0
        while chunk := source.read(COPY_CHUNK):
            written += len(chunk)
            if written > limit:
                raise _too_large(limit)
            if room is not None and written > room:
                raise _workspace_full(quota_mb)
            view = memoryview(chunk)
            while view:  # a full file system refuses a write (ENOSPC) before the file has a name
                view = view[os.write(fd, view):]
        st = os.fstat(fd)
        os.fchmod(fd, 0o644)
        if not named:  # linkat(AT_SYMLINK_FOLLOW) names the open file (a dir_fd makes Python call linkat)
            os.link(f"/proc/self/fd/{fd}", staged, dst_dir_fd=folder, follow_symlinks=True)
        try:
            os.replace(staged, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        except (IsADirectoryError, NotADirectoryError):
            raise _name_is_folder(target.name) from None
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise _name_is_folder(target.name) from None
            raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _workspace_full(quota_mb) from None
        raise
    finally:
        os.close(fd)
        try:
            os.unlink(staged, dir_fd=folder)
        except FileNotFoundError:
            pass
    return st


@bp.post("/<conversation_id>/files")
@endpoint({201: out.WorkspaceFile}, errors=(400, 404, 409, 413, 507), upload="file")
def upload_file(conversation_id: str, user_id: int) -> tuple[out.WorkspaceFile, int]:
    """Upload a file into the conversation's workspace (multipart field `file`).

    Larger than UPLOAD_MAX_MB answers 413 `file_too_large`; a name with `/`, `..`, NUL, control or bidi
    characters answers 400 `invalid_filename` (names are stored in NFC); a name a folder holds answers 409
    `name_is_folder`; no room left in the workspace's quota answers 507 `workspace_full`, the data disk below
    its reserve 507 `insufficient_storage`. A file of the same name is replaced."""
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
    low = rt.sandbox.disk.low_space() if rt.sandbox.disk is not None else None
    if low:
        raise ApiError(507, "insufficient_storage", low)
    workspace = rt.workspace(conv.id)
    target = workspace / name
    with UPLOADS.held(workspace):
        st = _store(upload.stream, target, limit, rt.settings.workspace_max_mb, _quota_room(rt.sandbox.disk, target))
    if conversation_store.get_conversation(rt.db, conv.id, user_id) is None:
        # Deleted while the file came in: its delete may have removed the workspace before this made it again,
        # and nothing else ever would (a delete marks the conversation before it removes the workspace).
        rt.remove_workspace(conv.id)
        raise not_found("conversation")
    return _file_out(name, st), 201


@bp.get("/<conversation_id>/files")
@endpoint({200: out.WorkspaceFileList}, errors=(400, 404), query=FileListQuery)
def list_files(conversation_id: str, user_id: int, query: FileListQuery) -> out.WorkspaceFileList:
    """One page of the regular files at the top of the conversation's workspace, by name.

    `limit` names at most, those after `cursor` (the `next_cursor` of the page before); `next_cursor` is
    null on the last page."""
    conv = owned_conversation(conversation_id, user_id)
    page = list_page(runtime().workspace(conv.id, create=False), query.cursor, query.limit)
    return out.WorkspaceFileList(
        data=[out.WorkspaceFile(name=f.name, size=f.size, modified=iso(f.mtime)) for f in page.files],
        next_cursor=page.next_cursor)


@bp.get("/<conversation_id>/files/<name>")
@endpoint({}, errors=(400, 404), files={200: "application/octet-stream"})
def download_file(conversation_id: str, name: str, user_id: int) -> Response:
    """Download one file of the conversation's workspace (as an attachment)."""
    conv = owned_conversation(conversation_id, user_id)
    name = checked_name(name)
    opened = _open_regular(runtime().workspace(conv.id, create=False) / name)
    if opened is None:
        raise not_found("file")
    fd, st = opened
    handle = os.fdopen(fd, "rb")
    mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return send_file(handle, mimetype=mimetype, as_attachment=True, download_name=name,
                     last_modified=st.st_mtime)
