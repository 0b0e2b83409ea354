import { describe, expect, it, vi } from "vitest";
import type { StoredMessage, TaskSummary } from "../src/types";

const T0 = Date.parse("2026-01-01T00:00:00Z");
const iso = (i: number) => new Date(T0 + i * 1000).toISOString();
/** 300 turns of the master's, a message a second. */
const messages: StoredMessage[] = Array.from({ length: 600 }, (_, i) => ({ message_id: `m${i}`,
  role: i % 2 ? "assistant" : "user", content: `${i}`, tool_calls: null, tool_call_id: null, name: null, metadata: {},
  agent_id: "master", created_at: iso(i) }));
let tasks: TaskSummary[] = [];
const asked: string[] = [];

vi.mock("../src/api", () => ({
  api: (path: string) => {
    asked.push(path);
    const url = new URL(path, "http://ui");
    if (url.pathname.endsWith("/agents")) return Promise.resolve({ data: [] });
    if (url.pathname === "/api/tasks") return Promise.resolve({ data: tasks });
    const before = url.searchParams.get("before");
    const limit = Number(url.searchParams.get("limit"));
    const end = before ? messages.findIndex((m) => m.message_id === before) : messages.length;
    return Promise.resolve({ success: true, agent_id: "master", display_name: "Master",
      data: messages.slice(Math.max(0, end - limit), end) });
  },
}));

const { fetchConversation } = await import("../src/chat/load");

describe("opening a conversation", () => {
  it("reads the master's latest page, not the whole history", async () => {
    tasks = [];
    asked.length = 0;
    const { history } = await fetchConversation("c1");
    expect(asked.filter((p) => p.includes("/messages"))).toEqual(["/api/conversations/c1/messages?limit=200"]);
    expect(history.data.map((m) => m.message_id)).toEqual(messages.slice(400).map((m) => m.message_id));
    expect(history.before).toBe("m400");
  });

  it("reads back to where a task of the master still running began: its replay finds its turn loaded", async () => {
    tasks = [{ task_id: "t1", status: "running", conversation_id: "c1", agent_id: "master", task_type: "chat",
      created_at: iso(150.5), started_at: null, finished_at: null, error: null }];
    const { history } = await fetchConversation("c1");
    const start = messages.findIndex((m) => m.message_id === history.data[0]!.message_id);
    expect(start).toBeLessThanOrEqual(150); // the pages read go back to the task's turn, none is dropped
    expect(history.data.map((m) => m.message_id)).toEqual(messages.slice(start).map((m) => m.message_id));
    expect(history.before).toBe(`m${start}`);
  });
});
