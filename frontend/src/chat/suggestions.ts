// The latest reply's suggestion chips after a reload: they are the last `suggestions` event of a
// finished task's log, read back over REST (the live path is the `suggestions` event itself).

import { api } from "../api";
import type { SuggestionsEvent } from "../generated/events";
import type { TaskWithEvents } from "../types";
import type { TaskLogs } from "./taskLogs";
import type { Timeline, TimelineState } from "./timeline";
import { EVENTS_PAGE } from "./taskLogs";

/** The tasks whose logs may hold the latest chips: the master's last finished task and the last
 * few finished tasks (a sub-agent's turn with the user has chips too, and a background task may
 * have finished after the master's reply), newest first. `finished` is in start order. */
export function chipCandidates(finished: [string, string][], masterId: string | null): string[] {
  const newest = [...finished].reverse();
  const lastOfMaster = newest.find(([, agentId]) => agentId === masterId)?.[0];
  return newest.filter(([id], i) => i < 3 || id === lastOfMaster).map(([id]) => id);
}

/** The data of the last `suggestions` event in a task's log, or null. `stale()` stops the reading
 * when the view moved on or chips appeared meanwhile. */
export async function lastSuggestions(
  taskId: string,
  stale: () => boolean,
): Promise<SuggestionsEvent | null> {
  let from = 0;
  let found: SuggestionsEvent | null = null;
  for (let page = 0; page < 10; page++) {
    const body = await api<TaskWithEvents>(`/api/tasks/${encodeURIComponent(taskId)}?from=${from}`);
    if (stale()) return null;
    for (const e of body.events) if (e.type === "suggestions") found = (e.data as unknown as SuggestionsEvent) ?? null;
    if (body.events.length < EVENTS_PAGE) break;
    from = body.next_offset;
  }
  return found;
}

/** Show the latest finished reply's chips, read back from the candidates' logs. */
export async function restoreChips(
  logs: TaskLogs,
  timeline: Timeline,
  state: TimelineState & { masterAgentId: string | null },
  stale: () => boolean,
): Promise<void> {
  if (state.suggestions) return;
  try {
    for (const taskId of chipCandidates([...logs.finished], state.masterAgentId)) {
      const found = await lastSuggestions(taskId, stale);
      if (stale()) return;
      if (found) timeline.showSuggestions(found, taskId);
      if (state.suggestions) return;
    }
  } catch {
    // Chips are a convenience: without them the conversation reads the same.
  }
}
