// The end of a task of the main timeline: its replies are complete (one cut short by a stop or a failure,
// a server restart among them, reads "cut off"), its open cards close, and a stop or an error shows a
// status line once.

import { str } from "../history";
import type { StatusItem, TimelineItem } from "../types";
import type { ErrorEvent, TaskEndEvent } from "../generated/events";
import type { Roster } from "./timelineTypes";

export type TaskEndType = "task_complete" | "task_stopped" | "error";

/** What ending a task touches in the timeline. */
export interface TaskEndContext {
  items: TimelineItem[];
  /** `<task_id>:<type>` of the status lines shown. */
  statusKeys: Set<string>;
  roster: Roster;
  push(item: TimelineItem): TimelineItem;
}

export function finishTask(ctx: TaskEndContext, type: TaskEndType, d: Partial<TaskEndEvent & ErrorEvent>,
  taskId: string | undefined, agentId: string | undefined, queued: number): void {
  for (const it of ctx.items) {
    if (it.kind === "assistant" && !it.done && (!taskId || it.taskId === taskId)) {
      it.done = true;
      if (type !== "task_complete") it.interrupted = true;
    }
  }
  if (type === "error") closeOpen(ctx.items, taskId, str(d.message) || "the task failed");
  const key = `${taskId ?? ""}:${type}`;
  if (ctx.statusKeys.has(key)) return;
  ctx.statusKeys.add(key);
  const who = ctx.roster.isMaster(agentId) ? "" : `${ctx.roster.agentName(agentId) ?? "sub-agent"}: `;
  if (type === "error") {
    const code = str(d.code);
    const msg = str(d.message) || "the task failed";
    ctx.push({ kind: "status", key: `s:${key}`, tone: "error", text: `${who}${msg}${code ? ` (${code})` : ""}`,
      taskId, agentId } as StatusItem);
  } else if (type === "task_stopped") {
    const next = queued > 0 ? ` ${queued} queued message${queued === 1 ? "" : "s"} start${queued === 1 ? "s" : ""} now.` : "";
    ctx.push({ kind: "status", key: `s:${key}`, tone: "stopped", text: `${who}Stopped.${next}`, taskId,
      agentId } as StatusItem);
  }
}

/** A task that failed without closing its cards (a server restart, a crash): its tool cards stop
 * spinning and its questions take no answer any more. */
function closeOpen(items: TimelineItem[], taskId: string | undefined, why: string): void {
  if (!taskId) return;
  for (const it of items) {
    if (it.taskId !== taskId) continue;
    if (it.kind === "tool" && it.result === undefined) it.result = JSON.stringify({ success: false, error: why });
    if (it.kind === "ask" && it.answer === undefined) it.answer = `(no answer: ${why})`;
  }
}
