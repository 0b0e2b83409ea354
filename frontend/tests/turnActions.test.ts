import { describe, expect, it } from "vitest";
import { lastTurnActions } from "../src/turnActions";
import type { TimelineItem } from "../src/types";

const tool = (name: string, args: object): TimelineItem =>
  ({ kind: "tool", key: name, toolCallId: name, name, arguments: JSON.stringify(args) }) as TimelineItem;
const user = { kind: "user", key: "u", text: "hi" } as TimelineItem;
const reply = { kind: "assistant", key: "a", messageId: "a", text: "ok", done: true } as TimelineItem;

describe("what regenerating the last turn does again", () => {
  it("names the last turn's commands and sub-agents, not an earlier turn's, nor questions to the user", () => {
    const items = [user, tool("run_command", { command: "rm -rf build" }), reply, user,
      tool("run_command", { command: "make test" }), tool("ask_user", { question: "ok?" }),
      tool("create_sub_agent", { role: "CoderAgent", task: "fix the parser" }), reply];
    expect(lastTurnActions(items)).toEqual([
      { kind: "command", text: "make test" },
      { kind: "sub-agent", text: "CoderAgent: fix the parser" },
    ]);
  });

  it("a turn of text only does nothing again", () => {
    expect(lastTurnActions([user, reply])).toEqual([]);
  });
});
