// A sub-agent's reply while it streams, for its history panel: the stored history has a reply only once it
// ended, so the panel adds the one in progress from the agent's `text_chunk` events, which reach the
// conversation's room like every task event (docs/API.md, "Socket.IO").

import { api } from "../api";
import type { AssistantItem, TaskEvent, TaskSummary } from "../types";

export interface LiveReply {
  messageId: string;
  text: string;
}

/** The reply in progress after one event of the agent; an ended one stays until the stored history (reloaded
 * on the agent's activity) has it, so it does not blink out; the task's end drops it. */
export function nextLiveReply(live: LiveReply | null, type: string, data: Record<string, unknown>): LiveReply | null {
  const id = typeof data.message_id === "string" ? data.message_id : "";
  if (type === "ai_message_start" && id) return { messageId: id, text: "" };
  if (type === "text_chunk" && id) {
    const content = typeof data.content === "string" ? data.content : "";
    return live && live.messageId === id ? { messageId: id, text: live.text + content } : { messageId: id, text: content };
  }
  if (type === "task_complete" || type === "task_stopped" || type === "error") return null;
  return live;
}

/** The timeline item of a reply in progress, unless the stored history has it already. */
export function liveItem(live: LiveReply | null, stored: Set<string>, agentName: string): AssistantItem | null {
  if (!live || !live.text || stored.has(live.messageId)) return null;
  return { kind: "assistant", key: `live:${live.messageId}`, messageId: live.messageId, text: live.text, done: false,
    agentName };
}

/** A panel opened mid-reply starts from the agent's active task log (`GET /api/tasks/<id>`): the reply so far,
 * and the log's last index, after which the room's events continue it. Null when the agent runs no task. */
export async function replayActiveTask(
  conversationId: string,
  agentId: string,
): Promise<{ live: LiveReply | null; taskId: string; last: number } | null> {
  const tasks = await api<{ data: TaskSummary[] }>(
    `/api/tasks?conversation_id=${encodeURIComponent(conversationId)}&status=active`,
  );
  const task = tasks.data.find((t) => t.agent_id === agentId);
  if (!task) return null;
  const detail = await api<{ events: TaskEvent[] }>(`/api/tasks/${encodeURIComponent(task.task_id)}`);
  let live: LiveReply | null = null;
  let last = -1;
  for (const e of detail.events) {
    live = nextLiveReply(live, e.type, e.data);
    last = e.idx;
  }
  return { live, taskId: task.task_id, last };
}
