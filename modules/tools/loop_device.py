"""Loop devices by ioctl (README, "Command sandbox": the workspace quota).

An image must never be attached to two loop devices at once: two block devices over one ext4 image are two
file systems writing the same blocks, and corrupt it. So a process first looks for the loop device that
already holds the image (another process of a cluster may have attached it) and attaches a new one only when
none does, under the image's file lock (modules/tools/workspace_images.py). Devices are attached with
autoclear: the kernel detaches one when its last user (a mount, an open descriptor) is gone, so nothing is
left attached after a server dies. That is also why a device is found by opening it first and then checking
that it still holds the image (by device and inode number): the open descriptor keeps it from being cleared
(and then reused for another file) until the caller has mounted it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path

LOOP_GET_STATUS64 = 0x4C05
LOOP_SET_CAPACITY = 0x4C07
LOOP_CONFIGURE = 0x4C0A
LOOP_CTL_GET_FREE = 0x4C82
LO_FLAGS_AUTOCLEAR = 4
# struct loop_info64: device, inode, rdevice, offset, sizelimit, number, encrypt type, key size, flags,
# file name, crypt name, key, init[2]
INFO64 = struct.Struct("=QQQQQIIII64s64s32s2Q")
CONFIG = struct.Struct(f"=II{INFO64.size}s64x")  # struct loop_config: fd, block size, info, reserved
ATTACH_TRIES = 16  # another process may take the free device between asking for it and configuring it


def held_by(image: Path) -> tuple[int, str] | None:
    """An open descriptor and the path of the loop device that holds `image`, or None."""
    st = os.stat(image)
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        try:
            if image.name not in backing.read_text():
                continue
        except OSError:
            continue
        device = f"/dev/{backing.parent.parent.name}"
        try:
            fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            info = INFO64.unpack(fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(INFO64.size)))
            if (info[0], info[1]) == (st.st_dev, st.st_ino):
                return fd, device
        except OSError:
            pass
        os.close(fd)
    return None


def attach(image: Path) -> tuple[int, str]:
    """Attach `image` to a free loop device (autoclear); an open descriptor of it and its path."""
    control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(ATTACH_TRIES):
            device = f"/dev/loop{fcntl.ioctl(control, LOOP_CTL_GET_FREE)}"
            fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
            info = INFO64.pack(0, 0, 0, 0, 0, 0, 0, 0, LO_FLAGS_AUTOCLEAR, image.name.encode()[:63], b"", b"", 0, 0)
            try:
                fcntl.ioctl(fd, LOOP_CONFIGURE, CONFIG.pack(backing, 0, info))
                return fd, device
            except OSError as exc:
                os.close(fd)
                if exc.errno != errno.EBUSY:
                    raise
        raise OSError(errno.EBUSY, f"no free loop device for {image.name}")
    finally:
        os.close(backing)
        os.close(control)


def refresh_size(fd: int) -> None:
    """The device takes its image's new size (after the image grew)."""
    fcntl.ioctl(fd, LOOP_SET_CAPACITY, 0)
