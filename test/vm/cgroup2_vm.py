"""A small VM with cgroup v2 for test/integration/test_command_cgroup_v2_kernel.py: Debian's kernel under
qemu's software emulation, with this machine's root file system shared read-only over 9p, so a check runs
with the project's own code and Python. This machine's memory and pids controllers are bound to cgroup v1,
so the v2 path of the command cgroups can meet a real kernel only in a kernel of its own.

`python -m test.vm.cgroup2_vm` (run by `make cgroup2-vm`, a step of `make test`) installs qemu and
busybox from Debian and puts the kernel and the modules 9p needs in `.cache/cgroup2-vm/`; `run` boots it.
KVM is not used: on this machine's nested virtualisation a KVM guest stalls at boot, and emulation boots in
about 15 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "cgroup2-vm"
BUSYBOX = Path("/bin/busybox")
QEMU = "qemu-system-x86_64"
# in load order: virtio over PCI, then 9p over virtio
MODULES = ("virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "netfs",
           "fscache", "9pnet", "9pnet_virtio", "9p")
# The tmpfs on /tmp would hide a checkout under /tmp (`git clone . /tmp/x`): its folder is bound back over it.
INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in {modules}; do insmod /mods/$m.ko || echo "insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /newroot || {{ echo 9P FAILED; poweroff -f; }}
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys; mount -t devtmpfs dev /newroot/dev
mkdir /project; mount -o bind /newroot{cwd} /project
mount -t tmpfs tmp /newroot/tmp; mount -t cgroup2 none /newroot/sys/fs/cgroup
[ -d /newroot{cwd} ] || {{ mkdir -p /newroot{cwd} && mount -o bind /project /newroot{cwd}; }}
chroot /newroot /bin/sh -c 'cd {cwd} && {command}'
echo "VM EXIT $?"
poweroff -f
"""


def ready() -> str | None:
    """Why the VM cannot be booted here, or None."""
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (make cgroup2-vm)"
    if not BUSYBOX.is_file():
        return "busybox-static is not installed (make cgroup2-vm)"
    if not (CACHE / "vmlinuz").is_file() or any(not (CACHE / f"{m}.ko").is_file() for m in MODULES):
        return f"no kernel in {CACHE} (make cgroup2-vm)"
    return None


def _cpio(files: dict[str, tuple[int, bytes | None]]) -> bytes:
    """A newc archive of `files` (name: mode, content; None for a folder), as the kernel unpacks an initrd."""
    out = bytearray()

    def entry(ino: int, name: str, mode: int, data: bytes) -> None:
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
        out.extend(b"070701" + b"".join(b"%08X" % value for value in fields) + name.encode() + b"\0")
        out.extend(b"\0" * (-len(out) % 4) + data + b"\0" * (-len(data) % 4))

    for ino, (name, (mode, data)) in enumerate(files.items(), start=1):
        entry(ino, name, mode | (0o040000 if data is None else 0o100000), data or b"")
    entry(0, "TRAILER!!!", 0, b"")
    return bytes(out)


def run(command: str, *, timeout_s: float = 300.0) -> str:
    """Boot the VM, run `command` (a shell line) as root in this machine's root file system at the project's
    folder, power off; what the console printed."""
    files: dict[str, tuple[int, bytes | None]] = {d: (0o755, None) for d in ("bin", "mods", "newroot", "proc",
                                                                             "sys", "dev")}
    files["init"] = (0o755, INIT.format(modules=" ".join(MODULES), cwd=ROOT, command=command).encode())
    files["bin/busybox"] = (0o755, BUSYBOX.read_bytes())
    files.update({f"mods/{m}.ko": (0o644, (CACHE / f"{m}.ko").read_bytes()) for m in MODULES})
    with tempfile.TemporaryDirectory(prefix="cgroup2-vm-") as tmp:
        initrd = Path(tmp) / "initrd"
        initrd.write_bytes(_cpio(files))
        done = subprocess.run(
            [QEMU, "-accel", "tcg", "-m", "1024", "-smp", "1", "-nographic", "-no-reboot", "-net", "none",
             "-kernel", str(CACHE / "vmlinuz"), "-initrd", str(initrd), "-append", "console=ttyS0 panic=-1 quiet",
             "-virtfs", "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, check=False)
    return done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")


def prepare() -> None:
    """Install qemu and busybox (Debian) and put Debian's kernel and 9p's modules in the cache."""
    missing = [p for p, present in (("qemu-system-x86", shutil.which(QEMU)), ("busybox-static", BUSYBOX.is_file()))
               if not present]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if ready() is None:
        return
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    depends = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], capture_output=True, text=True,
                             check=True).stdout
    package = next(line.split(":", 1)[1].strip() for line in depends.splitlines()
                   if line.strip().startswith("Depends: linux-image-"))
    with tempfile.TemporaryDirectory(prefix="cgroup2-kernel-") as tmp:
        subprocess.run(["apt-get", "download", "-q", package], cwd=tmp, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        (deb,) = Path(tmp).glob("*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), f"{tmp}/x"], check=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        (kernel,) = Path(tmp, "x", "boot").glob("vmlinuz-*")
        shutil.copy(kernel, CACHE / "vmlinuz")
        for module in MODULES:
            (found,) = Path(tmp, "x", "lib", "modules").rglob(f"{module}.ko")
            shutil.copy(found, CACHE / f"{module}.ko")


if __name__ == "__main__":
    prepare()
    print(ready() or f"cgroup2 VM ready in {CACHE}")
    sys.exit(0)
