// Files that go with the next message (docs/API.md, "Attachments"): uploaded into the conversation's
// workspace at once (picked, pasted or dropped), shown as chips in the composer until sent or removed, and
// named in the message itself, so the agent is told where they are: the text the model reads ends with
// `[Attached to this message: `/workspace/a.txt`, ...]`. The UI shows that line as chips again.

import { reactive } from "vue";

const PREFIX = "[Attached to this message: ";
const WORKSPACE = "/workspace/";
const LINE = /\n*\[Attached to this message: ((?:`[^`\n]+`(?:, )?)+)\]$/;

/** The chips of the composer: the names uploaded for the next message of `conversationId`. */
export const pending = reactive({ conversationId: null as string | null, names: [] as string[] });

export function attach(conversationId: string, name: string): void {
  if (pending.conversationId !== conversationId) {
    pending.conversationId = conversationId;
    pending.names = [];
  }
  if (!pending.names.includes(name)) pending.names.push(name);
}

export function detach(name: string): void {
  pending.names = pending.names.filter((n) => n !== name);
}

/** The chips of `conversationId` (another conversation's are dropped: its files are not in this workspace). */
export function attachedTo(conversationId: string | null): string[] {
  return pending.conversationId === conversationId ? pending.names : [];
}

export function setAttached(conversationId: string | null, names: string[]): void {
  pending.conversationId = conversationId;
  pending.names = [...names];
}

/** The message the server gets: the user's text and the line naming the files' workspace paths. */
export function withAttachments(text: string, names: string[]): string {
  if (!names.length) return text;
  const line = `${PREFIX}${names.map((n) => `\`${WORKSPACE}${n}\``).join(", ")}]`;
  return text ? `${text}\n\n${line}` : line;
}

/** A stored message split into what the user wrote and the names of the files that came with it. */
export function splitAttachments(content: string): { text: string; files: string[] } {
  const m = LINE.exec(content);
  if (!m) return { text: content, files: [] };
  const files = [...m[1]!.matchAll(/`([^`\n]+)`/g)].map((f) => f[1]!.replace(WORKSPACE, ""));
  return { text: content.slice(0, m.index), files };
}

/** A pasted image's name: the clipboard calls every one `image.png`, so each gets its own. */
export function pastedName(file: File, now = new Date()): string {
  if (file.name && file.name !== "image.png" && file.name !== "image.jpeg") return file.name;
  const ext = (file.type.split("/")[1] || "png").replace("jpeg", "jpg");
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `pasted-${stamp}-${Math.random().toString(36).slice(2, 6)}.${ext}`;
}
