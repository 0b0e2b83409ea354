"""What bench/load.py drives: the bare relay, the product on one process, or N processes behind nginx.

Each target is a context manager that starts its processes against the given scripted model and yields a
`Target`: the URL the driver connects to, the pids whose memory it samples, and a way to read the logs when
the driver fails, and its components (the processes whose CPU bench/streaming/cpu.py counts). All of them stop
with the context, however it ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.streaming import cpu
from deploy.run_cluster import Cluster
from test.conftest import ServerProcess, free_port
from test.db_urls import fresh_database

ROOT = Path(__file__).resolve().parents[2]
RELAY_LAUNCHER = [str(ROOT / "bench" / "streaming" / "relay.py")]
STAGED_RELAY = "relay, 3 requests"


@dataclass(frozen=True)
class Target:
    label: str
    url: str
    pids: list[int]
    log_text: Callable[[], str]
    components: Callable[[], dict[str, list[int]]]  # label -> pids; the product's own labels start "server"
    counters: Callable[[], dict[str, int]] = dict  # label -> a count so far (bench/streaming/cpu.py)


@contextlib.contextmanager
def relay(llm_url: str, data_dir: Path, *, stages: bool = False) -> Iterator[Target]:
    """The bare relay; `stages`: with the product's routing and suggestion requests around each reply."""
    launcher = RELAY_LAUNCHER + (["--stages"] if stages else [])
    server = ServerProcess(data_dir, llm_url, launcher=launcher).start(timeout=60)
    try:
        yield Target(STAGED_RELAY if stages else "bare relay", server.url, [server.proc.pid], server.log_text,
                     lambda: {"server (relay)": [server.proc.pid]})
    finally:
        server.stop()


@contextlib.contextmanager
def product(llm_url: str, data_dir: Path, database: str, env: dict[str, str]) -> Iterator[Target]:
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(fresh_database("postgresql", data_dir)) if database == "postgresql" else None
        server = ServerProcess(data_dir, llm_url, database_url=database_url, env=env).start(timeout=60)
        stack.callback(server.stop)
        pid = server.proc.pid
        yield Target(f"product ({database})", server.url, [pid], server.log_text,
                     lambda: {"server": [pid], **(cpu.postgres(_name(database_url)) if database_url else {})},
                     lambda: {**cpu.database_counts([server.url]),
                              **(cpu.postgres_counts(_name(database_url)) if database_url else {})})


@contextlib.contextmanager
def behind_nginx(llm_url: str, data_dir: Path, processes: int, env: dict[str, str]) -> Iterator[Target]:
    """`processes` product processes on one fresh PostgreSQL database and a Redis database of their own,
    behind nginx (deploy/run_cluster.py)."""
    with fresh_database("postgresql", data_dir) as database_url:
        server_env = {"OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "test-key", "LLM_MODEL": "scripted-model",
                      "LLM_BACKOFF_BASE_S": "0.05", "LLM_TIMEOUT_S": "20", **env}
        data_dir.mkdir(parents=True, exist_ok=True)
        # Redis pub/sub ignores database numbers, but the cluster names its channels after one (README): a
        # number of this run's own, as the suite's tests take theirs (test/conftest.py).
        redis_url = f"redis://127.0.0.1:6379/{os.getpid() % 15 + 1}"
        cluster = Cluster(database_url, redis_url, free_port(), [free_port() for _ in range(processes)],
                          env=server_env, run_dir=data_dir,
                          per_client_connections=int(env.get("CLIENT_MAX_CONNECTIONS", "128")))
        with cluster:
            label = f"{processes} process{'es' if processes > 1 else ''} behind nginx (postgresql)"
            backends = [f"http://127.0.0.1:{port}" for port in cluster.backend_ports]
            yield Target(label, cluster.url, cluster.pids, cluster.log_tail, lambda: _cluster_components(cluster),
                         lambda: {**cpu.database_counts(backends), **cpu.postgres_counts(_name(database_url))})


def _name(database_url: str) -> str:
    return database_url.rsplit("/", 1)[1]


def _cluster_components(cluster: Cluster) -> dict[str, list[int]]:
    nginx = [cluster.nginx.pid, *cpu.children(cluster.nginx.pid)] if cluster.nginx else []
    return {**{f"server {k}": [pid] for k, pid in enumerate(cluster.pids, 1)}, "nginx": nginx,
            **cpu.postgres(_name(cluster.database_url)), **cpu.redis_server()}
