"""The event catalogue (server/event_types.py) and its generated TypeScript (frontend/src/generated/events.ts)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import TypeAdapter, ValidationError

from server.event_types import EVENTS
from tools.gen_event_types import OUTPUT, ROOT, render


def test_generated_typescript_is_current():
    """Fails when server/event_types.py changed and the generator was not run."""
    assert OUTPUT.read_text() == render(), "run .venv/bin/python tools/gen_event_types.py"


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch):
    import tools.gen_event_types as gen
    stale = tmp_path / "events.ts"
    stale.write_text(render().replace("message_id: string;", "messageId: string;", 1))
    monkeypatch.setattr(gen, "OUTPUT", stale)
    assert gen.main(["--check"]) == 1
    gen.main([])
    assert gen.main(["--check"]) == 0


def test_generator_runs_as_a_script():
    proc = subprocess.run([sys.executable, "tools/gen_event_types.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_event_type_is_in_the_union():
    text = OUTPUT.read_text()
    for event in EVENTS:
        assert f'{{ type: "{event}"; data: ' in text


def test_catalogue_refuses_unknown_and_missing_fields():
    adapter = TypeAdapter(EVENTS["text_chunk"])
    good = {"task_id": "t", "conversation_id": "c", "agent_id": "a", "message_id": "m", "content": "x"}
    adapter.validate_python(good)
    adapter.validate_python({**good, "idx": 3})
    with pytest.raises(ValidationError):
        adapter.validate_python({**good, "surprise": 1})
    with pytest.raises(ValidationError):
        adapter.validate_python({k: v for k, v in good.items() if k != "content"})
