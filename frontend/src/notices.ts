// A notice (a message that is not the user's: a sub-agent's report, a background command's end, another
// agent's question or answer, guidance) as the user reads it: a one-line head and a Markdown body, without
// the ids and bracketed headers the server writes for the agents (`[Background command d21b8885 …]`,
// `[Question q_… from InfoAgent_1]`, "Reply with your answer tool, question_id=…").

import type { NoticeItem } from "./types";

export interface NoticeView {
  ok: boolean;
  icon: string;
  label: string;
  /** One line of Markdown (inline only). */
  detail: string;
  meta: string;
  /** The whole notice as Markdown, shown when the line is opened. */
  body: string;
}

const SUB_AGENT = /^\[Sub-agent (\S+) (\w+) in ([\d.]+) s\](?: Error: ([^\n]*))?\n?(?:Result:\n)?([\s\S]*)$/;
const COMMAND = /^\[Background command \S+ (\w+)(?:, exit code (-?\d+))?, ([\d.]+) s\] `([^`\n]*)`\n?([\s\S]*)$/;
const FROM_AGENT = /^\[(Question|Answer to|Message from) (?:(\S+) from )?([^\]]+)\] ?/;
const ANSWER_HINT = /\n?\(Reply with your answer tool, question_id=[^)]*\.\)\s*$/;

function firstLine(s: string): string {
  return s.split("\n").find((l) => l.trim())?.trim() ?? "";
}
function lastOutputLine(s: string): string {
  const lines = s.split("\n").map((l) => l.trim()).filter((l) => l && l !== "Output (tail):" && l !== "(no output)");
  return lines[lines.length - 1] ?? "";
}
/** A fence longer than any backtick run inside, so output cannot close it early. */
function fenced(text: string): string {
  const longest = Math.max(2, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}text\n${text}\n${fence}`;
}
function code(s: string): string {
  return s.includes("`") ? `\`\` ${s} \`\`` : `\`${s}\``;
}

function subAgent(m: RegExpExecArray): NoticeView {
  const [, name, status, secs, error, result] = m;
  const ok = status === "succeeded";
  const report = (result ?? "").trim();
  return {
    ok,
    icon: ok ? "✓" : "✗",
    label: `${name} ${status}`,
    detail: error ?? firstLine(report),
    meta: `${secs} s`,
    body: [error ? `**Error:** ${error}` : "", report].filter(Boolean).join("\n\n"),
  };
}

function command(m: RegExpExecArray): NoticeView {
  const [, status, exit, secs, cmd, rest] = m;
  const ok = status === "succeeded";
  const output = (rest ?? "").replace(/^Output \(tail\):\n/m, "").replace(/^\(no output\)$/m, "").trim();
  const last = lastOutputLine(rest ?? "");
  const exitNote = exit !== undefined && exit !== "0" ? ` (exit ${exit})` : "";
  return {
    ok,
    icon: ok ? "⚙" : "✗",
    label: `Command ${status}${exitNote}`,
    detail: `${code(cmd ?? "")}${last ? ` → ${code(last)}` : ""}`,
    meta: `${secs} s`,
    body: [`${code(cmd ?? "")} ${status}${exit !== undefined ? `, exit code ${exit}` : ""}, ${secs} s`,
      output ? `Output (last lines):\n\n${fenced(output)}` : "No output."].join("\n\n"),
  };
}

// The server fences what a command printed or a sub-agent answered (BEGIN/END lines, docs/API.md
// "user_message"); the view reads the notice without them.
const FENCE = /^(«««|»»») (BEGIN|END) /;
export function unfenced(s: string): string {
  return s.split("\n").filter((l) => !FENCE.test(l)).join("\n");
}

export function noticeView(item: NoticeItem): NoticeView {
  const { source } = item;
  const text = unfenced(item.text);
  const sub = source === "sub_agent" ? SUB_AGENT.exec(text) : null;
  if (sub) return subAgent(sub);
  const cmd = source === "background_command" ? COMMAND.exec(text) : null;
  if (cmd) return command(cmd);
  const from = FROM_AGENT.exec(text);
  const clean = (from ? text.slice(from[0].length) : text).replace(ANSWER_HINT, "").trim();
  const who = from?.[3] ?? item.from ?? "";
  let label = "Notice";
  if (from?.[1] === "Question") label = `${who} asks`;
  else if (from?.[1] === "Answer to") label = `${who} answers`;
  else if (source === "sub_agent") label = "Sub-agent";
  else if (source === "background_command") label = "Background command";
  else if (source === "guidance") label = who ? `Guidance from ${who}` : "Guidance";
  else if (item.messageType === "task") label = who ? `Task from ${who}` : "Task";
  else if (who) label = `From ${who}`;
  else if (item.agentName) label = `To ${item.agentName}`;
  return { ok: true, icon: "↪", label, detail: firstLine(clean), meta: "", body: clean };
}
