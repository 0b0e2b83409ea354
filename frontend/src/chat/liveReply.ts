// A sub-agent's reply while it streams, for its history panel: the stored history has a reply only once it
// ended, so the panel adds the one in progress from the agent's `text_chunk` events, which reach the
// conversation's room like every task event (docs/API.md, "Socket.IO").

import type { AssistantItem } from "../types";

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
