// The master's history read in pages, newest first (`GET .../messages?limit=N&before=<id>`, docs/API.md): a
// conversation of thousands of turns opens on its latest turns, and earlier ones are read as the reader reaches them.
// A block of history never starts where the timeline built from it would differ from the whole history's: it
// starts at a user's own message (a turn), every tool result in it has its call in it, and every version of a turn
// in it (`version_of`, Regenerate's `regenerate_of`; ./versions.ts) has the turn's first message in it.

import { api } from "../api";
import { str } from "../history";
import type { MessagesAnswer, StoredMessage } from "../types";

/** Messages asked for at a time (the server allows 1 to 1,000). */
export const PAGE_SIZE = 200;

/** A contiguous run of the master's history, oldest first; `before` is the message id to read the run before it
 * from, null when the run reaches the history's start. */
export interface HistoryBlock extends MessagesAnswer {
  before: string | null;
}

export type FetchPage = (before: string | null, limit: number) => Promise<MessagesAnswer>;

/** A message that opens a user's turn: the user's own message in the chat (not an answer to a question). */
function opensTurn(m: StoredMessage): boolean {
  const meta = m.metadata ?? {};
  return m.role === "user" && (str(meta.source) || "user") === "user" && (str(meta.visibility) || "chat") === "chat" &&
    !meta.question_id;
}

/** The first index a block of `messages` can start at (-1: none yet, read further back). `notAfter` (ms) keeps
 * the turns of a task still running whole: the block starts no later than it (its replay dedupes against it). */
export function blockStart(messages: StoredMessage[], notAfter = Infinity): number {
  const pos = new Map<string, number>();
  const calls = new Map<string, number>();
  messages.forEach((m, i) => {
    pos.set(m.message_id, i);
    for (const c of m.tool_calls ?? []) calls.set(c.id, i);
  });
  // blocked[i] > 0: a block starting at i would hold a tool result without its call, or a version without its turn
  const delta = new Array<number>(messages.length + 1).fill(0);
  const block = (after: number, upTo: number): void => {
    if (after >= upTo) return;
    delta[after + 1]! += 1;
    delta[upTo + 1]! -= 1;
  };
  messages.forEach((m, j) => {
    const meta = m.metadata ?? {};
    if (m.role === "tool" && m.tool_call_id) block(calls.get(m.tool_call_id) ?? -1, j);
    const root = str(meta.version_of) || str(meta.regenerate_of);
    if (root) block(pos.get(root) ?? -1, j);
  });
  let blocked = 0;
  for (let i = 0; i < messages.length; i++) {
    blocked += delta[i]!;
    if (blocked || !opensTurn(messages[i]!)) continue;
    const ts = Date.parse(messages[i]!.created_at ?? "");
    if (notAfter !== Infinity && !(ts <= notAfter)) continue;
    return i;
  }
  return -1;
}

/** The block of history just before the message `before` (null: the latest), read a page at a time until it
 * can start cleanly (blockStart) or reaches the start. What is read before its start is read again with the next block. */
export async function readBlock(fetchPage: FetchPage, before: string | null, notAfter = Infinity): Promise<HistoryBlock> {
  let data: StoredMessage[] = [];
  let cursor = before;
  for (;;) {
    const page = await fetchPage(cursor, PAGE_SIZE);
    data = [...page.data, ...data];
    if (page.data.length < PAGE_SIZE) return { ...page, data, before: null };
    cursor = page.data[0]!.message_id;
    const at = blockStart(data, notAfter);
    if (at >= 0) return { ...page, data: data.slice(at), before: data[at]!.message_id };
  }
}

/** The master's pages over REST. */
export function masterPages(conversationId: string): FetchPage {
  const cid = encodeURIComponent(conversationId);
  return (before, limit) =>
    api<MessagesAnswer>(`/api/conversations/${cid}/messages?limit=${limit}${before ? `&before=${encodeURIComponent(before)}` : ""}`);
}
