// The conversation list of the sidebar: loaded (with the search text), renamed, deleted and exported over
// REST; on a server without an endpoint the list's error line says so.

import { ref } from "vue";
import { api, download, unsupported } from "./api";
import type { ChatState } from "./chat/state";
import type { Conversation } from "./types";

export function useConversations(state: ChatState, onDeletedCurrent: () => void) {
  const conversations = ref<Conversation[]>([]);
  const error = ref("");
  /** The list's search text (`GET /api/conversations?q=`; an older server ignores it and lists all). */
  const search = ref("");

  async function load(): Promise<void> {
    try {
      const q = search.value ? `?q=${encodeURIComponent(search.value)}` : "";
      const body = await api<{ data: Conversation[] }>(`/api/conversations${q}`);
      conversations.value = body.data;
      error.value = "";
      const cur = body.data.find((c) => c.conversation_id === state.conversationId);
      if (cur) state.title = cur.title;
    } catch (err) {
      error.value = (err as Error).message;
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

  function onSearch(q: string): void {
    search.value = q;
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

  return { conversations, error, load, loadSoon, onSearch, rename, remove, exportAs };
}
