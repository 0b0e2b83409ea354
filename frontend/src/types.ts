// Shapes of the server's answers and events (docs/API.md).

// The REST answers, generated from the server's response models (tools/gen_api_types.py): a changed answer
// breaks this type check, not the page.
import type * as api from "./generated/api";

export type Conversation = api.Conversation;
export type AgentInfo = api.Agent;
export type ToolCallRecord = api.ToolCall;
export type StoredMessage = api.Message;
export type StoredSummary = api.ContextSummary;
export type MessagesAnswer = api.MessageList;
export type TaskSummary = api.Task;
export type TaskEvent = api.TaskEvent;
export type TaskWithEvents = api.TaskDetail;
/** Every key of T, absent: lets the UI read a field of either side of SendAnswer before it narrows. */
type Absent<T> = { [K in keyof T]?: undefined };
type Refusal = api.BudgetExceededBody;
/** What a send (REST or socket ack) answers: accepted, or refused in the error shape (`success: false`). */
export type SendAnswer =
  | (api.SendAccepted & Absent<Omit<Refusal, keyof api.SendAccepted>>)
  | (Refusal & Absent<Omit<api.SendAccepted, keyof Refusal>>);
export type RunningStatus = api.RunningStatus;

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
  /** Stopped by the provider's content filter (`finish_reason: "content_filter"`, `metadata.filtered`). */
  filtered?: boolean;
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
