// The types the timeline reducer (./timeline.ts) shares with the facade and its helpers.

import type { TimelineItem } from "../types";

export interface Suggestions {
  messageId: string;
  questions: string[];
  taskId?: string;
}

/** The part of the chat state the reducer writes. */
export interface TimelineState {
  items: TimelineItem[];
  suggestions: Suggestions | null;
  /** Streamed text that disagreed with its `text_end` (should stay 0: a check for the tests). */
  textMismatches: number;
}

/** Who is who in the conversation: the facade answers from its agent list. */
export interface Roster {
  isMaster(agentId: string | undefined): boolean;
  agentName(agentId: string | undefined): string | undefined;
  masterName(): string;
}

export type Data = Record<string, unknown>;

export function newId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  if (c && typeof c.randomUUID === "function") return c.randomUUID();
  return "c" + Date.now().toString(36) + Math.random().toString(36).slice(2, 12);
}
