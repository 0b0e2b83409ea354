"""Statuses are written once, in modules/statuses.py: server/ and modules/ compare, assign and pass them by
their enum members, never as strings (docs/ARCHITECTURE.md, "Events, statuses and meta").

The scan looks where a status stands: compared with, assigned to or passed as a `status`, `state`,
`previous`, `delivery`, `route`, `source` or `visibility`; elsewhere the same words mean other things (a
model's `finish_reason` "stopped", a usage record's "failed").
"""

from __future__ import annotations

import ast
from pathlib import Path

from modules.statuses import STATUS_SETS

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = ROOT / "modules" / "statuses.py"
VALUES = {member.value for enum in STATUS_SETS.values() for member in enum}
FIELDS = {"status", "state", "previous", "delivery", "route", "source", "visibility"}


def _literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VALUES


def _status_field(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name in FIELDS


def status_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of each status written as a string where a status goes."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_status_field(side) for side in sides):
                for side in sides:
                    elts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    found += [e for e in elts if _literal(e)]
        elif isinstance(node, ast.keyword) and node.arg in FIELDS and _literal(node.value):
            found.append(node.value)
        elif isinstance(node, ast.Assign) and _literal(node.value) and any(_status_field(t) for t in node.targets):
            found.append(node.value)
    return sorted((c.lineno, c.value) for c in found)


def test_no_status_is_written_as_a_string_outside_its_definition():
    offenders = [f"{path.relative_to(ROOT)}:{line}: {value!r}"
                 for path in sorted([*(ROOT / "server").rglob("*.py"), *(ROOT / "modules").rglob("*.py")])
                 if path != DEFINITION for line, value in status_literals(path.read_text())]
    assert offenders == [], "use the enums of modules/statuses.py:\n" + "\n".join(offenders)


def test_the_scan_finds_each_place_a_status_stands():
    source = '''
if task.status == "running": pass
if agent.state in ("idle", "completed"): pass
row.status = "queued"
set_status(db, status="succeeded")
if reply.finish_reason == "stopped": pass
record = {"status": "ok"}
'''
    assert status_literals(source) == [(2, "running"), (3, "completed"), (3, "idle"), (4, "queued"),
                                       (5, "succeeded")]
