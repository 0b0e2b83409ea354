"""Where an agent's command runs: a bubblewrap sandbox (README, "Command sandbox").

Any text a model reads can make it run a command, so a command gets nothing it
was not given: the conversation's workspace read-write at `/workspace`, the
system read-only, its own `/tmp`, `/proc` and PID namespace, no network unless
the operator opens it, an environment built from an allow-list, and rlimits on
memory, processes and file size. Its processes run as an unprivileged user: a
root server builds the sandbox itself and drops each conversation's commands to
a user id of their own (so the process limit counts that conversation's
processes only); any other server builds it in a user namespace of its own
user. All of them die with the sandbox's first process: on finish, cancel,
timeout, and when the server itself dies (parent-death signal), since the PID
namespace ends with its init.

Where bubblewrap cannot run, commands run unsandboxed (still with the scrubbed
environment and limits) only on a single-user loopback server, or when the
operator says `SANDBOX=off`; a server with `AUTH_TOKENS` refuses them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from modules.config import Settings
from modules.tools.command_cgroup import CommandCgroups
from modules.tools.disk_guard import DiskGuard, build_disk_guard, open_workspace
from modules.tools.launched import Launched
from modules.tools.sandbox_etc import build_etc
from modules.tools.sandbox_network import spawn_networked
from modules.tools.sandbox_warm import Warm, WarmStarts
from modules.tools.seccomp_filter import SeccompUnavailable, build_filter

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
SANDBOX_UID = 1000  # the user inside a sandbox that an unprivileged server builds
FIRST_UID, UID_COUNT = 200_000, 100_000  # a root server's per-conversation users (no passwd entries)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
PASSED_ENV = ("LANG", "LC_ALL", "TZ")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CommandLimits:
    """Per-command limits that hold whatever the model asks (set inside the sandbox, after its user
    namespace exists, so the process count is this sandbox's own): built from the settings (`of`), whose
    declarations hold their defaults."""

    memory_mb: int
    max_processes: int
    file_mb: int

    @classmethod
    def of(cls, settings: Settings) -> CommandLimits:
        return cls(memory_mb=settings.command_memory_mb, max_processes=settings.command_max_processes,
                   file_mb=settings.command_file_mb)

    def prlimit(self, room_bytes: int | None = None) -> list[str]:
        """`room_bytes`: what the workspace's quota has left, where a poll holds it; no file the command writes
        may pass it."""
        mem = self.memory_mb * 1024 * 1024
        fsize = self.file_mb * 1024 * 1024 if room_bytes is None else min(self.file_mb * 1024 * 1024,
                                                                          max(4096, room_bytes))
        return ["prlimit", f"--as={mem}", f"--nproc={self.max_processes}", f"--fsize={fsize}", "--core=0", "--"]


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def conversation_uid(workspace: Path) -> int:
    """The user id that a root server gives a conversation's commands (its workspace folder is named
    after the conversation); two conversations rarely share one, and never see each other's files."""
    digest = hashlib.sha256(workspace.name.encode()).digest()
    return FIRST_UID + int.from_bytes(digest[:8], "big") % UID_COUNT


def command_env() -> dict[str, str]:
    """The whole environment a command gets: never the server's own variables (tokens, keys, URLs)."""
    env = {"PATH": SAFE_PATH, "HOME": "/tmp", "TERM": "dumb", "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)})
    return env


class Sandbox:
    def __init__(self, *, mode: str = "auto", network: bool = False, limits: CommandLimits | None = None,
                 auth_required: bool = False, state_dir: Path | None = None, cgroups: bool = True,
                 disk: DiskGuard | None = None):
        self.mode = mode
        self.network = network
        self.limits = limits or CommandLimits.of(Settings())  # the settings' defaults
        self.auth_required = auth_required
        self.disk = disk  # the workspace quota and the data disk's reserve; None: neither
        self._state_dir = state_dir
        self._etc: Path | None = None
        self._bwrap = shutil.which("bwrap")
        self._system = _system_binds()
        self._setpriv = shutil.which("setpriv")
        self._slirp = shutil.which("slirp4netns")
        self._privileged = os.geteuid() == 0
        self.problem: str | None = "it was not probed"  # why the sandbox cannot be built here
        self._seccomp: Path | None = None  # the filter's BPF program, loaded into every sandbox
        self.seccomp_problem: str | None = None
        self._disable_userns = False
        # cgroups=False: per-process rlimits only (bench/sandbox.py's bare baseline)
        self.cgroups = CommandCgroups(self.limits.memory_mb, self.limits.max_processes, enabled=cgroups)
        self._probed = False
        self.probe_ms: float | None = None
        self.watchers: list[Callable[[str, float], None]] = []  # told each command's end: status, seconds
        self._warm: WarmStarts | None = None  # the next command's sandbox, started ahead (no network)

    # -- deciding -------------------------------------------------------------
    def probe(self) -> Sandbox:
        """Build one sandbox around `true` to learn whether commands can be sandboxed here."""
        if self.mode == "off":
            return self
        self.problem, self._probed = None, True
        if self._bwrap is None:
            self.problem = "bubblewrap (bwrap) is not installed; install it with: apt-get install bubblewrap"
        elif self.network and self._slirp is None:
            self.problem = ("SANDBOX_NETWORK=on needs slirp4netns; install it with: apt-get install slirp4netns")
        else:
            state_dir = self._state_dir or Path(tempfile.mkdtemp(prefix="sandbox-"))
            self._etc = build_etc(state_dir, network=self.network)
            try:
                self._seccomp = build_filter(state_dir / f"seccomp-{os.getpid()}.bpf")
            except (SeccompUnavailable, OSError) as exc:
                self.seccomp_problem = str(exc)
            self._disable_userns = not self._privileged and _bwrap_supports(self._bwrap, "--disable-userns")
            with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as tmp:
                workspace = Path(tmp)
                self._hand_over(workspace)  # a folder of the probe's own, never a workspace's file system
                started = time.monotonic()
                try:
                    launched = self.spawn("true", workspace, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    _, err = launched.proc.communicate(timeout=PROBE_TIMEOUT_S)
                    launched.release()
                    if launched.proc.returncode != 0:
                        self.problem = f"bwrap failed: {err.decode(errors='replace').strip()[:300]}"
                except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
                    self.problem = f"bwrap failed: {exc}"
                self.probe_ms = (time.monotonic() - started) * 1000
            if self.problem is None and not self.network:
                self._warm = WarmStarts(self._start_warm)
        return self

    @property
    def active(self) -> bool:
        """Commands run inside bubblewrap."""
        return self.mode != "off" and self.problem is None

    def disk_problem(self, workspace: Path) -> str | None:
        """Why no command may start in `workspace` now (its quota, the data disk's reserve), or None."""
        return self.disk.problem(workspace) if self.disk is not None else None

    def refusal(self) -> str | None:
        """Why no command may run at all, or None. Unsandboxed commands are only for a server whose
        operator chose so: `SANDBOX=off`, or a single-user loopback server in `auto` mode."""
        if self.active or self.mode == "off":
            return None
        if self.mode == "on" or self.auth_required or not self._probed:
            return (f"commands are disabled: the command sandbox cannot be built on this server ({self.problem}). "
                    "The operator can install it, or set SANDBOX=off to run commands unsandboxed.")
        return None

    def status_line(self) -> str:
        if self.active:
            net = "network on (host loopback and 169.254.0.0/16 unreachable)" if self.network else "no network"
            seccomp = "seccomp filter" if self._seccomp else f"NO seccomp filter ({self.seccomp_problem})"
            quota = f", {self.disk.mode()}" if self.disk is not None else ""
            return (f"command sandbox: bubblewrap, {net}, {seccomp}, {self.limits.memory_mb} MB memory and "
                    f"{self.limits.max_processes} processes per command, {self.limit_mode()}{quota} "
                    f"(probe {self.probe_ms or 0:.0f} ms)")
        if self.mode == "off":
            return "command sandbox: OFF (SANDBOX=off): agents' commands run with this server's authority"
        if self.refusal():
            return f"command sandbox: UNAVAILABLE ({self.problem}); commands are refused (set SANDBOX=off to allow)"
        return (f"command sandbox: UNAVAILABLE ({self.problem}); commands run UNSANDBOXED with this server's "
                "authority (single-user loopback server)")

    def limit_mode(self) -> str:
        """How memory and processes are bounded: for the whole command (a cgroup), or per process only."""
        if self.cgroups.mode:
            return f"for the whole command by {self.cgroups.mode}"
        return f"per process by rlimits only ({self.cgroups.problem})"

    # -- running --------------------------------------------------------------
    def prepare_workspace(self, workspace: Path) -> None:
        """The workspace mounted (its own file system, where it has one) and writable by the sandbox's user."""
        open_workspace(self.disk, workspace)
        self._hand_over(workspace)

    def _hand_over(self, workspace: Path) -> None:
        if self.active and self._privileged:
            uid = conversation_uid(workspace)
            info = workspace.stat()
            if info.st_uid != uid:
                os.chown(workspace, uid, uid)
            if info.st_mode & 0o711 != 0o711:  # bwrap enters it before the drop, as root without capabilities
                os.chmod(workspace, info.st_mode | 0o711)

    def _bwrap_options(self, workspace: Path, extra: list[str]) -> list[str]:
        """bwrap's options. They name host paths (the workspace's, the /etc copy's), so they reach bwrap through
        a descriptor (`--args FD`), never its command line, which every process in the sandbox can read as
        /proc/1/cmdline."""
        if self._privileged:  # setuid/setgid only for the drop to the conversation's user (see _inner)
            user = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            user = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        return [*(["--disable-userns"] if self._disable_userns else []),
                *([] if self.network else ["--unshare-net"]), *user,
                "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox",
                *self._system, "--ro-bind", str(self._etc), "/etc",
                "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
                "--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE, *extra]

    def _outer(self) -> list[str]:
        """An unsandboxed command dies with the server (parent-death signal); bwrap's `--die-with-parent`
        does the same for itself and its sandbox."""
        return [self._setpriv, "--pdeathsig", "KILL"] if self._setpriv else []

    def _inner(self, command: str, workspace: Path, room_bytes: int | None = None) -> list[str]:
        """Inside: a root server's sandbox drops to the conversation's user, then the limits apply."""
        drop = []
        if self.active and self._privileged:
            uid = conversation_uid(workspace)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
        return [*drop, *self.limits.prlimit(room_bytes), "/bin/sh", "-c", command]

    def spawn(self, command: str, workspace: Path, *, stdout: int | IO[bytes],
              stderr: int | IO[bytes] = subprocess.STDOUT) -> Launched:
        """Start `command` under /bin/sh, in its own session (so the whole group can be killed), in a cgroup
        of its own where the server may create one, no file of it larger than its workspace's quota has room
        for."""
        cgroup = self.cgroups.take() if self.cgroups.mode else None
        room = self.disk.room(workspace) if self.disk is not None else None
        try:
            launched = self._spawn(command, workspace, stdout=stdout, stderr=stderr, room_bytes=room,
                                   wrap=cgroup.join_argv if cgroup else lambda argv: argv)
        except BaseException:
            if cgroup is not None:
                cgroup.release()
            raise
        launched.cgroup = cgroup
        return launched

    def spawn_with_output(self, command: str, workspace: Path) -> tuple[Launched, int]:
        """`spawn` with its output (stdout and stderr) into a pipe of its own: the Launched command and the
        pipe's read end (the caller's to close). A sandbox started ahead takes it where there is one."""
        warm = self._warm.take() if self._warm is not None else None
        if warm is not None:
            room = self.disk.room(workspace) if self.disk is not None else None
            seccomp = ["--seccomp", str(warm.seccomp_fd)] if warm.seccomp_fd is not None else []
            try:
                return warm.run(self._bwrap_options(workspace, seccomp), self._inner(command, workspace, room))
            except BaseException:
                warm.discard()
                raise
        read_fd, write_fd = os.pipe()
        try:
            launched = self.spawn(command, workspace, stdout=write_fd)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        return launched, read_fd

    def _start_warm(self) -> Warm:
        cgroup = self.cgroups.take() if self.cgroups.mode else None
        options_r, options_w = os.pipe()
        script_r, script_w = os.pipe()
        output_r, output_w = os.pipe()
        seccomp_fd = os.open(self._seccomp, os.O_RDONLY | os.O_CLOEXEC) if self._seccomp else None
        argv = [self._bwrap or "bwrap", "--args", str(options_r), "/bin/sh", f"/dev/fd/{script_r}"]
        kept = (options_r, script_r, *((seccomp_fd,) if seccomp_fd is not None else ()))
        try:
            proc = subprocess.Popen(cgroup.join_argv(argv) if cgroup else argv, pass_fds=kept,
                                    stdin=subprocess.DEVNULL, stdout=output_w, stderr=output_w, env=command_env(),
                                    start_new_session=True)
        except BaseException:
            for fd in (options_w, script_w, output_r):
                os.close(fd)
            if cgroup is not None:
                cgroup.release()
            raise
        finally:
            for fd in (options_r, script_r, output_w, *((seccomp_fd,) if seccomp_fd is not None else ())):
                os.close(fd)
        return Warm(proc, options_w, script_w, script_r, output_r, seccomp_fd, cgroup)

    def _spawn(self, command: str, workspace: Path, *, stdout: int | IO[bytes], stderr: int | IO[bytes],
               room_bytes: int | None, wrap: Callable[[list[str]], list[str]]) -> Launched:
        inner = self._inner(command, workspace, room_bytes)
        popen: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": stdout, "stderr": stderr, "env": command_env(),
                 "start_new_session": True}
        if not self.active:
            return Launched(subprocess.Popen(wrap([*self._outer(), *inner]), cwd=workspace, **popen))
        seccomp_fd = os.open(self._seccomp, os.O_RDONLY | os.O_CLOEXEC) if self._seccomp else None
        seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []

        def start(extra: list[str], fds: tuple[int, ...], stdin: int, command_argv: list[str]
                  ) -> subprocess.Popen[bytes]:
            args_fd = _options_fd(self._bwrap_options(workspace, [*extra, *seccomp]))
            try:
                argv = [self._bwrap or "bwrap", "--args", str(args_fd), *command_argv]
                kept = (args_fd, *fds, *((seccomp_fd,) if seccomp_fd is not None else ()))
                return subprocess.Popen(wrap(argv), pass_fds=kept, **{**popen, "stdin": stdin})
            finally:
                os.close(args_fd)

        try:
            if not self.network:
                return Launched(start([], (), subprocess.DEVNULL, inner))
            return spawn_networked(start, inner, slirp=self._slirp or "slirp4netns", privileged=self._privileged)
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)


def _options_fd(options: list[str]) -> int:
    """A descriptor that reads back `options` NUL-separated, as bwrap's `--args` wants them."""
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    os.write(fd, b"".join(option.encode() + b"\0" for option in options))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _bwrap_supports(bwrap: str | None, option: str) -> bool:
    try:
        out = subprocess.run([bwrap or "bwrap", "--help"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in out.stdout + out.stderr


def build_sandbox(settings: Settings) -> Sandbox:
    """The server's sandbox, probed once at start."""
    return Sandbox(mode=settings.sandbox, network=settings.sandbox_network, limits=CommandLimits.of(settings),
                   auth_required=settings.auth_required, state_dir=settings.data_dir / "sandbox",
                   disk=build_disk_guard(settings)).probe()
