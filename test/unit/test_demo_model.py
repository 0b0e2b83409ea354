"""The offline demo model: command detection, tool-result summaries, determinism, stopping."""

from __future__ import annotations

import json

import pytest

from modules.llm import DemoChatModel, ModelReply, OpenAIChatModel, build_chat_model

pytestmark = pytest.mark.timeout(30)

TOOLS = [
    {"type": "function", "function": {"name": "ask_user", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}},
]


def ask(messages, tools=TOOLS, **kwargs) -> tuple[ModelReply, list[str]]:
    chunks: list[str] = []
    reply = DemoChatModel(chunk_delay_s=0).stream_chat(messages=messages, tools=tools, on_text=chunks.append, **kwargs)
    return reply, chunks


def user(content) -> list[dict]:
    return [{"role": "system", "content": "You are MasterAgent."}, {"role": "user", "content": content}]


@pytest.mark.parametrize(
    ("said", "command"),
    [
        ("run `ls -la`", "ls -la"),
        ("Could you please execute `uname -a` for me?", "uname -a"),
        ("请运行 `echo hi`", "echo hi"),
        ("帮我执行 `df -h` 看看", "df -h"),
        ("跑一下 `pwd`", "pwd"),
        ("run echo hello world", "echo hello world"),
        ("Run: date", "date"),
        ("运行 ls -la", "ls -la"),
        ("执行 pwd。", "pwd"),
        ("请执行：whoami", "whoami"),
    ],
)
def test_recognises_command_requests(said, command):
    reply, chunks = ask(user(said))

    [call] = reply.tool_calls
    assert call.name == "run_command"
    assert json.loads(call.arguments) == {"command": command}
    assert call.id == "call_demo_2"  # numbered by conversation length
    assert reply.finish_reason == "tool_calls"
    assert reply.content == "".join(chunks) == f"Running `{command}`..."


@pytest.mark.parametrize("said", ["hello there", "what does `ls` do?", "I like to run"])
def test_ordinary_messages_get_the_demo_answer(said):
    reply, chunks = ask(user(said))

    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert "offline demo model" in reply.content
    assert "OPENAI_API_KEY" in reply.content
    assert f'"{said}"' in reply.content
    assert "run `ls -la`" in reply.content
    assert "".join(chunks) == reply.content


@pytest.mark.parametrize("tools", [None, [], [TOOLS[0]]])
def test_no_tool_call_when_run_command_is_not_offered(tools):
    reply, _ = ask(user("run `ls -la`"), tools=tools)

    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert "`ls -la`" in reply.content
    assert "not available" in reply.content


def command_result(content, command: str = "ls -la") -> list[dict]:
    call = {
        "id": "call_demo_2",
        "type": "function",
        "function": {"name": "run_command", "arguments": json.dumps({"command": command})},
    }
    return [
        *user(f"run `{command}`"),
        {"role": "assistant", "content": f"Running `{command}`...", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_demo_2", "content": content},
    ]


def test_summarises_a_command_result():
    result = {"success": True, "exit_code": 0, "output": "file_a.txt\nfile_b.txt\n", "duration_s": 0.01}

    reply, chunks = ask(command_result(json.dumps(result)))

    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert "`ls -la`" in reply.content
    assert "exit code **0**" in reply.content
    assert "file_a.txt\nfile_b.txt" in reply.content
    assert "".join(chunks) == reply.content


def test_summarises_a_failed_command_and_keeps_the_markdown_fence_intact():
    result = {"success": False, "exit_code": 2, "output": "```\nls: cannot access 'nope'", "error": "exit status 2"}

    reply, _ = ask(command_result(json.dumps(result), command="ls nope"))

    assert "exit code **2**" in reply.content
    assert "exit status 2" in reply.content
    assert "````\n```\nls: cannot access 'nope'\n````" in reply.content


@pytest.mark.parametrize(("content", "shown"), [
    ("plain text, not JSON", "plain text, not JSON"), (None, "(nothing)"), (42, "42"),
    ([{"type": "text", "text": "parts"}], "parts"), ("[1, 2]", "[1, 2]"),
])
def test_tool_result_that_is_not_a_json_object_is_shown_as_it_came(content, shown):
    reply, chunks = ask(command_result(content))

    assert reply.finish_reason == "stop"
    assert reply.tool_calls == []
    assert reply.content == f"`run_command` returned:\n\n```\n{shown}\n```\n"
    assert "".join(chunks) == reply.content


def test_long_output_is_clipped():
    reply, _ = ask(command_result(json.dumps({"success": True, "exit_code": 0, "output": "x" * 100_000})))

    assert len(reply.content) < 2000
    assert "more characters" in reply.content


def test_output_is_deterministic():
    for messages in (user("run `ls -la`"), user("hello"), command_result('{"exit_code": 0, "output": "ok"}')):
        assert ask(messages) == ask(messages)


def test_streams_a_few_words_at_a_time():
    reply, chunks = ask(user("tell me something long " * 5))

    assert len(chunks) > 10
    assert all(0 < len(c) <= 3 * 13 for c in chunks)
    assert "".join(chunks) == reply.content


def test_should_stop_ends_the_stream():
    chunks: list[str] = []

    reply = DemoChatModel(chunk_delay_s=0).stream_chat(
        messages=user("hello"), on_text=chunks.append, should_stop=lambda: len(chunks) >= 3
    )

    assert reply.finish_reason == "stopped"
    assert len(chunks) == 3
    assert reply.content == "".join(chunks)


def test_should_stop_drops_the_tool_call():
    reply = DemoChatModel(chunk_delay_s=0).stream_chat(messages=user("run `ls`"), tools=TOOLS, should_stop=lambda: True)

    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("", [], "stopped")


NOTHING_TO_ANSWER = "I could not find a message to answer."


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], NOTHING_TO_ANSWER),
        (None, NOTHING_TO_ANSWER),
        ([None, 5, "x"], NOTHING_TO_ANSWER),
        ([{"role": "user"}], NOTHING_TO_ANSWER),
        ([{"role": "user", "content": None}], NOTHING_TO_ANSWER),
        ([{"role": "user", "content": {"odd": True}}], 'You said: "{"odd": true}".'),
        ([{"role": "user", "content": [{"type": "text", "text": "run `ls`"}, "junk", None]}], "Running `ls`..."),
        ([{"role": "assistant", "content": "hi", "tool_calls": "nonsense"}], NOTHING_TO_ANSWER),
        ([{"role": "tool", "tool_call_id": None, "content": None}], "The tool returned:"),
        (
            [
                {"role": "assistant", "tool_calls": [None, {"id": "c", "function": "x"}]},
                {"role": "tool", "tool_call_id": "c"},
            ],
            "The tool returned:",
        ),
    ],
)
def test_odd_input_gets_the_answer_its_readable_part_asks_for(messages, expected):
    reply, chunks = ask(messages, tools=[None, "x", {"function": None}, *TOOLS])

    assert isinstance(reply, ModelReply)
    assert expected in reply.content
    if expected == "Running `ls`...":
        assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("run_command", {"command": "ls"})]
    else:
        assert reply.tool_calls == [] and reply.finish_reason == "stop"
    assert "".join(chunks) == reply.content


def test_label_and_factory():
    assert DemoChatModel().label == "demo"
    assert isinstance(build_chat_model(api_key=None, base_url=None, default_model="m"), DemoChatModel)
    assert isinstance(build_chat_model(api_key="", base_url="http://x/v1", default_model="m"), DemoChatModel)
    real = build_chat_model(api_key="sk-test", base_url="http://127.0.0.1:9/v1", default_model="m")
    assert isinstance(real, OpenAIChatModel)
    assert real.label == "http://127.0.0.1:9/v1"


def test_the_demo_answers_a_context_summary_request_keeping_the_users_lines():
    from modules.context.compaction import summary_request

    messages = summary_request("user: always answer in French", "user: my name is Ana\nassistant: Hello Ana", 100)
    reply = DemoChatModel(chunk_delay_s=0).stream_chat(messages=messages)

    assert reply.content.splitlines() == ["user: always answer in French", "user: my name is Ana"]
    assert reply.tool_calls == []
