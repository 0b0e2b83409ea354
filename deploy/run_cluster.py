"""N chat-server processes behind nginx on one machine, in one command (README: "Several processes").

    DATABASE_URL=postgresql+psycopg://... REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python deploy/run_cluster.py --processes 2 --port 8080

starts `run.py` on ports 8081..8080+N (the first alone, so it alone runs the migrations, then the others),
then nginx on 8080 with deploy/nginx.conf (sticky sessions, WebSocket upgrade), and runs until Ctrl-C or
SIGTERM, which stop nginx and every process. Flask-SocketIO's own advice is one process per CPU. The
processes share one PostgreSQL or MySQL database and one Redis (the Socket.IO message queue and the peer
signals): SQLite is for one process, so it is refused here. The processes share `--db-connections` (80 of
PostgreSQL's default 100): each keeps its part open (`pool_settings`). nginx is Debian's package: installed here when
this runs as root, else the command to run is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf"
NGINX_INSTALL = "apt-get install -y nginx"
START_TIMEOUT_S = 60
DB_CONNECTIONS = 80  # all processes together; PostgreSQL's default max_connections is 100


def pool_settings(db_connections: int, processes: int) -> dict[str, str]:
    """Each process's database pool: its share of `db_connections`, kept open. A process's own default (a
    pool of 20 that may open 20 more) closes each connection beyond 20 when it comes back, so under load it
    opened two to three PostgreSQL connections per stream (a backend forked, a login) and N processes at once
    could pass max_connections. Beside the pool: one overflow connection (the setting must be positive) and
    the heartbeat's own."""
    return {"DB_POOL_SIZE": str(max(1, db_connections // processes - 2)), "DB_POOL_OVERFLOW": "1"}


class ClusterError(RuntimeError):
    """The cluster could not start; the message says why and what to do."""


def ensure_nginx() -> str:
    """The nginx binary; installed from Debian's package when missing and this runs as root."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found:
        return found
    if os.geteuid() != 0:
        raise ClusterError(f"nginx is not installed; run: sudo {NGINX_INSTALL}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(f"apt-get update -q && {NGINX_INSTALL} -q", shell=True, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if done.returncode != 0 or not found:
        raise ClusterError(f"could not install nginx ({done.stderr.strip()[-300:]}); run: {NGINX_INSTALL}")
    return found


def nginx_config(run_dir: Path, listen: str, backend_ports: list[int], per_client_connections: int) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{port} max_fails=0;" for port in backend_ports)
    return (TEMPLATE.read_text().replace("@RUN_DIR@", str(run_dir)).replace("@LISTEN@", listen)
            .replace("@UPSTREAM_SERVERS@", servers)
            .replace("@PER_CLIENT_CONNECTIONS@", str(per_client_connections)))


def wait_healthy(url: str, proc: subprocess.Popen, what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise ClusterError(f"{what} did not answer {url}/healthz within {timeout:g} s")


@dataclass
class Cluster:
    """The processes and nginx of one deployment; `start()` then `stop()` (also a context manager)."""

    database_url: str
    redis_url: str
    port: int
    backend_ports: list[int]
    env: dict[str, str] = field(default_factory=dict)  # added to each server's environment
    per_client_connections: int = 128  # nginx's cap per client address (the servers see only nginx's)
    db_connections: int = DB_CONNECTIONS  # the database connections all processes may hold together
    run_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="chat-cluster-")))
    servers: list[subprocess.Popen] = field(default_factory=list)
    nginx: subprocess.Popen | None = None
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.servers]

    def start(self) -> Cluster:
        if self.database_url.startswith("sqlite"):
            raise ClusterError("several processes need one PostgreSQL or MySQL database; SQLite is for one process")
        nginx = ensure_nginx()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            for k, port in enumerate(self.backend_ports):
                self.servers.append(self._start_server(k, port))
                if k == 0:  # migrations run once, in the first process, before the others start
                    wait_healthy(f"http://127.0.0.1:{port}", self.servers[0], "server 1")
            for k, (port, proc) in enumerate(zip(self.backend_ports, self.servers, strict=True)):
                wait_healthy(f"http://127.0.0.1:{port}", proc, f"server {k + 1}")
            conf = self.run_dir / "nginx.conf"
            conf.write_text(nginx_config(self.run_dir, f"127.0.0.1:{self.port}", self.backend_ports,
                                         self.per_client_connections))
            self.nginx = subprocess.Popen([nginx, "-p", str(self.run_dir), "-c", str(conf), "-e",
                                           str(self.run_dir / "error.log"), "-g", "daemon off;"],
                                          stdout=subprocess.DEVNULL, stderr=self._log("nginx"))
            wait_healthy(self.url, self.nginx, "nginx")
        except BaseException:
            self.stop()
            raise
        return self

    def _log(self, name: str) -> IO[bytes]:
        log = open(self.run_dir / f"{name}.log", "ab")  # noqa: SIM115 (closed in stop(); the child writes it)
        self._logs.append(log)
        return log

    def _start_server(self, k: int, port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--port", str(port)], cwd=ROOT,
                                env=self.server_env(), stdout=self._log(f"server-{k + 1}"), stderr=subprocess.STDOUT)

    def server_env(self) -> dict[str, str]:
        """Each server's environment: this one's, the cluster's settings, and `env` over them."""
        env = {**os.environ, "DATABASE_URL": self.database_url, "REDIS_URL": self.redis_url, **self.env}
        env.pop("PORT", None)
        env.setdefault("DATA_DIR", str(self.run_dir / "data"))  # one machine: the workspaces are shared too
        # Every connection comes from nginx's address: nginx caps each client (limit_conn), not the servers.
        env.setdefault("CLIENT_MAX_CONNECTIONS", "65536")
        for key, value in pool_settings(self.db_connections, len(self.backend_ports)).items():
            env.setdefault(key, value)  # the operator's own settings win
        return env

    def stop(self) -> None:
        for proc in ([self.nginx] if self.nginx else []) + self.servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM if proc is not self.nginx else signal.SIGQUIT)
        for proc in ([self.nginx] if self.nginx else []) + self.servers:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}"
                         for p in sorted(self.run_dir.glob("*.log")))

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _terminate(_signum, _frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="server processes (one per CPU)")
    parser.add_argument("--port", type=int, default=8080, help="nginx's port; the servers take the next N")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", ""))
    parser.add_argument("--per-client-connections", type=int, default=128,
                        help="connections one client address may hold through nginx (429 beyond)")
    parser.add_argument("--db-connections", type=int, default=DB_CONNECTIONS,
                        help="database connections all processes hold together (under its max_connections)")
    args = parser.parse_args(argv)
    if not args.database_url or not args.redis_url:
        print("set DATABASE_URL (PostgreSQL or MySQL) and REDIS_URL, or pass --database-url and --redis-url",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    cluster = Cluster(args.database_url, args.redis_url, args.port,
                      [args.port + 1 + k for k in range(max(1, args.processes))],
                      per_client_connections=args.per_client_connections, db_connections=args.db_connections)
    try:
        cluster.start()
        print(f"{len(cluster.servers)} processes behind nginx at {cluster.url} (logs in {cluster.run_dir}); "
              "Ctrl-C stops them", flush=True)
        while all(proc.poll() is None for proc in [*cluster.servers, cluster.nginx]):
            time.sleep(1)
        print(f"a process ended; stopping the rest\n{cluster.log_tail()}", file=sys.stderr)
        return 1
    except ClusterError as exc:
        print(f"{exc}\n{cluster.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
