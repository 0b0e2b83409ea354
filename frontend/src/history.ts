// Stored messages (GET /api/conversations/<cid>/messages) -> timeline items.

import { reactive } from "vue";
import type { AskItem, AssistantItem, StoredMessage, TimelineItem, ToolItem } from "./types";

export function parseJson(raw: unknown): Record<string, unknown> | null {
  if (typeof raw !== "string") return raw && typeof raw === "object" ? (raw as Record<string, unknown>) : null;
  try {
    const v = JSON.parse(raw);
    return v && typeof v === "object" ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function str(v: unknown): string {
  return typeof v === "string" ? v : v === undefined || v === null ? "" : String(v);
}

/** An assistant reply's marks, read alike from a stored message's `metadata` and a live `text_end` (both carry
 * `partial`, `truncated`, `filtered` and `reasoning`: docs/API.md, text_end); a mark not set is undefined. */
type Marks = Pick<AssistantItem, "interrupted" | "truncated" | "filtered" | "reasoning">;

export function replyMarks(src: { partial?: unknown; truncated?: unknown; filtered?: unknown; reasoning?: unknown }):
  Marks {
  return { interrupted: src.partial === true || undefined, truncated: src.truncated === true || undefined,
    filtered: src.filtered === true || undefined, reasoning: str(src.reasoning) || undefined };
}

/** A list of choices (question options, suggested follow-ups), each once: twice the same is one choice. */
export function optionsOf(v: unknown): string[] {
  if (!Array.isArray(v)) return [];
  return [...new Set(v.filter((o) => o !== null && o !== undefined).map((o) => str(o)))];
}

/** The answer an `ask_user` tool result carries, if any. */
export function askAnswerOf(result: unknown): string | undefined {
  const r = parseJson(result);
  if (!r) return typeof result === "string" && result ? result : undefined;
  for (const key of ["answer", "reply", "response", "message"]) {
    if (typeof r[key] === "string") return r[key] as string;
  }
  if (r.success === false) return `(no answer: ${str(r.error) || "cancelled"})`;
  return undefined;
}

export interface HistoryIndex {
  items: TimelineItem[];
  messageIds: Set<string>;
  tools: Map<string, ToolItem>;
  asks: Map<string, AskItem>; // by tool_call_id
}

function timeOf(m: StoredMessage): number | undefined {
  const t = m.created_at ? Date.parse(m.created_at) : NaN;
  return Number.isNaN(t) ? undefined : t;
}

/**
 * Build the timeline of one agent's stored history. `route` and `visibility` come from
 * each user message's metadata; tool calls of `ask_user` become question cards.
 *
 * With `userFacing`, only the parts a user took part in are kept (for a sub-agent in the
 * main chat): the user's own messages to it and what it did after them, and its
 * questions to the user with what followed, up to the next message from the team.
 */
export function historyItems(messages: StoredMessage[], agentName: string, userFacing = false): HistoryIndex {
  const out: HistoryIndex = { items: [], messageIds: new Set(), tools: new Map(), asks: new Map() };
  let inSegment = !userFacing;
  const push = (item: TimelineItem) => out.items.push(reactive(item) as TimelineItem);
  for (const m of messages) {
    if (m.message_id) out.messageIds.add(m.message_id);
    const meta = (m.metadata ?? {}) as Record<string, unknown>;
    const ts = timeOf(m);
    const base = { agentId: m.agent_id, ts };
    if (m.role === "user") {
      const visibility = str(meta.visibility) || "chat";
      const source = str(meta.source) || "user";
      if (userFacing) inSegment = source === "user" && visibility !== "hidden";
      const versionOf = str(meta.version_of) || str(meta.regenerate_of) || undefined;
      if (visibility === "hidden" && versionOf && source === "user" && !userFacing) {
        // Regenerate's copy of the user's message: the start of the turn's new version (chat/versions.ts)
        push({ kind: "user", key: `m:${m.message_id}`, messageId: m.message_id, text: m.content ?? "", versionOf,
          hiddenCopy: true, ...base });
        continue;
      }
      if (visibility === "hidden" || !inSegment) continue;
      if (visibility === "compact" || source !== "user") {
        push({ kind: "notice", key: `m:${m.message_id}`, messageId: m.message_id, text: m.content ?? "", source,
          from: str(meta.from_agent) || undefined, messageType: str(meta.message_type) || undefined, fromHistory: true,
          ...base });
      } else {
        push({ kind: "user", key: `m:${m.message_id}`, messageId: m.message_id,
          clientMessageId: str(meta.client_message_id) || undefined, text: m.content ?? "",
          route: str(meta.route) || undefined, delivery: str(meta.delivery) || undefined,
          targetAgent: userFacing ? agentName : undefined, versionOf: userFacing ? undefined : versionOf, ...base });
      }
    } else if (m.role === "assistant") {
      const asks = (m.tool_calls ?? []).some((c) => c.function?.name === "ask_user");
      if (userFacing && asks) inSegment = true;
      if (!inSegment) continue;
      if (m.content) {
        push({ kind: "assistant", key: `m:${m.message_id}`, messageId: m.message_id, text: m.content,
          done: true, fromHistory: true, agentName, ...base, taskId: str(meta.task_id) || undefined,
          ...replyMarks(meta) });
      }
      for (const call of m.tool_calls ?? []) {
        const name = call.function?.name ?? "";
        const args = call.function?.arguments ?? "";
        if (name === "ask_user") {
          const a = parseJson(args) ?? {};
          push({ kind: "ask", key: `t:${call.id}`, questionId: "", toolCallId: call.id, question: str(a.question),
            options: optionsOf(a.options), agentName, ...base });
          out.asks.set(call.id, out.items[out.items.length - 1] as AskItem);
        } else {
          push({ kind: "tool", key: `t:${call.id}`, toolCallId: call.id, name, arguments: args, agentName, ...base });
          out.tools.set(call.id, out.items[out.items.length - 1] as ToolItem);
        }
      }
    } else if (m.role === "tool" && m.tool_call_id) {
      const tool = out.tools.get(m.tool_call_id);
      if (tool) tool.result = m.content ?? "";
      const ask = out.asks.get(m.tool_call_id);
      if (ask) {
        const result = parseJson(m.content);
        ask.answer = askAnswerOf(m.content) ?? "(answered)";
        ask.questionId = str(result?.question_id) || ask.questionId;
        if (result?.success === true && typeof result.answer === "string") {
          // The user's reply is stored as the tool's result: show it as the message it was.
          push({ kind: "user", key: `hil:${ask.questionId || m.tool_call_id}`, text: result.answer, route: "hil",
            answersQuestion: ask.questionId || undefined, targetAgent: userFacing ? agentName : undefined,
            agentId: m.agent_id, ts: timeOf(m) });
        }
      }
    }
  }
  return out;
}

/** Merge timelines by time, stably (on a tie, the earlier list first). */
export function mergeByTime(lists: TimelineItem[][]): TimelineItem[] {
  const all = lists.flatMap((list, li) => list.map((item, i) => ({ item, li, i })));
  let last = -Infinity;
  // items without a time take their predecessor's
  for (const list of lists) {
    last = -Infinity;
    for (const item of list) {
      if (item.ts === undefined) item.ts = last;
      else last = item.ts;
    }
  }
  all.sort((a, b) => (a.item.ts! - b.item.ts!) || (a.li - b.li) || (a.i - b.i));
  return all.map((x) => x.item);
}
