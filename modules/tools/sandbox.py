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
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from modules.config import Settings
from modules.tools.command_cgroup import CommandCgroup, CommandCgroups
from modules.tools.disk_guard import DiskGuard
from modules.tools.sandbox_etc import build_etc
from modules.tools.seccomp_filter import SeccompUnavailable, build_filter

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
SANDBOX_UID = 1000  # the user inside a sandbox that an unprivileged server builds
FIRST_UID, UID_COUNT = 200_000, 100_000  # a root server's per-conversation users (no passwd entries)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
PASSED_ENV = ("LANG", "LC_ALL", "TZ")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROBE_TIMEOUT_S = 10.0
NETWORK_READY_TIMEOUT_S = 5.0
LINK_LOCAL = "169.254.0.0/16"  # where clouds answer metadata requests (169.254.169.254)


@dataclass(frozen=True)
class CommandLimits:
    """Per-command limits that hold whatever the model asks (set inside the sandbox, after its user
    namespace exists, so the process count is this sandbox's own)."""

    memory_mb: int = 2048
    max_processes: int = 256
    file_mb: int = 1024

    def prlimit(self) -> list[str]:
        mem = self.memory_mb * 1024 * 1024
        return ["prlimit", f"--as={mem}", f"--nproc={self.max_processes}",
                f"--fsize={self.file_mb * 1024 * 1024}", "--core=0", "--"]


@dataclass
class Launched:
    """A started command and the helper processes that serve it (the network stack)."""

    proc: subprocess.Popen[bytes]
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)  # ours to close once the command ends
    cgroup: CommandCgroup | None = None  # the command's own, removed once it ended

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        for helper in self.helpers:
            try:
                helper.wait(timeout=2)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()


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
        self.limits = limits or CommandLimits()
        self.auth_required = auth_required
        self.disk = disk  # the workspace quota and the data disk's reserve; None: neither
        self._state_dir = state_dir
        self._etc: Path | None = None
        self._bwrap = shutil.which("bwrap")
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
                self._seccomp = build_filter(self._etc.parent / f"seccomp-{os.getpid()}.bpf")
            except (SeccompUnavailable, OSError) as exc:
                self.seccomp_problem = str(exc)
            self._disable_userns = not self._privileged and _bwrap_supports(self._bwrap, "--disable-userns")
            with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as tmp:
                workspace = Path(tmp)
                self.prepare_workspace(workspace)
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
            return (f"command sandbox: bubblewrap, {net}, {seccomp}, {self.limits.memory_mb} MB memory and "
                    f"{self.limits.max_processes} processes per command, {self.limit_mode()} "
                    f"(probe {self.probe_ms or 0:.0f} ms)")
        if self.mode == "off":
            return "command sandbox: OFF (SANDBOX=off): agents' commands run with this server's authority"
        if self.refusal():
            return f"command sandbox: UNAVAILABLE ({self.problem}); commands are refused (set SANDBOX=off to allow)"
        return (f"command sandbox: UNAVAILABLE ({self.problem}); commands run UNSANDBOXED with this server's "
                "authority (single-user loopback server)")

    def _block_link_local(self, child_pid: int) -> None:
        done = subprocess.run(_link_local_block(child_pid, self._privileged), capture_output=True,
                              timeout=NETWORK_READY_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"could not cut the sandbox off from {LINK_LOCAL}: "
                               f"{done.stderr.decode(errors='replace').strip()[:200]}")

    def limit_mode(self) -> str:
        """How memory and processes are bounded: for the whole command (a cgroup), or per process only."""
        if self.cgroups.mode:
            return f"for the whole command by {self.cgroups.mode}"
        return f"per process by rlimits only ({self.cgroups.problem})"

    # -- running --------------------------------------------------------------
    def prepare_workspace(self, workspace: Path) -> None:
        """The sandbox's user must be able to write its workspace."""
        workspace.mkdir(parents=True, exist_ok=True)
        if self.active and self._privileged:
            uid = conversation_uid(workspace)
            info = workspace.stat()
            if info.st_uid != uid:
                os.chown(workspace, uid, uid)
            if info.st_mode & 0o711 != 0o711:  # bwrap enters it before the drop, as root without capabilities
                os.chmod(workspace, info.st_mode | 0o711)

    def _bwrap_argv(self, workspace: Path, extra: list[str]) -> list[str]:
        if self._privileged:  # setuid/setgid only for the drop to the conversation's user (see _inner)
            user = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            user = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        argv = [self._bwrap or "bwrap", *user, "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox",
                *_system_binds(), "--ro-bind", str(self._etc), "/etc",
                "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
                "--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE, *extra]
        if not self.network:
            argv.insert(1, "--unshare-net")
        if self._disable_userns:
            argv.insert(1, "--disable-userns")
        return argv

    def _outer(self) -> list[str]:
        """An unsandboxed command dies with the server (parent-death signal); bwrap's `--die-with-parent`
        does the same for itself and its sandbox."""
        return [self._setpriv, "--pdeathsig", "KILL"] if self._setpriv else []

    def _inner(self, command: str, workspace: Path) -> list[str]:
        """Inside: a root server's sandbox drops to the conversation's user, then the limits apply."""
        drop = []
        if self.active and self._privileged:
            uid = conversation_uid(workspace)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
        return [*drop, *self.limits.prlimit(), "/bin/sh", "-c", command]

    def spawn(self, command: str, workspace: Path, *, stdout: int | IO[bytes],
              stderr: int | IO[bytes] = subprocess.STDOUT) -> Launched:
        """Start `command` under /bin/sh, in its own session (so the whole group can be killed), in a cgroup
        of its own where the server may create one."""
        cgroup = self.cgroups.create(uuid.uuid4().hex) if self.cgroups.mode else None
        try:
            launched = self._spawn(command, workspace, stdout=stdout, stderr=stderr,
                                   wrap=cgroup.join_argv if cgroup else lambda argv: argv)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        launched.cgroup = cgroup
        return launched

    def _spawn(self, command: str, workspace: Path, *, stdout: int | IO[bytes], stderr: int | IO[bytes],
               wrap: Callable[[list[str]], list[str]]) -> Launched:
        inner = self._inner(command, workspace)
        popen: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": stdout, "stderr": stderr, "env": command_env(),
                 "start_new_session": True}
        if not self.active:
            return Launched(subprocess.Popen(wrap([*self._outer(), *inner]), cwd=workspace, **popen))
        seccomp_fd = os.open(self._seccomp, os.O_RDONLY | os.O_CLOEXEC) if self._seccomp else None
        seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        try:
            if not self.network:
                return Launched(subprocess.Popen(wrap([*self._bwrap_argv(workspace, seccomp), *inner]),
                                                 pass_fds=(seccomp_fd,) if seccomp_fd is not None else (), **popen))
            return self._spawn_networked(wrap, inner, workspace, popen, seccomp, seccomp_fd)
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    def _spawn_networked(self, wrap: Callable[[list[str]], list[str]], inner: list[str], workspace: Path,
                         popen: dict[str, Any], seccomp: list[str],
                         seccomp_fd: int | None) -> Launched:
        """The sandbox gets its own network stack from slirp4netns, which cannot reach the host's loopback
        (where the database, Redis and this server listen). slirp4netns may only configure the namespace
        once bwrap has finished setting it up, so the command's first act is to say so on its standard
        input (a socket pair), and its second to wait there for the word that the network is up."""
        info_r, info_w = os.pipe()
        ours, theirs = socket.socketpair()
        os.set_blocking(theirs.fileno(), True)  # eventlet makes sockets non-blocking; the gate's read must wait
        gate = ["/bin/sh", "-c", 'printf x >&0; read -r _; exec </dev/null; exec "$@"', "sh", *inner]
        try:
            proc = subprocess.Popen(
                wrap([*self._bwrap_argv(workspace, ["--unshare-net", "--info-fd", str(info_w), *seccomp]), *gate]),
                pass_fds=(info_w,) if seccomp_fd is None else (info_w, seccomp_fd),
                **{**popen, "stdin": theirs.fileno()})
        finally:
            os.close(info_w)
            theirs.close()
        launched = Launched(proc)
        try:
            child_pid = _read_child_pid(info_r)
            if not _wait_readable(ours.fileno()) or not os.read(ours.fileno(), 1):
                raise RuntimeError("the sandbox did not start")
            ready_r, ready_w = os.pipe()
            exit_r, exit_w = os.pipe()
            launched.fds.append(exit_w)
            slirp = subprocess.Popen(
                [self._slirp or "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                 "--ready-fd", str(ready_w), "--exit-fd", str(exit_r), str(child_pid), "tap0"],
                pass_fds=(ready_w, exit_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            os.close(ready_w)
            os.close(exit_r)
            launched.helpers.append(slirp)
            ready = _wait_readable(ready_r) and os.read(ready_r, 1)
            os.close(ready_r)
            if not ready:
                raise RuntimeError("the sandbox's network did not come up")
            self._block_link_local(child_pid)
            os.write(ours.fileno(), b"go\n")
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            launched.release()
            raise
        finally:
            os.close(info_r)
            ours.close()
        return launched


def _link_local_block(child_pid: int, privileged: bool) -> list[str]:
    """The command that makes link-local addresses (169.254.169.254, the cloud metadata service) unreachable
    in the sandbox's network namespace: entered from outside, so the sandbox needs no capability for it."""
    enter = ["nsenter", "-t", str(child_pid), "-n"] if privileged else \
        ["nsenter", "-t", str(child_pid), "-U", "-n", "--preserve-credentials"]
    return [*enter, "ip", "route", "add", "unreachable", LINK_LOCAL]


def _bwrap_supports(bwrap: str | None, option: str) -> bool:
    try:
        out = subprocess.run([bwrap or "bwrap", "--help"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in out.stdout + out.stderr


def kill_group(pid: int) -> None:
    """SIGKILL a command's whole process group (a sandbox's bwrap takes its sandbox along)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], NETWORK_READY_TIMEOUT_S)[0])


def _read_child_pid(info_r: int) -> int:
    """bwrap writes `{"child-pid": N}` to its info fd once the namespaces exist."""
    data = b""
    deadline = time.monotonic() + NETWORK_READY_TIMEOUT_S
    while b"}" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([info_r], [], [], left)[0]:
            raise RuntimeError("bwrap did not report its sandbox")
        chunk = os.read(info_r, 4096)
        if not chunk:
            raise RuntimeError("bwrap exited before its sandbox was up")
        data += chunk
    return int(json.loads(data[:data.index(b"}") + 1])["child-pid"])


def build_sandbox(settings: Settings) -> Sandbox:
    """The server's sandbox, probed once at start."""
    limits = CommandLimits(memory_mb=settings.command_memory_mb, max_processes=settings.command_max_processes,
                           file_mb=settings.command_file_mb)
    disk = DiskGuard(settings.data_dir, settings.data_disk_reserve_mb * 2**20, settings.workspace_max_mb * 2**20)
    return Sandbox(mode=settings.sandbox, network=settings.sandbox_network, limits=limits,
                   auth_required=settings.auth_required, state_dir=settings.data_dir / "sandbox", disk=disk).probe()
