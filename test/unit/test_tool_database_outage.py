"""A tool that meets a database outage (modules/tools/registry.py): the model reads that nothing was started and
to try again, never the driver's words, which name the database's host and port."""

from __future__ import annotations

from typing import Any

from modules.storage.db import DatabaseUnavailable
from modules.tools.base import ToolContext, ToolSpec
from modules.tools.registry import ToolRegistry
from modules.tools.run_command import RUN_COMMAND

DRIVER = 'connection failed: connection to server at "10.1.2.3", port 5432 failed: Connection refused'


def test_a_tool_that_meets_a_database_outage_says_so_without_the_drivers_words():
    def outage(_ctx: ToolContext, _args: Any) -> dict[str, Any]:
        raise DatabaseUnavailable(f"the database is unavailable: {DRIVER}")

    spec = ToolSpec(RUN_COMMAND.name, RUN_COMMAND.description, RUN_COMMAND.arguments, outage)
    result = ToolRegistry([spec]).execute(RUN_COMMAND.name, '{"command": "ls"}', ctx=None)  # type: ignore[arg-type]

    assert result["success"] is False
    assert "database is unavailable" in result["error"] and "nothing was started" in result["error"]
    assert "10.1.2.3" not in result["error"] and "5432" not in result["error"]
