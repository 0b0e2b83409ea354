"""Events are built only from the catalogue (modules/event_catalogue.py): no event name is written as a
string anywhere else in the repository, its tests, benchmarks and tools included (docs/ARCHITECTURE.md,
"Events, statuses and meta"); they write `TextChunkEvent.TYPE`.

A name that is also an ordinary word of the code (`error` is a tool result's key, `route` a message's meta
key, `ask_user` a tool, `suggestions` a usage purpose, `pending_count` an agent's field) is refused only where
it names an event: an argument of an emit or of a socket client's `on`, the head of an `(event type, data)`
pair, the item before the data of an `(index, type, data)` row (neither among a tool call's arguments), a
`type` key's value, a comparison with a field named `type`, `event` or `event_type` (test/literal_scan.py),
a helper's parameter of such a name, an item of a collection that holds another event name. Every other
event name is refused in any string but a docstring.
"""

from __future__ import annotations

import ast

from modules.event_catalogue import EVENTS, ErrorEvent, RouteEvent, TaskCompleteEvent, TextChunkEvent, ToolStartEvent
from test.literal_scan import ROOT, Fields, called, docstrings, python_files, text, unique

CATALOGUE = ROOT / "modules" / "event_catalogue.py"
AMBIGUOUS = {"error", "route", "ask_user", "suggestions", "pending_count"}
EMITTERS = {"emit", "emit_many", "append", "append_many", "append_chunk", "append_in", "insert_events", "payloads",
            "on"}
NAMES = Fields(values=frozenset(EVENTS), words=frozenset({"type", "types", "event", "events"}))


def _event_positions(tree: ast.AST, parameters: dict[str, set[int]]) -> set[int]:
    """The ids of the string constants that stand where an event's type goes."""
    found = {id(c) for c in NAMES.placed(tree, parameters)}
    tool_args = _tool_calls(tree)

    def pair_heads(node: ast.AST) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            if node.elts and text(node.elts[0]) is not None:
                found.add(id(node.elts[0]))
            for elt in node.elts:
                pair_heads(elt)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = called(node.func) or ""
            if name in EMITTERS:
                found.update(id(arg) for arg in node.args if text(arg) is not None)
                for arg in node.args:
                    pair_heads(arg)
            found.update(id(k.value) for k in node.keywords if k.arg == "type" and text(k.value) is not None)
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and id(node) not in tool_args and _event_row(node.elts):
            found.add(id(node.elts[0] if text(node.elts[0]) is not None else node.elts[1]))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = [elt for elt in node.elts if text(elt) in EVENTS]
            if any(text(elt) not in AMBIGUOUS for elt in names):
                found.update(id(elt) for elt in names)
    return found


def _event_row(elts: list[ast.expr]) -> bool:
    """An `(event type, data)` pair (`(event type, data, room)` as a transport sends it) or an `(index, event
    type, data)` row."""
    if len(elts) >= 2 and text(elts[0]) is not None and isinstance(elts[1], (ast.Dict, ast.Call)):
        return len(elts) == 2 or isinstance(elts[1], ast.Dict)
    return (len(elts) == 3 and isinstance(elts[0], ast.Constant) and isinstance(elts[0].value, int)
            and text(elts[1]) is not None and isinstance(elts[2], ast.Dict))


def _tool_calls(tree: ast.AST) -> set[int]:
    """The ids of the tuples that write a tool call (`tool_calls(("ask_user", {...}))`, `calls == [...]`):
    there `ask_user` names the tool."""
    def about_calls(node: ast.AST) -> bool:
        words = [called(n) or "" for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))]
        words += [n.arg or "" for n in ast.walk(node) if isinstance(n, ast.keyword)]
        return any("tool" in w or "call" in w for w in words)

    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Compare)) and about_calls(
                node.func if isinstance(node, ast.Call) else ast.Tuple(elts=[node.left, *node.comparators])):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Tuple))
        elif isinstance(node, ast.keyword) and about_calls(node):
            inside.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Tuple))
    return inside


def event_name_nodes(tree: ast.AST, parameters: dict[str, set[int]]) -> list[ast.Constant]:
    """Each event name written as a string where the catalogue's constant belongs."""
    skipped, positions = docstrings(tree), _event_positions(tree, parameters)
    return unique(node for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and text(node) in EVENTS and id(node) not in skipped
                  and (node.value not in AMBIGUOUS or id(node) in positions))


def literal_event_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of each event name written as a string where the catalogue's constant belongs."""
    tree = ast.parse(source)
    return [(c.lineno, c.value) for c in event_name_nodes(tree, NAMES.parameters([tree]))]


def test_no_event_name_is_written_outside_the_catalogue():
    trees = {path: ast.parse(path.read_text()) for path in python_files() if path != CATALOGUE}
    parameters = NAMES.parameters(trees.values())
    offenders = [f"{path.relative_to(ROOT)}:{c.lineno}: {c.value!r}"
                 for path, tree in trees.items() for c in event_name_nodes(tree, parameters)]
    assert offenders == [], "build and compare events with modules/event_catalogue.py:\n" + "\n".join(offenders)


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
assert task["events"][-1]["type"] == "error"
client.on("route", routes.append)
log = [(1, "ask_user", {"question_id": "q"})]
if event in ("task_complete", "error"): pass
def wait_event(task_id, event_type): pass
wait_event(task_id, "suggestions")
llm.script(tool_calls(("ask_user", {"question": "Which?"})))
'''
    assert literal_event_names(source) == [
        (3, TextChunkEvent.TYPE), (4, "error"), (5, "route"), (6, "suggestions"), (7, ToolStartEvent.TYPE), (11,
                                                                                                             "error"),
        (12, "route"), (13, "ask_user"), (14, TaskCompleteEvent.TYPE), (14, "error"), (16, "suggestions")]


def test_the_scan_passes_the_constants_and_fails_on_a_planted_name():
    """The guard can fail: the same checks with the catalogue's constants pass, one name written out does not."""
    constants = (f'assert task["events"][-1]["type"] == {ErrorEvent.__name__}.TYPE\n'
                 f'client.on({RouteEvent.__name__}.TYPE, routes.append)\n'
                 f'chunks = [e for e in events if e["type"] == {TextChunkEvent.__name__}.TYPE]\n')
    assert literal_event_names(constants) == []
    planted = constants + f'chunks = [e for e in events if e["type"] == "{TextChunkEvent.TYPE}"]\n'
    assert literal_event_names(planted) == [(4, TextChunkEvent.TYPE)]
