// The timeline reducer for the model's thinking, a reply cut at the output limit, and summarised history.
import { describe, expect, it } from "vitest";
import { historyItems } from "../src/history";
import { summaryLines } from "../src/chat/load";
import { Timeline, type TimelineState } from "../src/chat/timeline";
import type { ServerEvent } from "../src/generated/events";
import type { StoredMessage } from "../src/types";

const MASTER = "m1";

function make() {
  const state: TimelineState = { items: [], suggestions: null, textMismatches: 0 };
  const tl = new Timeline(state, {
    isMaster: (id) => !id || id === MASTER,
    agentName: (id) => (id === MASTER ? "MasterAgent" : "Coder_1"),
    masterName: () => "MasterAgent",
  });
  const ev = (type: string, d: Record<string, unknown>, agent = MASTER) =>
    tl.apply({ type, data: d } as unknown as ServerEvent, agent, "t1");
  return { state, tl, ev };
}

describe("the model's thinking", () => {
  it("streams into the reply's thinking, never into its text, and text_end settles it", () => {
    const { state, ev } = make();
    ev("ai_message_start", { message_id: "a1" });
    ev("reasoning_chunk", { message_id: "a1", content: "I th" });
    ev("reasoning_chunk", { message_id: "a1", content: "ink." });
    ev("text_chunk", { message_id: "a1", content: "Yes" });
    expect(state.items[0]).toMatchObject({ reasoning: "I think.", text: "Yes" });
    ev("text_end", { message_id: "a1", content: "Yes", reasoning: "I think.", truncated: true });
    expect(state.items[0]).toMatchObject({ reasoning: "I think.", text: "Yes", truncated: true, done: true });
    expect(state.textMismatches).toBe(0);
  });

  it("comes back from the stored history with the truncated mark", () => {
    const stored: StoredMessage[] = [{ message_id: "a1", role: "assistant", content: "Yes",
      metadata: { reasoning: "I think.", truncated: true } }];
    expect(historyItems(stored, "MasterAgent").items[0]).toMatchObject({ reasoning: "I think.", truncated: true });
  });

  it("marks a reply the provider's content filter stopped, an empty one live, live and from history", () => {
    const { state, ev } = make();
    ev("ai_message_start", { message_id: "a1" });
    ev("text_end", { message_id: "a1", content: "", filtered: true });
    expect(state.items[0]).toMatchObject({ text: "", filtered: true, done: true });
    const stored: StoredMessage[] = [{ message_id: "a2", role: "assistant", content: "Sure, the",
      metadata: { filtered: true } }];
    expect(historyItems(stored, "MasterAgent").items[0]).toMatchObject({ text: "Sure, the", filtered: true });
  });
});

describe("a reply's marks", () => {
  it("are the same from a text_end with no item before it as from the stored history", () => {
    const marks = { partial: true, truncated: true, filtered: true, reasoning: "Hm." };
    const { state, ev } = make();
    ev("text_end", { message_id: "a1", content: "Half", ...marks });
    const stored: StoredMessage[] = [{ message_id: "a1", role: "assistant", content: "Half", metadata: marks }];
    const want = { text: "Half", interrupted: true, truncated: true, filtered: true, reasoning: "Hm.", done: true };
    expect(state.items[0]).toMatchObject(want);
    expect(historyItems(stored, "MasterAgent").items[0]).toMatchObject(want);
  });
});

describe("a summarised history", () => {
  it("shows one quiet line per summary of the master, live or stored, and none for a sub-agent's", () => {
    const { state, tl, ev } = make();
    tl.loadHistory(summaryLines([{ summary_id: "s1", summary: "- rule", through_seq: 9, summarised_messages: 10,
      created_at: "2026-12-02T01:00:00Z" }], MASTER), []);
    ev("context_compacted", { summary_id: "s1", summary: "- rule", summarised_messages: 10 });
    ev("context_compacted", { summary_id: "s2", summary: "- rule\n- more", summarised_messages: 4 });
    ev("context_compacted", { summary_id: "s3", summary: "- its own", summarised_messages: 3 }, "sub1");
    expect(state.items.map((i) => i.kind === "compacted" && [i.summaryId, i.summarisedMessages])).toEqual([
      ["s1", 10], ["s2", 4]]);
  });
});
