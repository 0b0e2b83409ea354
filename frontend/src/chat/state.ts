// The reactive state of the open conversation that the chat view renders.

import type { AgentInfo, TimelineItem } from "../types";
import type { ConversationUsage } from "../usage";
import type { Suggestions } from "./timeline";

export interface ChatState {
  conversationId: string | null;
  title: string;
  items: TimelineItem[];
  loading: boolean;
  loadError: string;
  /** The master's history has earlier messages than those loaded (Chat.loadEarlier reads them). */
  hasEarlier: boolean;
  /** Reading the earlier history failed (the reader's next "Show earlier" or scroll to the top asks again). */
  earlierError: string;
  masterAgentId: string | null;
  agents: AgentInfo[];
  running: string[]; // ids of the foreground tasks in progress: the master's, and sub-agent turns with the user
  suggestions: Suggestions | null;
  subAgentWaiting: { count: number; tasks: { agent_id?: string; display_name?: string; summary?: string }[] } | null;
  background: { subAgents: boolean; commands: boolean };
  stopping: boolean;
  /** The first send is creating the conversation. */
  creating: boolean;
  /** Streamed text that disagreed with its `text_end` (should stay 0: a check for the tests). */
  textMismatches: number;
  /** Bumped on every applied event of an agent: a side view of that agent refreshes. */
  agentActivity: Record<string, number>;
  /** What the conversation's model requests used (the header's total, each turn's on its reply). */
  usage: ConversationUsage | null;
}

export function emptyState(): ChatState {
  return {
    conversationId: null, title: "", items: [], loading: false, loadError: "", hasEarlier: false, earlierError: "", masterAgentId: null, agents: [],
    running: [], suggestions: null, subAgentWaiting: null, background: { subAgents: false, commands: false },
    stopping: false, creating: false, textMismatches: 0, agentActivity: {}, usage: null,
  };
}
