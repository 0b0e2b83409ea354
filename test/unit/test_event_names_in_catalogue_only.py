"""Events are built only from the catalogue (modules/event_catalogue.py): no event name is written as a
string anywhere else in server/ or modules/ (docs/ARCHITECTURE.md, "Events, statuses and meta").

A name that is also an ordinary word of the code (`error` is a tool result's key, `route` a message's meta
key, `ask_user` a tool, `suggestions` a usage purpose) is refused only where it names an event: the first
argument of an emit, the first item of an `(event type, data)` pair, a comparison with a `.type`, a `type=`
keyword. Every other event name is refused in any string but a docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

from modules.event_catalogue import EVENTS

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "modules" / "event_catalogue.py"
AMBIGUOUS = {"error", "route", "ask_user", "suggestions"}
EMITTERS = {"emit", "emit_many", "append", "append_many", "append_chunk", "append_in", "insert_events", "payloads"}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            ids.add(id(node.value))
    return ids


def _name(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _event_positions(tree: ast.AST) -> set[int]:
    """The string constants that stand where an event's type goes."""
    found: set[int] = set()

    def pair_heads(node: ast.AST) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            if node.elts and _name(node.elts[0]) is not None:
                found.add(id(node.elts[0]))
            for elt in node.elts:
                pair_heads(elt)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in EMITTERS:
                for arg in node.args:
                    if _name(arg) is not None:
                        found.add(id(arg))
                    pair_heads(arg)
            found.update(id(k.value) for k in node.keywords if k.arg == "type" and _name(k.value) is not None)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[1], (ast.Dict, ast.Call)):
            if _name(node.elts[0]) is not None:
                found.add(id(node.elts[0]))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Attribute) and side.attr == "type" for side in sides):
                found.update(id(side) for side in sides if _name(side) is not None)
    return found


def literal_event_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of each event name written as a string where the catalogue's constant belongs."""
    tree = ast.parse(source)
    docstrings, positions = _docstrings(tree), _event_positions(tree)
    hits = []
    for node in ast.walk(tree):
        name = _name(node)
        if name not in EVENTS or id(node) in docstrings:
            continue
        if name not in AMBIGUOUS or id(node) in positions:
            hits.append((getattr(node, "lineno", 0), name))
    return sorted(hits)


def test_no_event_name_is_written_outside_the_catalogue():
    offenders = []
    for path in sorted([*(ROOT / "server").rglob("*.py"), *(ROOT / "modules").rglob("*.py")]):
        if path == CATALOGUE:
            continue
        offenders += [f"{path.relative_to(ROOT)}:{line}: {name!r}"
                      for line, name in literal_event_names(path.read_text())]
    assert offenders == [], "build events from modules/event_catalogue.py:\n" + "\n".join(offenders)


def test_the_scan_finds_each_way_of_writing_an_event_by_hand():
    source = '''
"""A docstring may name text_chunk and "text_chunk"."""
sender.emit("text_chunk", {"content": "x"})
events.append(("error", {"code": "x"}))
rt.transport.emit("route", {}, room)
rows = select(TaskEvent.data).where(TaskEvent.type == "suggestions")
kind = "tool_start"
result = {"success": False, "error": "no"}
meta = {"route": "hil"}
TOOLS = ("ask_user",)
'''
    assert literal_event_names(source) == [(3, "text_chunk"), (4, "error"), (5, "route"), (6, "suggestions"),
                                           (7, "tool_start")]
