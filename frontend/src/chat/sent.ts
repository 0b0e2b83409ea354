// The user's own sends, remembered for the browser tab: a message queued for a busy agent is not in
// the stored history until the agent takes it, so after a reload its bubble would vanish. On open,
// each remembered send that history lacks is asked for (`GET /api/messages/<id>`) and shown again.

import { api, ApiError } from "../api";
import type { SendAnswer } from "../types";
import type { Timeline } from "./timeline";

const KEEP = 50;

interface Sent {
  id: string;
  text: string;
  ts: number;
}

function key(conversationId: string): string {
  return `agentChat.sent.${conversationId}`;
}

function load(conversationId: string): Sent[] {
  try {
    const v = JSON.parse(sessionStorage.getItem(key(conversationId)) ?? "[]");
    return Array.isArray(v) ? (v as Sent[]) : [];
  } catch {
    return [];
  }
}

function save(conversationId: string, sent: Sent[]): void {
  try {
    if (sent.length) sessionStorage.setItem(key(conversationId), JSON.stringify(sent.slice(-KEEP)));
    else sessionStorage.removeItem(key(conversationId));
  } catch {
    // storage full or off: only the reload case loses its bubbles
  }
}

export function rememberSent(conversationId: string, messageId: string, text: string): void {
  save(conversationId, [...load(conversationId).filter((s) => s.id !== messageId), { id: messageId, text, ts: Date.now() }]);
}

interface Queued {
  message_id: string;
  content: string;
  target_agent: string | null;
  created_at: string | null;
}

/** Show the user's messages no agent has read yet: from `GET .../queued` (any browser), or, on a server
 * without it (404/405), the remembered sends that history lacks and the server still has. */
export async function restoreSent(conversationId: string, timeline: Timeline, stale: () => boolean): Promise<void> {
  try {
    const body = await api<{ data: Queued[] }>(`/api/conversations/${encodeURIComponent(conversationId)}/queued`);
    if (stale()) return;
    for (const q of body.data) {
      if (timeline.message(q.message_id) || timeline.known(q.message_id)) continue;
      timeline.push({ kind: "user", key: `m:${q.message_id}`, messageId: q.message_id, text: q.content, queued: true,
        ts: q.created_at ? Date.parse(q.created_at) : Date.now(), targetAgent: q.target_agent ?? undefined });
    }
    return;
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 404 && err.status !== 405)) return;
  }
  const keep: Sent[] = [];
  for (const s of load(conversationId)) {
    if (timeline.message(s.id) || timeline.known(s.id)) continue; // in history now
    try {
      const where = await api<SendAnswer & { status?: string }>(`/api/messages/${encodeURIComponent(s.id)}`);
      if (stale()) return;
      if (timeline.message(s.id) || where.route === "hil") continue; // came in meanwhile; an answer shows with its question
      keep.push(s);
      timeline.push({ kind: "user", key: `m:${s.id}`, messageId: s.id, text: s.text, ts: s.ts,
        route: where.route ?? undefined, delivery: where.delivery ?? undefined, queued: true });
    } catch {
      // gone (404), or the server is away: the bubble stays out, as history has it
    }
  }
  save(conversationId, keep);
}
