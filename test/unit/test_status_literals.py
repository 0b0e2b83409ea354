"""Statuses are written once, in modules/statuses.py: the code, the tests, the benchmarks and the tools
compare, assign and pass them by their enum members, never as strings (docs/ARCHITECTURE.md, "Events,
statuses and meta").

The scan (test/literal_scan.py) looks where a status stands: compared with, assigned to, passed as or keyed
by a field named `status`, `state`, `previous`, `delivery`, `route`, `source` or `visibility` (or ending in
one: `agent_state`, `deliveries`, `data-state`; or `states_of`), including a helper's parameter of such a
name; elsewhere the same words mean other things (a model's `finish_reason` "stopped", a usage record's
"failed", a message's role "user").
"""

from __future__ import annotations

import ast

from modules.statuses import STATUS_SETS, AgentState, CommandStatus, Route, TaskStatus
from test.literal_scan import ROOT, Fields, python_files, unique

DEFINITION = ROOT / "modules" / "statuses.py"
STATUSES = Fields(values=frozenset(member.value for enum in STATUS_SETS.values() for member in enum),
                  words=frozenset({"status", "state", "previous", "delivery", "route", "source", "visibility",
                                   "statuses", "states", "deliveries", "routes", "sources"}),
                  other_attributes=frozenset({"data-status"}))  # a tool card's own: running, done, failed, ...


def status_nodes(tree: ast.AST, parameters: dict[str, set[int]]) -> list[ast.Constant]:
    """Each status written as a string where a status goes."""
    return unique(STATUSES.placed(tree, parameters))


def status_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of each status written as a string where a status goes."""
    tree = ast.parse(source)
    return [(c.lineno, c.value) for c in status_nodes(tree, STATUSES.parameters([tree]))]


def test_no_status_is_written_as_a_string_outside_its_definition():
    trees = {path: ast.parse(path.read_text()) for path in python_files() if path != DEFINITION}
    parameters = STATUSES.parameters(trees.values())
    offenders = [f"{path.relative_to(ROOT)}:{c.lineno}: {c.value!r}"
                 for path, tree in trees.items() for c in status_nodes(tree, parameters)]
    assert offenders == [], "use the enums of modules/statuses.py:\n" + "\n".join(offenders)


def test_the_scan_finds_each_place_a_status_stands():
    source = '''
if task.status == "running": pass
if agent.state in ("idle", "completed"): pass
row.status = "queued"
set_status(db, status="succeeded")
if reply.finish_reason == "stopped": pass
record = {"status": "ok", "role": "user"}
assert server.get(url).json()["status"] == "routing"
assert answer.get("delivery") != "resolved"
assert (sent["route"], sent["target_agent"]) == ("fast_path", "InfoAgent_1")
assert states_of(turn) == ["running", "waiting"]
assert [m.get("source") for m in msgs] == ["sub_agent"]
ack = {"success": True, "status": "routing"}
def agent_is(server, cid, name, state): pass
wait_until(lambda: agent_is(server, cid, "InfoAgent_1", "waiting"))
expect(row).to_have_attribute("data-state", "running")
expect(card).to_have_attribute("data-status", "failed")
expect(line).to_have_attribute("data-tone", "stopped")
store(source_display_name="user")
task.status, task.owner = "failed", "the-other-process"
'''
    assert status_literals(source) == [
        (2, "running"), (3, "idle"), (3, "completed"), (4, "queued"), (5, "succeeded"), (8, "routing"),
        (9, "resolved"), (10, "fast_path"), (11, "running"), (11, "waiting"), (12, "sub_agent"), (13, "routing"),
        (15, "waiting"), (16, "running"), (20, "failed")]


def test_the_scan_passes_the_members_and_fails_on_a_planted_literal():
    """The guard can fail: the same checks with the members pass, one status written as a string does not."""
    members = (f'assert task["status"] == TaskStatus.{TaskStatus.SUCCEEDED.name}\n'
               f'assert agent.state in (AgentState.{AgentState.IDLE.name},)\n'
               f'assert sent["route"] == Route.{Route.HIL.name}\n'
               f'row = {{"status": CommandStatus.{CommandStatus.LOST.name}}}\n')
    assert status_literals(members) == []
    planted = members + f'assert task["status"] == "{TaskStatus.FAILED.value}"\n'
    assert status_literals(planted) == [(5, TaskStatus.FAILED.value)]
