// Unsent text, one draft per conversation (and one for a new conversation), kept in localStorage so a
// reload keeps it and it never follows the user into another conversation.

const KEY = "agentChat.drafts";
/** Drafts beyond this many (the oldest first) are dropped: localStorage is small. */
const MAX_DRAFTS = 50;

type Drafts = Record<string, { text: string; at: number }>;

function all(): Drafts {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(KEY) ?? "{}");
    return parsed && typeof parsed === "object" ? (parsed as Drafts) : {};
  } catch {
    return {};
  }
}

/** The draft key of a conversation; `null` is the new conversation not created yet. */
export function draftKey(conversationId: string | null): string {
  return conversationId ?? "new";
}

export function loadDraft(key: string): string {
  const d = all()[key];
  return typeof d?.text === "string" ? d.text : "";
}

/** Keep `text` as the draft of `key` (an empty text removes it). */
export function saveDraft(key: string, text: string): void {
  const drafts = all();
  if (text) drafts[key] = { text, at: Date.now() };
  else delete drafts[key];
  const kept = Object.entries(drafts).sort((a, b) => b[1].at - a[1].at).slice(0, MAX_DRAFTS);
  try {
    localStorage.setItem(KEY, JSON.stringify(Object.fromEntries(kept)));
  } catch {
    // storage full or off: the draft lasts for this page only
  }
}
