import { describe, expect, it } from "vitest";
import { historyItems, mergeByTime } from "../src/history";
import { withEarlier } from "../src/chat/load";
import { Timeline, type TimelineState } from "../src/chat/timeline";
import type { ServerEvent } from "../src/generated/events";
import { blockStart, PAGE_SIZE, readBlock, type FetchPage, type HistoryBlock } from "../src/chat/pages";
import { versionedView } from "../src/chat/versions";
import type { StoredMessage, TimelineItem } from "../src/types";

const T0 = Date.parse("2026-01-01T00:00:00Z");

/** A master's stored history, written as a conversation leaves it: one message a second. */
class History {
  messages: StoredMessage[] = [];
  private n = 0;

  add(role: string, extra: Partial<StoredMessage> = {}): string {
    const id = `m${this.n}`;
    this.messages.push({ message_id: id, role, content: `${role} ${this.n}`, tool_calls: null, tool_call_id: null,
      name: null, metadata: {}, agent_id: "master", created_at: new Date(T0 + this.n * 1000).toISOString(), ...extra });
    this.n++;
    return id;
  }

  turn(tools = 0): string {
    const id = this.add("user");
    for (let t = 0; t < tools; t++) this.toolCall(`${id}-c${t}`);
    this.add("assistant");
    return id;
  }

  toolCall(callId: string, name = "run_command"): void {
    this.add("assistant", { content: "", tool_calls: [{ id: callId, type: "function", function: { name, arguments: "{}" } }] });
    this.add("tool", { tool_call_id: callId, content: JSON.stringify({ success: true, answer: "yes", question_id: `q-${callId}` }) });
  }

  edit(of: string): string {
    const id = this.add("user", { metadata: { version_of: of, edit_of: of } });
    this.add("assistant");
    return id;
  }

  regenerate(of: string): void {
    this.add("user", { metadata: { visibility: "hidden", regenerate_of: of } });
    this.add("assistant");
  }
}

/** `GET .../messages?limit=&before=` over a stored history, as docs/API.md has it; `asked` records each request. */
function server(messages: StoredMessage[], asked: (string | null)[] = []): FetchPage {
  return async (before, limit) => {
    asked.push(before);
    const end = before === null ? messages.length : messages.findIndex((m) => m.message_id === before);
    if (end < 0) throw new Error("not_found");
    return { success: true, agent_id: "master", display_name: "Master", data: messages.slice(Math.max(0, end - limit), end) };
  };
}

/** Every block from the latest back to the start. */
async function allBlocks(messages: StoredMessage[], asked: (string | null)[] = []): Promise<HistoryBlock[]> {
  const fetch = server(messages, asked);
  const blocks = [await readBlock(fetch, null)];
  while (blocks[0]!.before) blocks.unshift(await readBlock(fetch, blocks[0]!.before));
  return blocks;
}

/** The timeline built as the UI builds it a block at a time, each in front of the later ones. */
function pagedItems(blocks: HistoryBlock[], side: TimelineItem[] = []): TimelineItem[] {
  let items: TimelineItem[] = [];
  let waiting = side;
  for (const block of [...blocks].reverse()) {
    const merged = withEarlier(block, historyItems(block.data, "Master"), waiting);
    items = [...merged.items, ...items];
    waiting = merged.side;
  }
  return items;
}

const keys = (items: TimelineItem[]) => items.map((it) => it.key);
const view = (items: TimelineItem[], choice: Record<string, number> = {}) =>
  versionedView(items, choice).map((s) => s.item.key + (s.version ? ` ${s.version.index + 1}/${s.version.count}` : ""));

/** Hundreds of turns with tool calls, a question answered, an edit of a turn far back, regenerates, and a turn
 * longer than a page. */
function longHistory(): { h: History; early: string; regenerated: string } {
  const h = new History();
  const early = h.turn(1);
  for (let i = 0; i < 150; i++) h.turn(i % 3);
  h.add("user", { metadata: { source: "sub_agent", visibility: "compact" } });
  h.toolCall("ask-1", "ask_user");
  h.add("assistant");
  for (let i = 0; i < 60; i++) h.turn(1);
  h.edit(early);
  const regenerated = h.turn(2);
  h.regenerate(regenerated);
  h.turn(PAGE_SIZE); // a turn of 401 messages
  for (let i = 0; i < 40; i++) h.turn(i % 2);
  return { h, early, regenerated };
}

describe("the master's history read in blocks", () => {
  it("a block starts at a user's turn, with every tool result's call and every version's first turn in it", () => {
    const h = new History();
    h.turn(1);
    const root = h.turn(0);
    h.turn(2);
    h.edit(root);
    h.turn(0);
    const ms = h.messages;
    const at = blockStart(ms);
    expect(at).toBe(0);
    expect(blockStart(ms.slice(1))).toBe(ms.indexOf(ms.find((m) => m.message_id === root)!) - 1);
    const afterRoot = ms.slice(ms.findIndex((m) => m.message_id === root) + 1);
    const edit = afterRoot.findIndex((m) => m.metadata.version_of === root);
    expect(blockStart(afterRoot)).toBe(edit + 2); // past the edit, whose turn is earlier
    expect(blockStart(afterRoot.slice(0, edit + 2))).toBe(-1);
    const resultFirst = ms.slice(ms.findIndex((m) => m.role === "tool"));
    expect(resultFirst[blockStart(resultFirst)]!.role).toBe("user");
  });

  it("a running task's turn is read whole: the block starts no later than the task", () => {
    const h = new History();
    for (let i = 0; i < 5; i++) h.turn(0);
    const ms = h.messages;
    expect(blockStart(ms, Date.parse(ms[4]!.created_at!))).toBe(0);
    expect(blockStart(ms.slice(3), Date.parse(ms[4]!.created_at!))).toBe(1);
    expect(blockStart(ms.slice(5), Date.parse(ms[4]!.created_at!))).toBe(-1);
  });

  it("asks for pages only, and the blocks hold the history once each, in order", async () => {
    const { h } = longHistory();
    const asked: (string | null)[] = [];
    const blocks = await allBlocks(h.messages, asked);
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    expect(blocks.flatMap((b) => b.data.map((m) => m.message_id))).toEqual(h.messages.map((m) => m.message_id));
    expect(blocks[0]!.before).toBeNull();
    for (const b of blocks.slice(1)) expect(b.data[0]!.role).toBe("user");
  });

  it("builds the same timeline, and the same versions, as the whole history", async () => {
    const { h, early, regenerated } = longHistory();
    const whole = historyItems(h.messages, "Master").items;
    const blocks = await allBlocks(h.messages);
    const newest = view(whole);
    for (let k = 1; k < blocks.length; k++) { // each block read so far shows what the whole history ends with
      const shown = view(pagedItems(blocks.slice(-k)));
      expect(newest.slice(newest.length - shown.length)).toEqual(shown);
    }
    const paged = pagedItems(blocks);
    expect(keys(paged)).toEqual(keys(whole));
    const tools = paged.filter((it) => it.kind === "tool");
    expect(tools.every((t) => t.kind === "tool" && t.result !== undefined)).toBe(true);
    for (const choice of [{}, { [early]: 0 }, { [regenerated]: 0 }, { [early]: 1, [regenerated]: 0 }]) {
      expect(view(paged, choice)).toEqual(view(whole, choice));
    }
    expect(view(paged, { [early]: 0 })).toContain(`m:m0 1/2`);
  });

  it("the latest block alone shows what the whole history shows at its end", async () => {
    const { h } = longHistory();
    const fetch = server(h.messages);
    const latest = await readBlock(fetch, null);
    const whole = view(historyItems(h.messages, "Master").items);
    const first = view(pagedItems([latest]));
    expect(first.length).toBeGreaterThan(40);
    expect(whole.slice(whole.length - first.length)).toEqual(first);
    const withPrevious = view(pagedItems([await readBlock(fetch, latest.before), latest]));
    expect(whole.slice(whole.length - withPrevious.length)).toEqual(withPrevious);
  });

  it("sub-agents' parts and status lines come in with the block of their time, as the whole merge puts them", async () => {
    const h = new History();
    for (let i = 0; i < 300; i++) h.turn(i % 2);
    const side = mergeByTime([
      Array.from({ length: 30 }, (_, i): TimelineItem => ({ kind: "status", key: `s:${i}`, tone: "error", text: "failed",
        ts: T0 + i * 37_000 })),
      Array.from({ length: 20 }, (_, i): TimelineItem => ({ kind: "assistant", key: `sub:${i}`, messageId: `sub${i}`,
        text: "from a sub-agent", done: true, ts: T0 + i * 50_000 })),
    ]);
    const whole = mergeByTime([historyItems(h.messages, "Master").items, [...side]]);
    expect(keys(pagedItems(await allBlocks(h.messages), [...side]))).toEqual(keys(whole));
  });

  it("an empty history is one empty block at the start", async () => {
    const blocks = await allBlocks([]);
    expect(blocks).toEqual([{ success: true, agent_id: "master", display_name: "Master", data: [], before: null }]);
  });

  it("an earlier block goes in front of what came live meanwhile, and its messages are known to later events", async () => {
    const h = new History();
    for (let i = 0; i < 250; i++) h.turn(1);
    const fetch = server(h.messages);
    const state: TimelineState = { items: [], suggestions: null, textMismatches: 0 };
    const tl = new Timeline(state, { isMaster: () => true, agentName: () => "Master", masterName: () => "Master" });
    const latest = await readBlock(fetch, null);
    const first = historyItems(latest.data, "Master");
    tl.loadHistory(first.items, first.messageIds);
    const ev = (type: string, data: Record<string, unknown>) => tl.apply({ type, data } as unknown as ServerEvent, "master", "t9");
    ev("user_message", { message_id: "live-u", message: "a new question", source: "user", visibility: "chat" });
    ev("text_end", { message_id: "live-a", content: "a new answer" });
    const earlier = await readBlock(fetch, latest.before);
    const before = historyItems(earlier.data, "Master");
    tl.prependHistory(before.items, before.messageIds);
    const old = earlier.data.find((m) => m.role === "assistant" && m.content)!;
    ev("text_end", { message_id: old.message_id, content: "replayed" }); // a replay of what the block holds
    expect(keys(state.items)).toEqual([...keys(before.items), ...keys(first.items), "m:live-u", "m:live-a"]);
    expect(new Set(keys(state.items)).size).toBe(state.items.length);
  });
});
