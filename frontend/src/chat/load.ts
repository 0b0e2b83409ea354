// Loading a conversation's stored state over REST: the master's history, its tasks and agents, and
// the parts of the sub-agents' histories the user took part in, merged in time order.

import { api } from "../api";
import { historyItems, mergeByTime } from "../history";
import type { AgentInfo, MessagesAnswer, TaskSummary, TimelineItem } from "../types";

export async function fetchConversation(conversationId: string) {
  const cid = encodeURIComponent(conversationId);
  const [history, tasks, agents] = await Promise.all([
    api<MessagesAnswer>(`/api/conversations/${cid}/messages`),
    api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${cid}`),
    api<{ data: AgentInfo[] }>(`/api/conversations/${cid}/agents`),
  ]);
  return { history, tasks: tasks.data, agents: agents.data };
}

/** The master's history, and what the user did with sub-agents (their questions, the user's
 * messages routed to them and their replies), in time order. */
export async function mergedHistory(
  conversationId: string,
  history: MessagesAnswer,
  agents: AgentInfo[],
): Promise<{ items: TimelineItem[]; messageIds: string[] }> {
  const cid = encodeURIComponent(conversationId);
  const subs = agents.filter((a) => a.agent_id !== history.agent_id);
  const subHistories = await Promise.all(
    subs.map((a) =>
      api<MessagesAnswer>(`/api/conversations/${cid}/messages?agent=${encodeURIComponent(a.agent_id)}`).catch(() => null),
    ),
  );
  const parts = [historyItems(history.data, history.display_name)];
  for (const h of subHistories) if (h) parts.push(historyItems(h.data, h.display_name, true));
  return { items: mergeByTime(parts.map((p) => p.items)), messageIds: parts.flatMap((p) => [...p.messageIds]) };
}
