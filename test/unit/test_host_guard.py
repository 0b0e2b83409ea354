"""The Host check's names: the configured HOST and ALLOWED_HOSTS, with or without a port."""

from __future__ import annotations

import json

import pytest

from modules.config import ConfigError, Settings
from server.host_guard import HostGuard, own_names


def status_for(guard: HostGuard, host: str | None) -> tuple[str, bytes]:
    seen: list[str] = []
    environ = {} if host is None else {"HTTP_HOST": host}
    body = b"".join(guard(environ, lambda status, headers: seen.append(status)))
    return seen[0], body


def ok_app(environ, start_response):
    start_response("200 OK", [])
    return [b"ok"]


@pytest.mark.parametrize("listen, host", [
    ("::1", "[::1]:5000"), ("myhost.localdomain", "MyHost.localdomain:8080"), ("127.0.0.2", "127.0.0.2"),
])
def test_the_configured_host_is_one_of_the_servers_names(listen, host):
    settings = Settings.from_env({"HOST": listen})
    guard = HostGuard(ok_app, own_names(settings.host, settings.allowed_hosts))
    assert status_for(guard, host) == ("200 OK", b"ok")
    assert status_for(guard, "localhost:5000")[0] == "200 OK"
    status, body = status_for(guard, "evil.example")
    assert status.startswith("403") and json.loads(body)["code"] == "forbidden_host"
    assert status_for(guard, None)[0].startswith("403")


def test_allowed_hosts_are_names_without_a_port():
    settings = Settings.from_env({"ALLOWED_HOSTS": " Chat.Example.org ,::1,"})
    assert settings.allowed_hosts == ("chat.example.org", "::1")
    guard = HostGuard(ok_app, own_names(settings.host, settings.allowed_hosts))
    assert status_for(guard, "chat.example.org:443")[0] == "200 OK"
    for bad in ("chat.example.org:443", "https://chat.example.org", "[::1]:80"):
        with pytest.raises(ConfigError, match="ALLOWED_HOSTS"):
            Settings.from_env({"ALLOWED_HOSTS": bad})
