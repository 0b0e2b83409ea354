"""The event catalogue (modules/event_catalogue.py) and its generated TypeScript (frontend/src/generated/events.ts)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from modules.event_catalogue import EVENTS, TextChunkEvent, TextEndEvent, wire_model
from tools.gen_event_types import OUTPUT, ROOT, render


def test_generated_typescript_is_current():
    """Fails when modules/event_catalogue.py changed and the generator was not run."""
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
    model = wire_model(TextChunkEvent)
    good = {"task_id": "t", "conversation_id": "c", "agent_id": "a", "message_id": "m", "content": "x"}
    model.model_validate(good, strict=True)
    model.model_validate({**good, "idx": 3}, strict=True)
    with pytest.raises(ValidationError):
        model.model_validate({**good, "surprise": 1}, strict=True)
    with pytest.raises(ValidationError):
        model.model_validate({k: v for k, v in good.items() if k != "content"}, strict=True)


def test_an_optional_field_is_left_out_when_none_and_never_sent_as_null():
    assert TextEndEvent(message_id="m", content="c").data() == {"message_id": "m", "content": "c"}
    assert TextEndEvent(message_id="m", content="c", partial=True).data()["partial"] is True
    envelope = {"task_id": "t", "conversation_id": "c", "agent_id": "a"}
    with pytest.raises(ValidationError):
        wire_model(TextEndEvent).model_validate({**envelope, "message_id": "m", "content": "c", "partial": None},
                                                strict=True)

