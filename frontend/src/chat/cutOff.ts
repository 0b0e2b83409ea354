// Replies a server restart cut short: the stored history never got them (the process died before the reply
// was written), but the task's durable event log has what streamed. After a reload they show again from it,
// marked "cut off", where they were written.

import { api } from "../api";
import type { AssistantItem, TaskSummary, TaskWithEvents } from "../types";

/** The partial replies of the master's tasks that a restart interrupted (error code `interrupted`), that
 * history lacks (`known`). Read only for such tasks: they are few, and each log is read once per open. */
export async function cutOffReplies(tasks: TaskSummary[], masterAgentId: string, known: Set<string>,
  agentName: string): Promise<AssistantItem[]> {
  const hit = tasks.filter((t) => t.status === "failed" && t.agent_id === masterAgentId && t.error?.code === "interrupted");
  const logs = await Promise.all(hit.map((t) =>
    api<TaskWithEvents>(`/api/tasks/${encodeURIComponent(t.task_id)}`).catch(() => null)));
  const out: AssistantItem[] = [];
  for (const log of logs) {
    if (!log) continue;
    const replies = new Map<string, AssistantItem>();
    for (const ev of log.events) {
      const id = typeof ev.data.message_id === "string" ? ev.data.message_id : "";
      if (!id || known.has(id)) continue;
      if (ev.type === "text_end") {
        replies.delete(id); // finished: history has it, or it ended empty
        continue;
      }
      if (ev.type !== "text_chunk" || typeof ev.data.content !== "string") continue;
      const reply = replies.get(id) ?? { kind: "assistant", key: `m:${id}`, messageId: id, text: "", done: true,
        fromHistory: true, interrupted: true, agentName, agentId: masterAgentId, taskId: log.task_id,
        ts: ev.ts !== undefined ? ev.ts * 1000 : undefined };
      reply.text += ev.data.content;
      replies.set(id, reply);
    }
    out.push(...[...replies.values()].filter((r) => r.text.trim()));
  }
  return out;
}
