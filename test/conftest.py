"""Shared fixtures: the scripted model server and real server processes (`run.py` under eventlet)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from modules.statuses import FINAL_TASK_STATUSES, SendStatus
from modules.tools import sandbox_warm
from test.scripted_llm import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
FINAL_STATUSES = FINAL_TASK_STATUSES  # defined once, in modules/statuses.py


def free_port() -> int:
    """A port free now, for a server the test starts a moment later. Taken below the kernel's ephemeral range:
    a port from it (what binding port 0 gives) may become the local port of any outgoing connection before the
    server binds it (nginx failed to start so while a benchmark held 5,500 client connections)."""
    low = _ephemeral_low()
    for _ in range(100):
        port = _ports.randrange(10000, low) if low > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port below the ephemeral range")


_ports = random.Random()  # (seeded from the OS: concurrent suites pick apart)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


# A launcher (see ServerProcess) whose server never runs the membership sweep after start-up: work that the
# sweep would pick up seconds later (a safety net) must then be done by the path under test, or not at all.
NO_SWEEP_LAUNCHER = ["-c", "import sys, run\nimport server.cluster\nserver.cluster.SWEEP_S = 1e9\n"
                           "sys.exit(run.main(sys.argv[1:]))\n"]

# Redis databases 1-15 go round one per test that asks (`redis_url`): Redis pub/sub ignores database numbers,
# and the servers scope their channels by it, so each test's servers hear only each other. Database 0 is left
# to `make run`.
# (Started at an offset by pid, so two suites run side by side seldom share one at a time.)
_REDIS_DBS = itertools.cycle([(os.getpid() + i) % 15 + 1 for i in range(15)])


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_outlives_the_session() -> Iterator[None]:
    """No child process outlives the session: every sandbox started ahead (modules/tools/sandbox_warm.py) is
    discarded when it ends, not at exit, and ended workers are reaped. `make mutate` runs the tests in its own
    process first, then waits for any child of it (`os.wait`) and fails on one that is not its worker."""
    yield
    sandbox_warm.close_all()
    multiprocessing.active_children()  # reaps the tests' ended worker processes


@pytest.fixture
def redis_url() -> str:
    """The URL of a Redis database of this test's own."""
    return f"redis://127.0.0.1:6379/{next(_REDIS_DBS)}"


# Settings of the calling shell that must not leak into a server started here.
UNINHERITED_ENV = ("HOST", "PORT", "DATABASE_URL", "AUTH_TOKENS", "REDIS_URL")


class ServerProcess:
    """One `python run.py` on a free port; restartable on the same data directory and database.

    `launcher` replaces `run.py` (the arguments after the interpreter), for a benchmark that patches
    the server before it runs."""

    def __init__(
        self, data_dir: Path, llm_url: str, *, database_url: str | None = None, env: dict[str, str] | None = None,
        launcher: list[str] | None = None,
    ):
        self.data_dir = data_dir
        self.port = free_port()
        self.database_url = database_url or f"sqlite:///{data_dir / 'app.db'}"
        self.launcher = launcher or ["run.py"]
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in UNINHERITED_ENV},
            "DATA_DIR": str(data_dir),
            "OPENAI_BASE_URL": llm_url,
            "OPENAI_API_KEY": "test-key",
            "LLM_MODEL": "scripted-model",
            "LLM_BACKOFF_BASE_S": "0.05",
            "LLM_TIMEOUT_S": "20",
            "LOG_LEVEL": "INFO",
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.token: str | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, *self.launcher, "--port", str(self.port), "--database-url", self.database_url],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if requests.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"server did not become healthy in {timeout}s:\n{self.log_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._log:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> ServerProcess:
        self.stop()
        return self.start()

    def workspace(self, conversation_id: str) -> Path:
        """A conversation's workspace as the running server sees it. A root server mounts each workspace's
        own file system in a mount namespace of its own (README, "Command sandbox"), seen from here through
        its /proc/<pid>/root; before its first command, an empty folder that the server moves in."""
        assert self.proc is not None
        return Path(f"/proc/{self.proc.pid}/root") / str(self.data_dir / "workspaces" / conversation_id).lstrip("/")

    def log_text(self) -> str:
        path = self.data_dir / "server.log"
        return path.read_text(errors="replace")[-5000:] if path.exists() else ""

    # -- HTTP helpers ----------------------------------------------------
    def request(
        self, method: str, path: str, *, json: Any = None, token: str | None = None, **kwargs: Any
    ) -> requests.Response:
        headers = kwargs.pop("headers", {})
        tok = token if token is not None else self.token
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        return requests.request(method, self.url + path, json=json, headers=headers, timeout=15, **kwargs)

    def post(self, path: str, json: Any = None, **kw: Any) -> requests.Response:
        return self.request("POST", path, json=json, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.request("GET", path, **kw)

    def send(self, message: str, conversation_id: str | None = None, **extra: Any) -> dict[str, Any]:
        body = {"message": message, **extra}
        if conversation_id:
            body["conversation_id"] = conversation_id
        res = self.post("/api/tasks", body)
        assert res.status_code == 202, res.text
        return self.routed(res.json())

    def routed(self, answer: dict[str, Any], timeout: float = 15) -> dict[str, Any]:
        """A send's acknowledgement completed with its route, once routed (API.md: the route follows)."""
        if answer.get("status") != SendStatus.ROUTING:
            return answer
        path = f"/api/messages/{answer['message_id']}"
        found = wait_until(lambda: (m := self.get(path).json()).get("status") == SendStatus.ROUTED and m, timeout,
                           what=f"the route of message {answer['message_id']}")
        return {**answer, **{k: v for k, v in found.items() if k != "success"}}

    def wait_event(self, task_id: str, event_type: str, timeout: float = 15) -> dict[str, Any]:
        """Poll the task's event log until it holds an event of `event_type`; returns the first one's data."""
        def found():
            events = self.get(f"/api/tasks/{task_id}").json()["events"]
            return next((e["data"] for e in events if e["type"] == event_type), None)
        return wait_until(found, timeout, what=f"a {event_type} event of task {task_id}")

    def wait_task(self, task_id: str, timeout: float = 20, **kw: Any) -> dict[str, Any]:
        """Poll the task's event log until its status is final; returns the task with every event."""
        deadline = time.monotonic() + timeout
        events: list[dict[str, Any]] = []
        offset = 0
        while time.monotonic() < deadline:
            body = self.get(f"/api/tasks/{task_id}?from={offset}", **kw).json()
            events.extend(body["events"])
            offset = body["next_offset"]
            if body["status"] in FINAL_STATUSES:
                body["events"] = events
                return body
            time.sleep(0.02)
        raise TimeoutError(
            f"task {task_id} not finished in {timeout}s; events so far: "
            f"{[e['type'] for e in events]}\n{self.log_text()}"
        )


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def llm(llm_server: ScriptedLLMServer) -> Iterator[ScriptedLLMServer]:
    llm_server.reset()
    yield llm_server
    llm_server.reset()


@pytest.fixture
def make_server(tmp_path: Path, llm: ScriptedLLMServer):
    """Factory of server processes sharing this test's scripted model; all are stopped at the end."""
    started: list[ServerProcess] = []

    def factory(**kwargs: Any) -> ServerProcess:
        data_dir = kwargs.pop("data_dir", None) or tmp_path / f"server{len(started)}"
        data_dir.mkdir(parents=True, exist_ok=True)
        server = ServerProcess(data_dir, llm.base_url, **kwargs)
        started.append(server)
        return server.start()

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server) -> ServerProcess:
    return make_server()


TWO_USERS = "alice:tok-alice,bob:tok-bob"  # AUTH_TOKENS of `auth_server`


@pytest.fixture
def auth_server(make_server) -> ServerProcess:
    """A server with two users; requests go as alice unless a call passes another token."""
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    server.token = "tok-alice"
    return server


def wait_until(predicate, timeout: float = 15, what: str = "condition"):
    """Poll `predicate` until it returns something truthy (returned), bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError(f"{what} not reached in {timeout}s")


def run_refused_start(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """Run `run.py` with `args` on a free port, expecting it to refuse to start: it returns as soon as the
    process exits, and fails as soon as the port answers instead (a regressed refusal must not hang a test)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "run.py", *args, "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            with socket.socket() as probe:
                probe.settimeout(0.2)
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    pytest.fail(f"the server started on port {port} instead of refusing to")
            if time.monotonic() > deadline:
                pytest.fail(f"the server neither refused nor started within {timeout} s")
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=10)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def event_types(task: dict[str, Any]) -> list[str]:
    return [e["type"] for e in task["events"]]
