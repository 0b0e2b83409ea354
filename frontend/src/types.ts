// Shapes of the server's answers and events (docs/API.md).

export interface Conversation {
  conversation_id: string;
  title: string;
  created_at?: string | null;
  updated_at?: string | null;
}

export interface AgentInfo {
  agent_id: string;
  display_name: string;
  role: string;
  kind?: string;
  state: string;
  parent_id: string | null;
  pending_count: number;
}

export interface ToolCallRecord {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

export interface StoredMessage {
  message_id: string;
  role: "user" | "assistant" | "tool" | "system";
  content: string | null;
  tool_calls?: ToolCallRecord[] | null;
  tool_call_id?: string | null;
  name?: string | null;
  metadata?: Record<string, unknown> | null;
  agent_id?: string;
  created_at?: string | null;
}

export interface StoredSummary {
  summary_id: string;
  summary: string;
  through_seq: number;
  summarised_messages: number;
  created_at?: string | null;
}

export interface MessagesAnswer {
  agent_id: string;
  display_name: string;
  data: StoredMessage[];
}

export interface TaskSummary {
  task_id: string;
  status: string;
  conversation_id: string;
  agent_id: string;
  task_type?: string;
  created_at?: string | null;
  finished_at?: string | null;
  error?: { code?: unknown; message?: unknown } | null;
}

export interface TaskEvent {
  idx: number;
  type: string;
  data: Record<string, unknown>;
  ts?: number;
}

export interface TaskWithEvents extends TaskSummary {
  events: TaskEvent[];
  next_offset: number;
}

export interface SendAnswer {
  success?: boolean;
  task_id?: string;
  conversation_id?: string;
  route?: string;
  delivery?: string;
  message_id?: string;
  agent_id?: string;
  target_agent?: string;
  code?: string;
  error?: string;
}

export interface RunningStatus {
  is_main_running: boolean;
  main_task_id: string | null;
  has_running_sub_agents?: boolean;
  has_running_background_commands?: boolean;
  pending_notices?: number;
}

export interface Health {
  ok: boolean;
  database?: string;
  model?: string;
  demo_model?: boolean;
  /** With the demo model: phrases it reacts to, shown as example chips on the empty screen. */
  examples?: string[];
}

/** One event as the client handles it, whichever way it arrived (socket or REST log). */
export interface ChatEvent {
  type: string;
  data: Record<string, unknown>;
}

// ---- the timeline the chat view renders -------------------------------------------

interface ItemBase {
  key: string;
  agentId?: string;
  agentName?: string;
  taskId?: string;
  /** When the stored message was written (ms): orders the histories of several agents. */
  ts?: number;
}

export interface UserItem extends ItemBase {
  kind: "user";
  messageId?: string;
  clientMessageId?: string;
  text: string;
  route?: string;
  delivery?: string;
  targetAgent?: string;
  pending?: boolean;
  failed?: string;
  /** Sent, but waiting in its agent's queue (shown again after a reload, before history has it). */
  queued?: boolean;
  /** It failed for want of a connection: it goes out again once the connection is back. */
  retryable?: boolean;
  /** The `question_id` this message answered (human in the loop). */
  answersQuestion?: string;
  /** A later version of the turn that starts with message `versionOf` (an edit, or Regenerate's copy). */
  versionOf?: string;
  /** Regenerate's hidden copy of the user's message: shown only as the start of its version. */
  hiddenCopy?: boolean;
}

export interface NoticeItem extends ItemBase {
  kind: "notice";
  messageId: string;
  text: string;
  source: string;
  /** From the stored history (not news: no tab mark, no notification). */
  fromHistory?: boolean;
  /** Who sent it (`metadata.from_agent`), and the queue message type (`task`, `question`, ...). */
  from?: string;
  messageType?: string;
}

export interface AssistantItem extends ItemBase {
  kind: "assistant";
  messageId: string;
  text: string;
  done: boolean;
  /** Complete from the stored history: streamed chunks of it are ignored. */
  fromHistory?: boolean;
  /** Cut off: stopped by the user, or the model failed mid-reply (`metadata.partial`). */
  interrupted?: boolean;
  /** The model's thinking (`metadata.reasoning`, `text_end.reasoning`): shown collapsed, never in `text`. */
  reasoning?: string;
  /** Cut at the model's output limit (`finish_reason: "length"`, `metadata.truncated`). */
  truncated?: boolean;
}

/** The agent's older messages were summarised for its model (`context_compacted`): a quiet line. */
export interface CompactedItem extends ItemBase {
  kind: "compacted";
  summaryId: string;
  summary: string;
  summarisedMessages: number;
}

export interface ToolItem extends ItemBase {
  kind: "tool";
  toolCallId: string;
  name: string;
  arguments: string;
  result?: string;
  /** What a running foreground command printed so far (`tool_output` events), until its result comes. */
  live?: string;
}

export interface AskItem extends ItemBase {
  kind: "ask";
  questionId: string;
  toolCallId?: string;
  question: string;
  options: string[];
  answer?: string;
}

export interface StatusItem extends ItemBase {
  kind: "status";
  tone: "error" | "stopped" | "info";
  text: string;
}

export type TimelineItem = UserItem | NoticeItem | AssistantItem | ToolItem | AskItem | StatusItem | CompactedItem;
