"""The UI's generated status and REST types (frontend/src/generated/statuses.ts, api.ts) are current, and
say what the server's definitions say (modules/statuses.py, server/api/response_models.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tools.gen_api_types as gen_api
import tools.gen_statuses as gen_statuses
from modules.statuses import FINAL_TASK_STATUSES, TaskStatus
from tools.gen_event_types import ROOT

GENERATORS = [gen_statuses, gen_api]


@pytest.mark.parametrize("gen", GENERATORS, ids=lambda g: g.__name__)
def test_generated_file_is_current(gen):
    assert gen.OUTPUT.read_text() == gen.render(), f"run .venv/bin/python tools/{gen.__name__.split('.')[-1]}.py"


@pytest.mark.parametrize("gen", GENERATORS, ids=lambda g: g.__name__)
def test_check_mode_reports_a_stale_file(gen, tmp_path, monkeypatch):
    stale = tmp_path / "out.ts"
    stale.write_text(gen.render().replace("export", "exports", 1))
    monkeypatch.setattr(gen, "OUTPUT", stale)
    assert gen.main(["--check"]) == 1
    gen.main([])
    assert gen.main(["--check"]) == 0


@pytest.mark.parametrize("script", ["tools/gen_statuses.py", "tools/gen_api_types.py"])
def test_generator_runs_as_a_script(script):
    proc = subprocess.run([sys.executable, script, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_statuses_are_spelt_as_the_server_stores_them():
    text = gen_statuses.render()
    assert 'export type TaskStatus = "pending" | "running" | "succeeded" | "failed" | "stopped";' in text
    final = ", ".join(f'"{s.value}"' for s in FINAL_TASK_STATUSES)
    assert f"export const FINAL_TASK_STATUSES: ReadonlySet<string> = new Set<TaskStatus>([{final}]);" in text
    assert TaskStatus.STOPPED == "stopped" and f"{TaskStatus.STOPPED}" == "stopped"  # stored and sent as its value


def test_a_send_answer_names_its_fields_and_an_error_body_may_leave_out_its_extras():
    text = gen_api.render()
    accepted = text.split("export interface SendAccepted {")[1].split("}")[0]
    assert "  message_id: string;" in accepted and "  task_id: string | null;" in accepted
    assert '  route: "hil" | "fast_path" | "pipeline" | null;' in accepted
    error = text.split("export interface ErrorBody {")[1].split("}")[0]
    assert "  success: false;" in error and "  retry_after_s?: number | null;" in error
