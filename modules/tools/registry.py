"""Tool lookup and safe execution."""

from __future__ import annotations

import logging
from typing import Any

from modules.storage.db import DatabaseUnavailable
from modules.tools.base import ToolArgumentError, ToolContext, ToolSpec, parse_arguments

log = logging.getLogger(__name__)


class ToolRegistry:
    def __init__(self, specs: list[ToolSpec] | None = None):
        self._specs: dict[str, ToolSpec] = {}
        # Built at registration: pydantic's schema walk costs about 2 ms for the nine tools, on every model call.
        self._definitions: dict[str, dict[str, Any]] = {}
        for spec in specs or []:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name!r} registered twice")
        self._specs[spec.name] = spec
        self._definitions[spec.name] = spec.definition()

    def names(self) -> list[str]:
        return list(self._specs)

    def definitions(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """The tools' definitions as the model gets them; the same objects each call, so not to be changed."""
        chosen = self._definitions if names is None else {n: self._definitions[n] for n in names
                                                          if n in self._definitions}
        return list(chosen.values())

    def execute(self, name: str, raw_arguments: str | None, ctx: ToolContext,
                allowed: list[str] | None = None) -> dict[str, Any]:
        """Run one tool call; every failure becomes a `{"success": false, "error": ...}` result."""
        spec = self._specs.get(name)
        if spec is None or (allowed is not None and name not in allowed):
            return {"success": False, "error": f"unknown tool {name!r}"}
        try:
            args = parse_arguments(spec, raw_arguments)
        except ToolArgumentError as exc:
            return {"success": False, "error": f"invalid arguments for {name}: {exc}"}
        try:
            result = spec.handler(ctx, args)
        except DatabaseUnavailable:  # the driver's words name the database's host: the operator's, not the model's
            log.warning("tool %s could not run: the database is unavailable", name, exc_info=True)
            return {"success": False, "error": f"{name} could not run: the server's database is unavailable "
                                               "right now, so nothing was started; try again in a moment"}
        except Exception as exc:  # a tool bug must not kill the agent's turn
            log.exception("tool %s failed", name)
            return {"success": False, "error": f"{name} failed: {type(exc).__name__}: {exc}"}
        if not isinstance(result, dict) or "success" not in result:
            return {"success": False, "error": f"{name} returned an invalid result"}
        return result
