// What a turn did beyond writing text: the commands it ran, the sub-agents it started, the messages it sent.
// Regenerating such a turn does them again, so Regenerate asks first and names them.

import { parseJson, str } from "./history";
import type { TimelineItem } from "./types";

export interface TurnAction {
  kind: "command" | "sub-agent" | "message" | "tool";
  text: string;
}

/** Tools that only read or talk to the user: doing them again changes nothing outside the chat. */
const HARMLESS = new Set(["ask_user", "answer_other_agent"]);

function action(name: string, rawArgs: string): TurnAction | null {
  if (HARMLESS.has(name)) return null;
  const a = parseJson(rawArgs) ?? {};
  if (name === "run_command") return { kind: "command", text: str(a.command) || "a command" };
  if (name === "create_sub_agent") {
    const role = str(a.role) || "a sub-agent";
    return { kind: "sub-agent", text: a.task ? `${role}: ${str(a.task)}` : role };
  }
  if (name === "send_message_to_sub_agent" || name === "ask_other_agent" || name === "terminate_sub_agent") {
    return { kind: "message", text: name.replace(/_/g, " ") };
  }
  return { kind: "tool", text: name };
}

/** The actions of the last turn: the tool calls after the last user message of the main timeline. */
export function lastTurnActions(items: TimelineItem[]): TurnAction[] {
  const out: TurnAction[] = [];
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i]!;
    if (it.kind === "user") break;
    if (it.kind === "tool") {
      const a = action(it.name, it.arguments);
      if (a) out.unshift(a);
    }
  }
  return out;
}
