"""deploy/run_cluster.py without starting anything: what each server process is given."""

from __future__ import annotations

from deploy.run_cluster import Cluster, pool_settings


def test_the_processes_share_the_database_connections_and_keep_them_open(tmp_path, monkeypatch):
    monkeypatch.delenv("DB_POOL_SIZE", raising=False)
    monkeypatch.delenv("DB_POOL_OVERFLOW", raising=False)
    cluster = Cluster("postgresql+psycopg://db/x", "redis://r/1", 8080, [8081, 8082], run_dir=tmp_path)
    env = cluster.server_env()
    assert (env["DB_POOL_SIZE"], env["DB_POOL_OVERFLOW"]) == ("38", "1")  # 2 x (38 + 1 + the heartbeat's) = 80
    assert pool_settings(80, 1) == {"DB_POOL_SIZE": "78", "DB_POOL_OVERFLOW": "1"}
    assert pool_settings(10, 8)["DB_POOL_SIZE"] == "1"


def test_the_operators_own_pool_settings_win(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_POOL_SIZE", "7")
    cluster = Cluster("postgresql+psycopg://db/x", "redis://r/1", 8080, [8081], run_dir=tmp_path,
                      env={"DB_POOL_OVERFLOW": "3"})
    env = cluster.server_env()
    assert (env["DB_POOL_SIZE"], env["DB_POOL_OVERFLOW"]) == ("7", "3")
