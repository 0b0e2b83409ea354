// The conversation list of the sidebar: loaded page by page (with the search text), renamed, deleted and
// exported over REST; on a server without an endpoint the list's error line says so.

import { ref } from "vue";
import { api, download, unsupported } from "./api";
import type { ChatState } from "./chat/state";
import { appendPage, type ConversationPage, mergeFirstPage } from "./conversationPages";
import type { Conversation } from "./types";

/** Conversations a page asks for: more than a sidebar shows, few enough to answer fast for any user. */
export const PAGE_SIZE = 100;

export function useConversations(state: ChatState, onDeletedCurrent: () => void) {
  const conversations = ref<Conversation[]>([]);
  /** The cursor of the page after the loaded ones (docs/API.md, `next_cursor`); null once all are loaded. */
  const nextCursor = ref<string | null>(null);
  const loadingMore = ref(false);
  const error = ref("");
  /** The list's search text (`GET /api/conversations?q=`; an older server ignores it and lists all). */
  const search = ref("");
  /** Counts the lists asked for (a new search starts one) and names the one shown: an answer for an earlier
   * list is dropped, and the old list stays on screen until the new one's first page is in. */
  let listGen = 0;
  let shownGen = 0;
  /** First pages asked for and the newest applied: an answer older than the one shown is dropped. */
  let asked = 0;
  let applied = 0;

  function url(before: string | null): string {
    const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (search.value) params.set("q", search.value);
    if (before) params.set("before", before);
    return `/api/conversations?${params.toString()}`;
  }

  function show(list: { items: Conversation[]; cursor: string | null }): void {
    conversations.value = list.items;
    nextCursor.value = list.cursor;
  }

  /** The first page again, in place of the list's head; the pages loaded below it stay (conversationPages.ts). */
  async function load(): Promise<void> {
    const gen = listGen;
    const seq = ++asked;
    try {
      const body = await api<ConversationPage>(url(null));
      if (gen !== listGen || seq < applied) return;
      applied = seq;
      const kept = shownGen === gen ? { items: conversations.value, cursor: nextCursor.value } : { items: [], cursor: null };
      show(mergeFirstPage(kept, body));
      shownGen = gen;
      error.value = "";
      const cur = body.data.find((c) => c.conversation_id === state.conversationId);
      if (cur) state.title = cur.title;
    } catch (err) {
      if (gen === listGen) error.value = (err as Error).message;
    }
  }

  /** The page after the loaded ones (the list scrolled to its end, or "Show more"); one at a time. */
  async function loadMore(): Promise<void> {
    const cursor = nextCursor.value;
    const gen = listGen;
    if (!cursor || loadingMore.value || shownGen !== gen) return;
    loadingMore.value = true;
    try {
      const body = await api<ConversationPage>(url(cursor));
      // A new search, or a refresh that started the list anew, made this page one of another list.
      if (gen !== listGen || shownGen !== gen || nextCursor.value !== cursor) return;
      show(appendPage({ items: conversations.value, cursor }, body));
      error.value = "";
    } catch (err) {
      if (gen === listGen) error.value = (err as Error).message;
    } finally {
      loadingMore.value = false;
    }
  }

  let timer: ReturnType<typeof setTimeout> | null = null;
  function loadSoon(): void {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      void load();
    }, 200);
  }

  /** Another search text: a list of its own, from its first page. */
  function onSearch(q: string): void {
    search.value = q;
    listGen++;
    void load();
  }

  async function rename(id: string, title: string): Promise<void> {
    try {
      await api(`/api/conversations/${encodeURIComponent(id)}`, { method: "PATCH", body: { title } });
      if (id === state.conversationId) state.title = title;
    } catch (err) {
      error.value = unsupported(err) ? "This server cannot rename conversations." : (err as Error).message;
    }
    await load();
  }

  async function remove(id: string): Promise<void> {
    try {
      await api(`/api/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
      conversations.value = conversations.value.filter((c) => c.conversation_id !== id);
      if (id === state.conversationId) onDeletedCurrent();
    } catch (err) {
      error.value = unsupported(err) ? "This server cannot delete conversations." : (err as Error).message;
    }
    await load();
  }

  async function exportAs(id: string, format: "md" | "json"): Promise<void> {
    try {
      await download(`/api/conversations/${encodeURIComponent(id)}/export?format=${format}`, `conversation.${format}`);
    } catch (err) {
      error.value = unsupported(err) ? "This server cannot export conversations." : (err as Error).message;
    }
  }

  return { conversations, nextCursor, loadingMore, error, load, loadMore, loadSoon, onSearch, rename, remove, exportAs };
}
