// The timeline reducer, fed events as the task logs deliver them: no server, no DOM.
import { describe, expect, it } from "vitest";
import { historyItems, mergeByTime } from "../src/history";
import { Timeline, type TimelineState } from "../src/chat/timeline";
import type { ServerEvent } from "../src/generated/events";
import type { StoredMessage } from "../src/types";

const MASTER = "m1";
const SUB = "s1";

function make() {
  const state: TimelineState = { items: [], suggestions: null, textMismatches: 0 };
  const names: Record<string, string> = { [MASTER]: "MasterAgent", [SUB]: "Researcher" };
  const tl = new Timeline(state, {
    isMaster: (id) => !id || id === MASTER,
    agentName: (id) => (id ? names[id] : undefined),
    masterName: () => "MasterAgent",
  });
  const ev = (type: string, d: Record<string, unknown>, agent = MASTER, task = "t1") =>
    tl.apply({ type, data: d } as unknown as ServerEvent, agent, task);
  return { state, tl, ev };
}

describe("streaming a reply", () => {
  it("builds one assistant item from its chunks and closes it at text_end", () => {
    const { state, ev } = make();
    ev("ai_message_start", { message_id: "a1" });
    ev("text_chunk", { message_id: "a1", content: "Hel" });
    ev("text_chunk", { message_id: "a1", content: "lo" });
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ kind: "assistant", text: "Hello", done: false, agentName: "MasterAgent" });
    ev("text_end", { message_id: "a1", content: "Hello" });
    expect(state.items[0]).toMatchObject({ done: true });
    expect(state.textMismatches).toBe(0);
  });

  it("counts a text_end that disagrees with the chunks and keeps the final text", () => {
    const { state, ev } = make();
    ev("text_chunk", { message_id: "a1", content: "Helo" });
    ev("text_end", { message_id: "a1", content: "Hello" });
    expect(state.textMismatches).toBe(1);
    expect(state.items[0]).toMatchObject({ text: "Hello", done: true });
  });

  it("ignores chunks after the end, and a replayed start", () => {
    const { state, ev } = make();
    ev("ai_message_start", { message_id: "a1" });
    ev("text_end", { message_id: "a1", content: "Hi" });
    ev("text_chunk", { message_id: "a1", content: "again" });
    ev("ai_message_start", { message_id: "a1" });
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ text: "Hi" });
  });
});

describe("dedupe against stored history", () => {
  const stored: StoredMessage[] = [
    { message_id: "u1", role: "user", content: "hi", created_at: "2026-01-01T00:00:00Z" },
    { message_id: "a1", role: "assistant", content: "hello", created_at: "2026-01-01T00:00:01Z",
      tool_calls: [{ id: "c1", function: { name: "run_command", arguments: "{}" } }] },
    { message_id: "r1", role: "tool", tool_call_id: "c1", content: "ok", created_at: "2026-01-01T00:00:02Z" },
  ];

  it("drops a replayed log of what history shows", () => {
    const { state, tl, ev } = make();
    const h = historyItems(stored, "MasterAgent");
    tl.loadHistory(mergeByTime([h.items]), h.messageIds);
    const before = state.items.length;
    ev("user_message", { message_id: "u1", message: "hi", source: "user" });
    ev("ai_message_start", { message_id: "a1" });
    ev("text_chunk", { message_id: "a1", content: "hel" });
    ev("tool_start", { tool_call_id: "c1", name: "run_command", arguments: "{}" });
    ev("tool_result", { tool_call_id: "c1", name: "run_command", result: "ok" });
    expect(state.items).toHaveLength(before);
    expect(state.items.find((i) => i.kind === "assistant")).toMatchObject({ text: "hello" });
  });
});

describe("user messages", () => {
  it("binds the echo of a sent message to its pending item by client_message_id", () => {
    const { state, tl, ev } = make();
    tl.push({ kind: "user", key: "c:x", clientMessageId: "x", text: "hi", pending: true });
    ev("user_message", { message_id: "u1", message: "hi", source: "user", metadata: { client_message_id: "x" } });
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ messageId: "u1", pending: false });
  });

  it("shows a hidden message nowhere, and a notice as a notice", () => {
    const { state, ev } = make();
    ev("user_message", { message_id: "h", message: "secret", source: "user", visibility: "hidden" });
    ev("user_message", { message_id: "n", message: "command done", source: "system", metadata: { message_type: "notice" } });
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ kind: "notice", text: "command done", messageType: "notice" });
  });

  it("marks a route on the message it names, else on the last unrouted user message", () => {
    const { state, ev } = make();
    ev("user_message", { message_id: "u1", message: "a", source: "user" });
    ev("route", { route: "fast_path", delivery: "queued", target_agent: "Researcher" });
    expect(state.items[0]).toMatchObject({ route: "fast_path", delivery: "queued", targetAgent: "Researcher" });
  });

  it("clears the chips when the user writes", () => {
    const { state, ev } = make();
    ev("text_end", { message_id: "a1", content: "Hello" });
    ev("suggestions", { message_id: "a1", questions: ["More?", "More?", " "] });
    expect(state.suggestions).toEqual({ messageId: "a1", questions: ["More?"], taskId: "t1" });
    ev("user_message", { message_id: "u2", message: "next", source: "user" });
    expect(state.suggestions).toBeNull();
  });

  it("drops chips of an older reply", () => {
    const { state, ev } = make();
    ev("text_end", { message_id: "a1", content: "Hello" });
    ev("user_message", { message_id: "u2", message: "next", source: "user" });
    ev("suggestions", { message_id: "a1", questions: ["late"] });
    expect(state.suggestions).toBeNull();
  });
});

describe("tools and questions", () => {
  it("fills a tool card's result, and makes a card of a result without its start", () => {
    const { state, ev } = make();
    ev("tool_start", { tool_call_id: "c1", name: "run_command", arguments: "{\"command\":\"ls\"}" });
    ev("tool_result", { tool_call_id: "c1", name: "run_command", result: "a b" });
    ev("tool_result", { tool_call_id: "c2", name: "read_file", result: "x" });
    expect(state.items.map((i) => i.kind)).toEqual(["tool", "tool"]);
    expect(state.items[0]).toMatchObject({ result: "a b" });
  });

  it("makes one question card of ask_user, answered by its tool result", () => {
    const { state, ev } = make();
    ev("tool_start", { tool_call_id: "c1", name: "ask_user", arguments: "{}" });
    ev("ask_user", { question_id: "q1", question: "Which?", options: ["a", "b", "a"] });
    ev("ask_user", { question_id: "q1", question: "Which?" });
    expect(state.items).toHaveLength(1);
    expect(state.items[0]).toMatchObject({ kind: "ask", questionId: "q1", toolCallId: "c1", options: ["a", "b"] });
    ev("tool_result", { tool_call_id: "c1", name: "ask_user", result: "{\"answer\":\"b\"}" });
    expect(state.items[0]).toMatchObject({ answer: "b" });
  });
});

describe("the end of a task", () => {
  it("closes open replies and shows Stopped once, marking the reply cut off", () => {
    const { state, tl, ev } = make();
    ev("text_chunk", { message_id: "a1", content: "half" });
    tl.finish("task_stopped", {}, "t1", MASTER);
    tl.finish("task_stopped", {}, "t1", MASTER);
    expect(state.items).toHaveLength(2);
    expect(state.items[0]).toMatchObject({ done: true, interrupted: true });
    expect(state.items[1]).toMatchObject({ kind: "status", tone: "stopped", text: "Stopped." });
  });

  it("says how many queued messages a stop lets start", () => {
    const { state, tl } = make();
    tl.finish("task_stopped", {}, "t1", MASTER, 2);
    expect(state.items[0]).toMatchObject({ text: "Stopped. 2 queued messages start now." });
  });

  it("closes the open tool cards and questions of a task that failed", () => {
    const { state, tl, ev } = make();
    ev("tool_start", { tool_call_id: "c1", name: "run_command", arguments: "{}" });
    ev("tool_start", { tool_call_id: "c2", name: "ask_user", arguments: "{}" });
    ev("ask_user", { question_id: "q1", question: "Which?" });
    tl.finish("error", { code: "interrupted", message: "the server process running this task stopped" }, "t1", MASTER);
    expect(JSON.parse((state.items[0] as { result: string }).result)).toMatchObject({ success: false });
    expect(state.items[1]).toMatchObject({ answer: "(no answer: the server process running this task stopped)" });
  });

  it("names the sub-agent whose task failed", () => {
    const { state, tl } = make();
    tl.finish("error", { message: "boom", code: "model_error" }, "t2", SUB);
    expect(state.items[0]).toMatchObject({ tone: "error", text: "Researcher: boom (model_error)" });
  });
});
