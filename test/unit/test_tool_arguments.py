"""Tool arguments from one pydantic model per tool (modules/tools/base.py): the schema the model is shown, and the
clear error a malformed call gets instead of an exception in the tool loop."""

from __future__ import annotations

import json

import pytest

from modules.tools.agent_tools import AGENT_TOOLS, ASK_USER, CREATE_SUB_AGENT, MAX_OPTIONS
from modules.tools.base import ToolArgumentError, ToolSpec, parse_arguments
from modules.tools.registry import ToolRegistry
from modules.tools.run_command import MAX_COMMAND_CHARS, RUN_COMMAND


def test_the_schema_shown_to_the_model():
    assert RUN_COMMAND.parameters["required"] == ["command"]
    props = RUN_COMMAND.parameters["properties"]
    assert props["command"] == {"type": "string", "description": "The shell command line."}
    assert props["run_in_background"]["type"] == "boolean" and props["run_in_background"]["default"] is False
    assert ASK_USER.parameters["properties"]["options"]["maxItems"] == MAX_OPTIONS
    assert CREATE_SUB_AGENT.parameters["properties"]["run_in_background"]["default"] is True
    for spec in (RUN_COMMAND, *AGENT_TOOLS):
        assert "title" not in json.dumps(spec.definition())
        assert spec.definition()["function"]["parameters"]["type"] == "object"


def test_the_registry_builds_each_schema_once_not_per_model_call(monkeypatch):
    specs = [RUN_COMMAND, *AGENT_TOOLS]
    expected = [spec.definition() for spec in specs]
    registry = ToolRegistry(specs)

    def rebuilt(self: ToolSpec) -> dict:
        raise AssertionError(f"the schema of {self.name} was built again")

    monkeypatch.setattr(ToolSpec, "definition", rebuilt)
    assert registry.definitions() == expected
    assert registry.definitions(["run_command", "no_such_tool"]) == expected[:1]
    assert registry.definitions([]) == []


@pytest.mark.parametrize(("raw", "error"), [
    ('{"command": "ls"', "arguments are not valid JSON"),
    ("[1]", "arguments must be a JSON object"),
    ("{}", "missing required argument(s): command"),
    ('{"command": null}', "missing required argument(s): command"),
    ('{"command": 5}', "argument 'command': Input should be a valid string"),
    ('{"command": "   "}', "argument 'command': must not be empty"),
    ('{"command": "ls", "timeout": "3"}', "argument 'timeout': Input should be a valid number"),
    ('{"command": "ls", "timeout": true}', "argument 'timeout': Input should be a valid number"),
    ('{"command": "ls", "run_in_background": "yes"}', "argument 'run_in_background': Input should be a valid boolean"),
    (json.dumps({"command": "x" * (MAX_COMMAND_CHARS + 1)}), f"longer than {MAX_COMMAND_CHARS} characters"),
])
def test_malformed_run_command_arguments_say_what_is_wrong(raw, error):
    with pytest.raises(ToolArgumentError) as caught:
        parse_arguments(RUN_COMMAND, raw)
    assert error in str(caught.value)


def test_valid_arguments_are_typed_with_defaults_and_nulls_left_out():
    args = parse_arguments(RUN_COMMAND, '{"command": "  ls  ", "timeout": 3, "run_in_background": null, "x": 1}')
    assert (args.command, args.timeout, args.run_in_background) == ("ls", 3.0, False)
    assert parse_arguments(CREATE_SUB_AGENT, '{"role": "InfoAgent", "task": "t"}').run_in_background is True
    for nothing in (None, "", "  "):  # no arguments at all read as {}: the command is missing
        with pytest.raises(ToolArgumentError, match="missing required argument"):
            parse_arguments(RUN_COMMAND, nothing)


@pytest.mark.parametrize("options", [["a", " "], ["o"] * (MAX_OPTIONS + 1), "a,b"])
def test_ask_user_options_are_checked(options):
    with pytest.raises(ToolArgumentError, match="options"):
        parse_arguments(ASK_USER, json.dumps({"question": "q", "options": options}))
