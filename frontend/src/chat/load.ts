// Loading a conversation's stored state over REST: the master's history, its tasks and agents, and
// the parts of the sub-agents' histories the user took part in, merged in time order.

import { api } from "../api";
import { historyItems, mergeByTime } from "../history";
import { cutOffReplies } from "./cutOff";
import type { AgentInfo, CompactedItem, MessagesAnswer, StatusItem, StoredSummary, TaskSummary, TimelineItem } from "../types";

export async function fetchConversation(conversationId: string) {
  const cid = encodeURIComponent(conversationId);
  const [history, tasks, agents] = await Promise.all([
    api<MessagesAnswer>(`/api/conversations/${cid}/messages`),
    api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${cid}`),
    api<{ data: AgentInfo[] }>(`/api/conversations/${cid}/agents`),
  ]);
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

/** The master's history, what the user did with sub-agents (their questions, the user's messages routed to
 * them and their replies) and the master's failed tasks, in time order. */
export async function mergedHistory(
  conversationId: string,
  history: MessagesAnswer,
  agents: AgentInfo[],
  tasks: TaskSummary[] = [],
): Promise<{ items: TimelineItem[]; messageIds: string[] }> {
  const cid = encodeURIComponent(conversationId);
  const subs = agents.filter((a) => a.agent_id !== history.agent_id);
  const [subHistories, summaries] = await Promise.all([
    Promise.all(subs.map((a) =>
      api<MessagesAnswer>(`/api/conversations/${cid}/messages?agent=${encodeURIComponent(a.agent_id)}`).catch(() => null),
    )),
    api<{ data: StoredSummary[] }>(`/api/conversations/${cid}/summaries`).catch(() => ({ data: [] })),
  ]);
  const parts = [historyItems(history.data, history.display_name)];
  for (const h of subHistories) if (h) parts.push(historyItems(h.data, h.display_name, true));
  const lines = failedTaskLines(tasks, history.agent_id);
  const compacted = summaryLines(summaries.data, history.agent_id);
  const messageIds = parts.flatMap((p) => [...p.messageIds]);
  const cut = await cutOffReplies(tasks, history.agent_id, new Set(messageIds), history.display_name);
  return { items: mergeByTime([...parts.map((p) => p.items), cut, lines, compacted]),
    messageIds: [...messageIds, ...cut.map((c) => c.messageId)] };
}
