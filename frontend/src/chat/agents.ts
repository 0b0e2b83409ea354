// The conversation's agents: who is the master, their names, and the list the team panel shows
// (kept fresh from `agent_state` events and `GET /api/conversations/<id>/agents`).

import { api } from "../api";
import { str } from "../history";
import type { AgentStateEvent, PendingCountEvent } from "../generated/events";
import { AGENT_STATE_VALUES } from "../generated/statuses";
import type { AgentInfo, TimelineItem } from "../types";
import type { Roster } from "./timeline";

export interface AgentsState {
  conversationId: string | null;
  masterAgentId: string | null;
  agents: AgentInfo[];
  items: TimelineItem[];
}

export class Agents implements Roster {
  /** The master's name from its history, until the agent list is in. */
  masterDisplayName = "";
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private state: AgentsState) {}

  isMaster(agentId: string | undefined): boolean {
    return !agentId || !this.state.masterAgentId || agentId === this.state.masterAgentId;
  }

  masterName(): string {
    const id = this.state.masterAgentId;
    return this.state.agents.find((a) => a.agent_id === id)?.display_name ?? this.masterDisplayName;
  }

  agentName(agentId: string | undefined): string | undefined {
    if (!agentId) return undefined;
    return this.state.agents.find((a) => a.agent_id === agentId)?.display_name;
  }

  /** An `agent_state` or `pending_count` event: the panel shows it at once, the full list follows. */
  onState(d: Partial<AgentStateEvent & PendingCountEvent>, agentId: string | undefined): void {
    const state = AGENT_STATE_VALUES.find((s) => s === d.state); // (an unknown state is ignored)
    const a = this.state.agents.find((x) => x.agent_id === agentId);
    if (a) {
      if (state) a.state = state;
      if (str(d.display_name)) a.display_name = str(d.display_name);
      if (typeof d.pending_count === "number") a.pending_count = d.pending_count;
    }
    this.refreshSoon();
  }

  refreshSoon(delay = 250): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.refresh();
    }, delay);
  }

  async refresh(): Promise<void> {
    const cid = this.state.conversationId;
    if (!cid) return;
    try {
      const body = await api<{ data: AgentInfo[] }>(`/api/conversations/${encodeURIComponent(cid)}/agents`);
      if (cid !== this.state.conversationId) return;
      this.state.agents = body.data;
      const master = body.data.find((a) => a.kind === "master" || a.parent_id === null);
      if (!this.state.masterAgentId && master) this.state.masterAgentId = master.agent_id;
      for (const it of this.state.items) {
        if (!it.agentName && it.agentId) it.agentName = this.agentName(it.agentId);
      }
    } catch {
      // keep the last list
    }
  }
}
