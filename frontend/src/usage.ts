// What the agents cost, as the server's usage ledger sums it (docs/API.md, "Usage and budgets"):
// the conversation's total for its header, each turn's for the reply that ends it.

import { api } from "./api";
import type { UsageSums } from "./generated/events";

export type { UsageSums };

export interface ConversationUsage {
  totals: UsageSums;
  by_task: Record<string, UsageSums>;
}

export async function fetchUsage(conversationId: string): Promise<ConversationUsage | null> {
  try {
    return await api<ConversationUsage>(`/api/conversations/${encodeURIComponent(conversationId)}/usage`);
  } catch {
    return null; // an older server, or offline: no figures, nothing else changes
  }
}

function compact(n: number): string {
  return n >= 10000 ? `${(n / 1000).toFixed(0)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export function costText(cost: number | null): string {
  if (cost === null) return "";
  if (cost > 0 && cost < 0.0001) return "<$0.0001"; // a short request of a cheap model: not "$0.0000"
  return cost >= 0.01 ? `$${cost.toFixed(2)}` : `$${cost.toFixed(4)}`;
}

/** "1.2k tokens · $0.0031" (a leading "~" when some were estimated). */
export function usageLabel(u: UsageSums): string {
  const tokens = `${u.estimated ? "~" : ""}${compact(u.prompt_tokens + u.completion_tokens)} tokens`;
  const cost = costText(u.cost);
  return cost ? `${tokens} · ${cost}` : tokens;
}

/** The hover text: every figure. */
export function usageDetail(u: UsageSums): string {
  const lines = [
    `${u.prompt_tokens} prompt tokens (${u.cached_tokens} cached)`,
    `${u.completion_tokens} completion tokens (${u.reasoning_tokens} reasoning)`,
    `${u.requests} model request${u.requests === 1 ? "" : "s"}${u.estimated ? `, ${u.estimated} estimated` : ""}`,
  ];
  if (u.cost !== null) lines.push(`cost ${costText(u.cost)}`);
  return lines.join("\n");
}
