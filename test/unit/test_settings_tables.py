"""The configuration tables of README.md and docs/API.md are the settings' declarations, generated, and every
setting is read from its declared variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from modules.config import ConfigError, Settings
from modules.settings_fields import declared, default_of
from tools.gen_settings_tables import API, README, ROOT, TARGETS, render


@pytest.mark.parametrize("path", [README, API], ids=["README", "API"])
def test_the_configuration_table_is_generated_from_the_declarations(path):
    text = path.read_text(encoding="utf-8")
    assert text == render(text, with_kind=dict(TARGETS)[path]), "run .venv/bin/python tools/gen_settings_tables.py"


def test_the_check_fails_on_a_stale_table(tmp_path, monkeypatch):
    import tools.gen_settings_tables as gen

    stale = tmp_path / "README.md"
    stale.write_text(README.read_text(encoding="utf-8").replace("`PORT` | 5000", "`PORT` | 8080"), encoding="utf-8")
    monkeypatch.setattr(gen, "TARGETS", ((stale, False),))
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    proc = subprocess.run([sys.executable, "tools/gen_settings_tables.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_every_setting_has_a_variable_of_its_own_and_a_doc():
    names = [var.name for _f, var in declared(Settings)]
    assert len(names) == len(set(names))
    assert all(var.doc for _f, var in declared(Settings))
    assert "LOG_LEVEL" in names and "DEMO_CHUNK_DELAY_S" in names and "FRONTEND_DIR" in names


def test_a_blank_variable_is_unset_and_a_set_one_is_read_by_its_declaration():
    assert Settings.from_env({"PORT": " ", "SANDBOX": ""}) == Settings.from_env({})
    for f, _var in declared(Settings):
        assert getattr(Settings.from_env({}), f.name) == (default_of(f) if f.name != "database_url"
                                                          else Settings().database_url)
    read = Settings.from_env({"PORT": "81", "SANDBOX": "OFF", "SANDBOX_NETWORK": "on", "DATA_DIR": "/srv/chat",
                              "LOG_LEVEL": "debug", "MODEL_CONTEXT_TOKENS": "4096", "AUTH_TOKENS": "ann:t1"})
    assert (read.port, read.sandbox, read.sandbox_network, read.log_level) == (81, "off", True, "DEBUG")
    assert read.database_url == "sqlite:////srv/chat/app.db" and read.model_context_tokens == 4096
    assert read.auth_tokens == {"t1": "ann"}


@pytest.mark.parametrize("env, message", [
    ({"PORT": "0"}, "PORT must be positive, got 0"),
    ({"PORT": "x"}, "PORT must be an integer, got 'x'"),
    ({"NOTICE_SETTLE_MS": "-1"}, "NOTICE_SETTLE_MS must be zero or more, got -1.0"),
    ({"LLM_TIMEOUT_S": "0"}, "LLM_TIMEOUT_S must be positive, got 0.0"),
    ({"ROUTING_STAGES": "both"}, "ROUTING_STAGES must be one of combined, separate, got 'both'"),
    ({"LOG_LEVEL": "loud"}, "LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'"),
])
def test_a_value_that_cannot_be_used_is_refused_naming_its_variable(env, message):
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(env)
    assert str(refused.value) == message
