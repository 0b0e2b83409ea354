// Handing messages and stops to the server: over the socket when it is up (with an
// acknowledgement), else, or without an acknowledgement, over REST.

import { api, ApiError, unsupported } from "../api";
import type { RunningStatus, SendAnswer } from "../types";

/** How long a send waits for its acknowledgement before retrying over REST (same client_message_id). */
const SEND_ACK_TIMEOUT_MS = 60000;
/** The longest message the UI sends; the server's own limit answers longer ones with `message_too_long`. */
export const MAX_MESSAGE_CHARS = 20000;

export interface SocketLike {
  connected: boolean;
  emit(event: string, ...args: unknown[]): unknown;
  timeout(ms: number): { emitWithAck(event: string, ...args: unknown[]): Promise<unknown> };
}

export function failure(err: unknown): SendAnswer {
  return { success: false, code: (err as ApiError).code ?? "network_error", error: (err as Error).message };
}

/** Codes of a send that never reached a working server: sent again once the connection is back. */
const RETRYABLE = new Set(["network_error", "database_unavailable", "internal_error", "server_error"]);

export function retryable(answer: SendAnswer): boolean {
  return RETRYABLE.has(answer.code ?? "");
}

/** Hand a message to the server: over the socket, else (or without an acknowledgement) over REST. */
export async function deliver(socket: SocketLike, payload: Record<string, string>): Promise<SendAnswer> {
  try {
    if (!socket.connected) throw new Error("offline");
    // Routing may take the rewrite and intent model calls: wait for them, not a fixed few seconds.
    return (await socket.timeout(SEND_ACK_TIMEOUT_MS).emitWithAck("send_message", payload)) as SendAnswer;
  } catch {
    // No acknowledgement (connection lost): the same client_message_id makes the REST retry idempotent.
    try {
      return await api<SendAnswer>("/api/tasks", { method: "POST", body: payload });
    } catch (err) {
      return failure(err);
    }
  }
}

/** A new turn of the master re-answering the last user message (`POST .../regenerate`); `unsupported`
 * from a server without it. */
export async function regenerate(conversationId: string): Promise<SendAnswer> {
  try {
    return await api<SendAnswer>(`/api/conversations/${encodeURIComponent(conversationId)}/regenerate`, { method: "POST" });
  } catch (err) {
    return unsupported(err) ? { success: false, code: "unsupported", error: "this server cannot regenerate" } : failure(err);
  }
}

/** A new version of the turn that starts with `messageId` (`POST .../messages/<id>/edit`). */
export async function editMessage(conversationId: string, messageId: string, message: string): Promise<SendAnswer> {
  try {
    return await api<SendAnswer>(
      `/api/conversations/${encodeURIComponent(conversationId)}/messages/${encodeURIComponent(messageId)}/edit`,
      { method: "POST", body: { message } },
    );
  } catch (err) {
    return failure(err);
  }
}

/** Stop the running task(s): `running`, and the master's task as the server reports it. */
export async function stopTasks(socket: SocketLike, conversationId: string, running: string[]): Promise<string[]> {
  const ids = new Set<string>(running);
  try {
    const status = await api<RunningStatus>(`/api/conversations/${encodeURIComponent(conversationId)}/running-status`);
    if (status.main_task_id) ids.add(status.main_task_id);
  } catch {
    // use what we know
  }
  const cancel = (id: string) => api(`/api/tasks/${encodeURIComponent(id)}/cancel`, { method: "POST" }).catch(() => undefined);
  for (const id of ids) {
    try {
      // Offline, the socket would only buffer the stop until its ack timed out.
      if (!socket.connected) throw new Error("offline");
      const ack = (await socket.timeout(10000).emitWithAck("stop_task", { task_id: id })) as SendAnswer;
      if (ack?.success === false && ack.code !== "task_not_running") await cancel(id);
    } catch {
      await cancel(id);
    }
  }
  return [...ids];
}
