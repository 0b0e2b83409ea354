// Background commands the agents started (`run_command` with `run_in_background`): their tool result
// comes at once, so their live state, output tail and cancel come from `/api/background_commands`,
// polled while one of them runs in the open conversation.

import { reactive } from "vue";
import { api } from "./api";

export interface CommandState {
  status: string;
  output_tail: string;
  exit_code: number | null;
  error: string | null;
}

const POLL_MS = 1200;
export const commands = reactive(new Map<string, CommandState>());
let conversationId: string | null = null;
let timer: ReturnType<typeof setTimeout> | null = null;
const watched = new Set<string>();

export function setCommandsConversation(cid: string | null): void {
  if (cid === conversationId) return;
  conversationId = cid;
  commands.clear();
  watched.clear();
}

function running(): boolean {
  return [...watched].some((id) => (commands.get(id)?.status ?? "running") === "running");
}

async function poll(): Promise<void> {
  timer = null;
  const cid = conversationId;
  if (!cid || !running()) return;
  try {
    const body = await api<{ data: (CommandState & { command_id: string })[] }>(
      `/api/background_commands?conversation_id=${encodeURIComponent(cid)}`,
    );
    if (cid !== conversationId) return;
    for (const c of body.data) {
      commands.set(c.command_id, { status: c.status, output_tail: c.output_tail, exit_code: c.exit_code, error: c.error });
    }
  } catch {
    // the next poll tries again
  }
  if (running()) timer = setTimeout(() => void poll(), POLL_MS);
}

/** A tool card of a background command shows its state: poll until it ends. */
export function watchCommand(commandId: string): void {
  watched.add(commandId);
  if (!timer) timer = setTimeout(() => void poll(), 0);
}

export async function cancelCommand(commandId: string): Promise<void> {
  await api(`/api/background_commands/${encodeURIComponent(commandId)}/cancel`, { method: "POST" }).catch(() => undefined);
  if (!timer) timer = setTimeout(() => void poll(), 0);
}
