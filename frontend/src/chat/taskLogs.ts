// Task event logs: every event of a task applied exactly once and in order, whichever way it came.
//
// Events that belong to a task carry `task_id` and `idx` (their index in the task's log). Per task
// we keep the contiguous watermark `next`: an event with idx < next was applied already; an event
// with idx > next is buffered and the gap is fetched from `GET /api/tasks/<id>?from=next`. So a
// dropped connection, a late join or a socket echo never loses or doubles a chunk.

import { api } from "../api";
import { FINAL_TASK_STATUSES } from "../generated/statuses";
import type { ChatEvent, TaskSummary, TaskWithEvents } from "../types";

/** The server's page size of a task's event log (GET /api/tasks/<id>?from=). */
export const EVENTS_PAGE = 5000;
export const FINAL_STATUSES = FINAL_TASK_STATUSES;

export interface TaskTrack {
  id: string;
  next: number;
  buffer: Map<number, ChatEvent>;
  final: boolean;
  agentId?: string;
  /** A sub-agent's task the user takes part in (a message of the user, or a question to the user). */
  userFacing: boolean;
  fetching: boolean;
  refetch: boolean;
  failures: number;
}

/** What the logs need from the chat. */
export interface TaskLogsHost {
  /** Apply one event, in order. */
  apply(ev: ChatEvent): void;
  /** The set of tracked tasks or their final flags changed. */
  changed(): void;
  /** History is loading: buffer task events, apply them afterwards. */
  holding(): boolean;
  online(): boolean;
  generation(): number;
  conversationId(): string | null;
}

/** How often the active tasks' logs are read while the socket is down. */
const OFFLINE_POLL_MS = 1500;

export class TaskLogs {
  readonly tracks = new Map<string, TaskTrack>();
  readonly known = new Set<string>();
  /** Final when the conversation was opened -> its agent id. */
  readonly finished = new Map<string, string>();
  private retryTimers = new Set<ReturnType<typeof setTimeout>>();
  private pollTimer: ReturnType<typeof setTimeout> | null = null;
  private listingActive = false; // an offline poll of the active tasks is in flight

  constructor(private host: TaskLogsHost) {}

  clear(): void {
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    this.tracks.clear();
    this.known.clear();
    this.finished.clear();
  }

  track(taskId: string, agentId?: string): TaskTrack {
    let t = this.tracks.get(taskId);
    if (!t) {
      // A late event of a task that had finished (suggestions come after the end) replays it, deduped.
      const final = this.finished.has(taskId);
      t = { id: taskId, next: 0, buffer: new Map(), final, agentId, userFacing: false, fetching: false,
        refetch: false, failures: 0 };
      this.tracks.set(taskId, t);
      this.known.add(taskId);
      this.host.changed();
    } else if (!t.agentId && agentId) {
      t.agentId = agentId;
      this.host.changed();
    }
    return t;
  }

  offer(t: TaskTrack, idx: number, ev: ChatEvent): void {
    if (idx < t.next || t.buffer.has(idx)) return; // seen already
    t.buffer.set(idx, ev);
    if (this.host.holding()) return;
    this.drain(t);
    if (t.buffer.size > 0) void this.fetchFrom(t); // a gap: some events never reached us
  }

  drain(t: TaskTrack): void {
    for (;;) {
      const ev = t.buffer.get(t.next);
      if (!ev) break;
      t.buffer.delete(t.next);
      t.next++;
      this.host.apply(ev);
    }
  }

  /** Fetch a task's log from its watermark and apply it; one fetch per task at a time. */
  async fetchFrom(t: TaskTrack): Promise<void> {
    if (t.fetching) {
      t.refetch = true;
      return;
    }
    t.fetching = true;
    const gen = this.host.generation();
    try {
      do {
        t.refetch = false;
        const body = await api<TaskWithEvents>(`/api/tasks/${encodeURIComponent(t.id)}?from=${t.next}`);
        if (gen !== this.host.generation()) return;
        t.agentId ??= body.agent_id;
        for (const e of body.events) {
          // The log's own task id and index win over anything nested in the data.
          const data: Record<string, unknown> = {
            ...(e.data ?? {}), task_id: t.id, idx: e.idx, conversation_id: body.conversation_id,
          };
          if (data.agent_id === undefined) data.agent_id = body.agent_id;
          this.offer(t, e.idx, { type: e.type, data });
        }
        t.failures = 0;
        if (body.events.length >= EVENTS_PAGE) {
          t.refetch = true; // a full page: the log goes on
          continue;
        }
        if (FINAL_STATUSES.has(body.status) && t.buffer.size === 0 && t.next >= body.next_offset) {
          this.markFinal(t);
        }
      } while (t.refetch);
    } catch {
      if (gen !== this.host.generation()) return;
      t.failures++;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (gen === this.host.generation() && (t.buffer.size > 0 || (!t.final && !this.host.online()))) {
          void this.fetchFrom(t);
        }
      }, Math.min(5000, 300 * 2 ** t.failures));
      this.retryTimers.add(timer);
    } finally {
      t.fetching = false;
    }
  }

  markFinal(t: TaskTrack): void {
    t.final = true;
    this.host.changed();
  }

  /** Read the active tasks' logs on from their watermarks. */
  fetchActive(): void {
    for (const t of this.tracks.values()) if (!t.final) void this.fetchFrom(t);
  }

  /** While the socket is down, nothing pushes events: poll the active tasks' logs, and the
   * conversation's list of active tasks for turns that start meanwhile, until it is back. */
  pollWhileOffline(): void {
    if (this.pollTimer || this.host.online()) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      if (this.host.online()) return;
      if (!this.host.holding()) {
        this.fetchActive();
        void this.pollActiveTasks();
      }
      this.pollWhileOffline();
    }, OFFLINE_POLL_MS);
  }

  /** Turns that start while offline (a follow-up turn, a notice's turn, a send answered without a
   * task id) reach no socket: track the conversation's active tasks we do not know yet. Their logs
   * are read from the start; what was applied already is deduped. */
  private async pollActiveTasks(): Promise<void> {
    const cid = this.host.conversationId();
    if (!cid || this.listingActive) return;
    this.listingActive = true;
    const gen = this.host.generation();
    try {
      const tasks = await api<{ data: TaskSummary[] }>(
        `/api/tasks?conversation_id=${encodeURIComponent(cid)}&status=active`,
      );
      if (gen !== this.host.generation()) return;
      for (const t of tasks.data) {
        if (this.tracks.has(t.task_id) || this.finished.has(t.task_id)) continue;
        void this.fetchFrom(this.track(t.task_id, t.agent_id));
      }
    } catch {
      // the next poll tries again
    } finally {
      this.listingActive = false;
    }
  }
}
