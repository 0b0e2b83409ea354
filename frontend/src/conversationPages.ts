// The loaded part of the conversation list, page by page (docs/API.md, `GET /api/conversations`: keyset pages,
// newest activity first, then id). Pure functions, so the rules that keep the list free of duplicates and gaps
// are tested without a server.

import type { Conversation } from "./types";

/** What the UI holds: the conversations loaded so far, in list order, and the cursor of the page after them. */
export interface LoadedList {
  items: Conversation[];
  /** `next_cursor` of the last page loaded; null once the list's end is loaded. */
  cursor: string | null;
}

/** One answer of `GET /api/conversations` (an older server without paging sends no `next_cursor`). */
export interface ConversationPage {
  data: Conversation[];
  next_cursor?: string | null;
}

/** `updated_at` with six fraction digits: the server leaves the fraction out on a whole second, which would
 * make plain string order put `…:05Z` after `…:05.5Z`. */
function activity(c: Conversation): string {
  const iso = c.updated_at ?? c.created_at ?? "";
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/.exec(iso);
  return m ? `${m[1]}.${(m[2] ?? "").padEnd(6, "0")}` : iso;
}

/** Whether `a` comes before `b` in the server's order: later activity first, then the smaller id. */
export function precedes(a: Conversation, b: Conversation): boolean {
  const ka = activity(a);
  const kb = activity(b);
  return ka !== kb ? ka > kb : a.conversation_id < b.conversation_id;
}

/** The next page goes after the loaded ones; one already loaded (a refresh brought it to the top while the
 * page was on its way) stays where it is. */
export function appendPage(list: LoadedList, page: ConversationPage): LoadedList {
  const seen = new Set(list.items.map((c) => c.conversation_id));
  return { items: [...list.items, ...page.data.filter((c) => !seen.has(c.conversation_id))], cursor: page.next_cursor ?? null };
}

/**
 * A fresh first page (after a send, a rename, a finished turn) in place of the list's head, keeping the pages
 * loaded below it. A loaded conversation that the page would hold but does not is gone (deleted, or no longer
 * matching the search) and is dropped; one that moved up is in the page, and its old place is dropped. The
 * loaded pages are kept only when the page reaches down to them: a conversation created or active since they
 * were loaded is newer than all of them, so then nothing can be missing between the page and them; when the
 * whole page is newer than the list's head, what lies between is unknown and the page starts the list anew.
 */
export function mergeFirstPage(list: LoadedList, page: ConversationPage): LoadedList {
  const last = page.data[page.data.length - 1];
  const head = list.items[0];
  if (!page.next_cursor || !last) return { items: page.data, cursor: null };
  if (!head || precedes(last, head)) return { items: page.data, cursor: page.next_cursor };
  const inPage = new Set(page.data.map((c) => c.conversation_id));
  const below = list.items.filter((c) => !inPage.has(c.conversation_id) && precedes(last, c));
  return { items: [...page.data, ...below], cursor: list.cursor };
}
