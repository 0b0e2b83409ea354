// Loading a conversation's stored state over REST: the master's latest history (./pages.ts), its tasks and agents, and
// the parts of the sub-agents' histories the user took part in, merged in time order.

import { api } from "../api";
import { historyItems, mergeByTime, type HistoryIndex } from "../history";
import { cutOffReplies } from "./cutOff";
import { masterPages, readBlock, type HistoryBlock } from "./pages";
import { FINAL_STATUSES } from "./taskLogs";
import type { AgentInfo, CompactedItem, MessagesAnswer, StatusItem, StoredSummary, TaskSummary, TimelineItem } from "../types";

export async function fetchConversation(conversationId: string) {
  const cid = encodeURIComponent(conversationId);
  const pages = masterPages(conversationId);
  const [latest, tasks, agents] = await Promise.all([
    readBlock(pages, null),
    api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${cid}`),
    api<{ data: AgentInfo[] }>(`/api/conversations/${cid}/agents`),
  ]);
  let history = latest;
  // A task of the master still running is replayed from its start (chat/index.ts): its turn is read whole.
  const running = tasks.data.filter((t) => t.agent_id === latest.agent_id && !FINAL_STATUSES.has(t.status))
    .map((t) => Date.parse(t.created_at ?? "")).filter((t) => !Number.isNaN(t));
  const notAfter = Math.min(...running);
  if (notAfter !== Infinity && history.before && history.data.length && !(Date.parse(history.data[0]!.created_at ?? "") <= notAfter)) {
    const older = await readBlock(pages, history.before, notAfter);
    history = { ...older, data: [...older.data, ...history.data] };
  }
  return { history, tasks: tasks.data, agents: agents.data };
}

/** The status line of each failed task of the master, where it ended: the stored history has no record of
 * why a turn failed (a restart, the model's error), so after a reload the line comes from the task itself.
 * Its key is the one the live `error` event gives it (./timeline.ts `finish`), so a replay adds none. */
export function failedTaskLines(tasks: TaskSummary[], masterAgentId: string): StatusItem[] {
  return tasks
    .filter((t) => t.status === "failed" && t.agent_id === masterAgentId)
    .map((t) => {
      const code = typeof t.error?.code === "string" ? t.error.code : "";
      const msg = typeof t.error?.message === "string" && t.error.message ? t.error.message : "the task failed";
      const ts = t.finished_at ? Date.parse(t.finished_at) : NaN;
      return { kind: "status", key: `s:${t.task_id}:error`, tone: "error", text: `${msg}${code ? ` (${code})` : ""}`,
        taskId: t.task_id, agentId: t.agent_id, ts: Number.isNaN(ts) ? undefined : ts };
    });
}

/** The quiet "earlier messages summarised" lines of the master's context summaries, where each was written. */
export function summaryLines(summaries: StoredSummary[], agentId: string): CompactedItem[] {
  return summaries.map((s) => {
    const ts = s.created_at ? Date.parse(s.created_at) : NaN;
    return { kind: "compacted", key: `c:${s.summary_id}`, summaryId: s.summary_id, summary: s.summary,
      summarisedMessages: s.summarised_messages, agentId, ts: Number.isNaN(ts) ? undefined : ts };
  });
}

/** The master's latest block of history with what the user did with sub-agents (their questions, the user's
 * messages routed to them and their replies), the master's failed tasks and its summaries, in time order. What of
 * the latter is older than the block waits in `side` for the earlier blocks (withEarlier). */
export async function mergedHistory(
  conversationId: string,
  history: HistoryBlock,
  agents: AgentInfo[],
  tasks: TaskSummary[] = [],
): Promise<{ items: TimelineItem[]; messageIds: string[]; side: TimelineItem[] }> {
  const cid = encodeURIComponent(conversationId);
  const subs = agents.filter((a) => a.agent_id !== history.agent_id);
  const [subHistories, summaries] = await Promise.all([
    Promise.all(subs.map((a) =>
      api<MessagesAnswer>(`/api/conversations/${cid}/messages?agent=${encodeURIComponent(a.agent_id)}`).catch(() => null),
    )),
    api<{ data: StoredSummary[] }>(`/api/conversations/${cid}/summaries`).catch(() => ({ data: [] })),
  ]);
  const master = historyItems(history.data, history.display_name);
  const parts = subHistories.flatMap((h) => (h ? [historyItems(h.data, h.display_name, true)] : []));
  const lines = failedTaskLines(tasks, history.agent_id);
  const compacted = summaryLines(summaries.data, history.agent_id);
  const messageIds = [master, ...parts].flatMap((p) => [...p.messageIds]);
  const cut = await cutOffReplies(tasks, history.agent_id, new Set(messageIds), history.display_name);
  const side = mergeByTime([...parts.map((p) => p.items), cut, lines, compacted]);
  const block = withEarlier(history, master, side);
  return { items: block.items, messageIds: [...messageIds, ...cut.map((c) => c.messageId)], side: block.side };
}

/** A block of the master's history merged by time with the side items (sorted by mergeByTime) of its span: those
 * from its first message on, all of them once it reaches the start; `side` is what waits for earlier blocks. The
 * result is the whole history's merge, cut at the block's start (ties put the master's first, as there). */
export function withEarlier(block: HistoryBlock, master: HistoryIndex, side: TimelineItem[]):
  { items: TimelineItem[]; side: TimelineItem[] } {
  const first = Date.parse(block.data[0]?.created_at ?? "");
  const rest = side.filter((it) => !(it.kind === "assistant" && master.messageIds.has(it.messageId)));
  const from = block.before === null || Number.isNaN(first) ? -Infinity : first;
  const at = rest.findIndex((it) => it.ts! >= from);
  const cut = at < 0 ? rest.length : at;
  return { items: mergeByTime([master.items, rest.slice(cut)]), side: rest.slice(0, cut) };
}
