// The timeline reducer: applies one event of the chat to the list of items the chat view renders.
// No I/O and no timers: the facade (chat/index.ts) decides which events reach it and in what
// order (chat/taskLogs.ts), and does the network side effects. Items are deduped: messages by
// `message_id` (and the client's `client_message_id`), tool cards by `tool_call_id`, questions by
// `question_id`, so replaying a task's log on top of the stored history adds only what history lacks.

import { reactive } from "vue";
import { askAnswerOf, optionsOf, parseJson, replyMarks, str } from "../history";
import type { AskItem, NoticeItem, TimelineItem, ToolItem, UserItem } from "../types";
import type { AskUserEvent, ContextCompactedEvent, ErrorEvent, RouteEvent, ServerEvent, SuggestionsEvent, TaskEndEvent,
  TextChunkEvent, TextEndEvent, ToolResultEvent, UserMessageEvent } from "../generated/events";

import { finishTask, type TaskEndType } from "./taskEnd";
import { newId, type Data, type Roster, type TimelineState } from "./timelineTypes";

export { newId } from "./timelineTypes";
export type { Data, Roster, Suggestions, TimelineState } from "./timelineTypes";

export class Timeline {
  private messages = new Map<string, TimelineItem>(); // message_id -> its item
  private knownMessageIds = new Set<string>(); // ids in stored history, and hidden messages
  private clientIds = new Map<string, UserItem>();
  private answers = new Map<string, UserItem>(); // question_id -> the user's answer
  private tools = new Map<string, ToolItem>();
  private asksByQuestion = new Map<string, AskItem>();
  private asksByToolCall = new Map<string, AskItem>();
  private lastAskToolCall = new Map<string, string>(); // agent_id -> tool_call_id of its open ask_user
  private statusKeys = new Set<string>();
  private summaries = new Set<string>(); // summary ids of the "earlier messages summarised" lines shown

  constructor(
    private state: TimelineState,
    private roster: Roster,
  ) {}

  clear(): void {
    this.messages.clear();
    this.knownMessageIds.clear();
    this.clientIds.clear();
    this.answers.clear();
    this.tools.clear();
    this.asksByQuestion.clear();
    this.asksByToolCall.clear();
    this.lastAskToolCall.clear();
    this.statusKeys.clear();
    this.summaries.clear();
  }

  /** Stored history, merged in time order: its message ids are known, so live events of them are dropped. */
  loadHistory(items: TimelineItem[], messageIds: Iterable<string>): void {
    for (const id of messageIds) this.knownMessageIds.add(id);
    for (const item of items) this.register(item);
    this.state.items.push(...items);
  }

  /** An earlier block of stored history (./pages.ts), before everything shown. */
  prependHistory(items: TimelineItem[], messageIds: Iterable<string>): void {
    for (const id of messageIds) this.knownMessageIds.add(id);
    for (const item of items) this.register(item);
    this.state.items.unshift(...items);
  }

  push(item: TimelineItem): TimelineItem {
    const r = reactive(item) as TimelineItem;
    this.register(r);
    this.state.items.push(r);
    return r;
  }

  /** The item of a message id, if shown. */
  message(id: string): TimelineItem | undefined {
    return this.messages.get(id);
  }

  /** Whether stored history (or a hidden message) has this id. */
  known(id: string): boolean {
    return this.knownMessageIds.has(id);
  }

  /** The user's item `item` now has the server's `messageId`; another item of it (its event came first) goes. */
  bindMessageId(item: UserItem, messageId: string): void {
    const other = this.messages.get(messageId);
    if (other && other !== item) {
      const i = this.state.items.indexOf(other);
      if (i >= 0) this.state.items.splice(i, 1);
    }
    item.messageId = messageId;
    this.messages.set(messageId, item);
  }

  /** A background sub-agent's `tool_start` of `ask_user`: its question card comes with the `ask_user` event. */
  noteAskCall(agentId: string | undefined, toolCallId: string): void {
    if (agentId) this.lastAskToolCall.set(agentId, toolCallId);
  }

  /** Apply one event of the main timeline. Its data is typed from the server's event catalogue
   * (generated/events.ts); values are still read defensively: an old server may omit a field. */
  apply(ev: ServerEvent, agentId: string | undefined, taskId: string | undefined): void {
    switch (ev.type) {
      case "user_message":
        this.onUserMessage(ev.data, agentId, taskId);
        break;
      case "ai_message_start": {
        const d = ev.data;
        const id = str(d.message_id);
        if (!id || this.messages.has(id) || this.knownMessageIds.has(id)) break;
        this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: "", done: false,
          agentName: str(d.display_name) || this.roster.agentName(agentId), agentId, taskId, ts: Date.now() });
        break;
      }
      case "text_chunk":
        this.onChunk(ev.data, agentId, taskId);
        break;
      case "reasoning_chunk": {
        const item = this.messages.get(str(ev.data.message_id));
        if (item?.kind === "assistant" && !item.fromHistory && !item.done) item.reasoning = (item.reasoning ?? "") + str(ev.data.content);
        break;
      }
      case "text_end":
        this.onTextEnd(ev.data, agentId, taskId);
        break;
      case "tool_start": {
        const d = ev.data;
        const id = str(d.tool_call_id);
        const name = str(d.name);
        if (!id) break;
        if (name === "ask_user") {
          this.noteAskCall(agentId, id);
          break;
        }
        if (this.tools.has(id)) break;
        this.push({ kind: "tool", key: `t:${id}`, toolCallId: id, name, arguments: str(d.arguments),
          agentId, agentName: this.roster.agentName(agentId), taskId, ts: Date.now() });
        break;
      }
      case "tool_result":
        this.onToolResult(ev.data, agentId, taskId);
        break;
      case "tool_output": {
        const item = this.tools.get(str(ev.data.tool_call_id));
        if (item && item.result === undefined) item.live = (item.live ?? "") + str(ev.data.text);
        break;
      }
      case "ask_user":
        this.onAsk(ev.data, agentId, taskId);
        break;
      case "suggestions":
        this.showSuggestions(ev.data, taskId);
        break;
      case "route":
        this.onRoute(ev.data);
        break;
      case "context_compacted":
        this.onCompacted(ev.data, agentId, taskId);
        break;
      default:
        break;
    }
  }

  private onChunk(d: TextChunkEvent, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.message_id);
    let item = this.messages.get(id);
    if (!item) {
      if (this.knownMessageIds.has(id)) return;
      item = this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: "", done: false,
        agentName: this.roster.agentName(agentId), agentId, taskId, ts: Date.now() });
    }
    if (item.kind !== "assistant" || item.fromHistory || item.done) return;
    item.text += str(d.content);
  }

  private onTextEnd(d: TextEndEvent, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.message_id);
    const item = this.messages.get(id);
    const content = str(d.content);
    if (!item) {
      if (content && !this.knownMessageIds.has(id)) {
        this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: content, done: true,
          agentName: this.roster.agentName(agentId), agentId, taskId, ts: Date.now(), ...replyMarks(d) });
      }
      return;
    }
    if (item.kind !== "assistant" || item.fromHistory || item.done) return;
    if (item.text !== content) this.state.textMismatches++;
    item.text = content || item.text;
    item.done = true;
    for (const [mark, value] of Object.entries(replyMarks(d))) {
      if (value !== undefined) Object.assign(item, { [mark]: value });
    }
  }

  /** The master's older messages were summarised for its model: one quiet line, once per summary. */
  private onCompacted(d: ContextCompactedEvent, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.summary_id);
    if (!id || this.summaries.has(id) || !this.roster.isMaster(agentId)) return;
    this.push({ kind: "compacted", key: `c:${id}`, summaryId: id, summary: str(d.summary),
      summarisedMessages: Number(d.summarised_messages) || 0, agentId, taskId, ts: Date.now() });
  }

  private onToolResult(d: ToolResultEvent, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.tool_call_id);
    const name = str(d.name);
    if (!id) return;
    if (name === "ask_user") {
      const ask = this.asksByToolCall.get(id);
      if (ask && ask.answer === undefined) ask.answer = askAnswerOf(d.result) ?? "(answered)";
      const qid = str(parseJson(d.result)?.question_id);
      if (ask && qid && !ask.questionId) {
        ask.questionId = qid;
        this.asksByQuestion.set(qid, ask);
      }
      return;
    }
    const tool = this.tools.get(id);
    if (tool) {
      if (tool.result === undefined) tool.result = str(d.result);
    } else {
      this.push({ kind: "tool", key: `t:${id}`, toolCallId: id, name, arguments: "", result: str(d.result),
        agentId, agentName: this.roster.agentName(agentId), taskId, ts: Date.now() });
    }
  }

  private onAsk(d: AskUserEvent, agentId: string | undefined, taskId: string | undefined): void {
    const qid = str(d.question_id);
    if (qid && this.asksByQuestion.has(qid)) return;
    const callId = (agentId && this.lastAskToolCall.get(agentId)) || undefined;
    const known = callId ? this.asksByToolCall.get(callId) : undefined;
    if (known) {
      if (qid && !known.questionId) {
        known.questionId = qid;
        this.asksByQuestion.set(qid, known);
      }
      return;
    }
    this.push({ kind: "ask", key: `q:${qid || callId || newId()}`, questionId: qid, toolCallId: callId,
      question: str(d.question), options: optionsOf(d.options), agentId,
      agentName: str(d.display_name) || this.roster.agentName(agentId), taskId, ts: Date.now() });
  }

  private onRoute(d: RouteEvent): void {
    const id = str(d.message_id);
    const target = id ? this.messages.get(id) : undefined;
    // a message of another tab has its own item once `GET .../queued` shows it (chat/index.ts)
    const item = target?.kind === "user" ? target : id ? undefined : this.lastUserItem((u) => !u.route);
    if (!item) return;
    item.route = str(d.route) || item.route;
    item.delivery = str(d.delivery) || item.delivery;
    const agent = str(d.target_agent);
    if (agent && agent !== this.roster.masterName()) item.targetAgent = agent;
  }

  lastUserItem(pred: (u: UserItem) => boolean = () => true): UserItem | undefined {
    for (let i = this.state.items.length - 1; i >= 0; i--) {
      const it = this.state.items[i]!;
      if (it.kind === "user" && pred(it)) return it;
    }
    return undefined;
  }

  private onUserMessage(d: UserMessageEvent, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.message_id);
    const meta: Data = d.metadata && typeof d.metadata === "object" ? d.metadata : {};
    const source = str(d.source) || "user";
    const visibility = str(d.visibility) || "chat";
    const clientId = str(meta.client_message_id);
    const shown = id ? this.messages.get(id) : undefined;
    if (shown?.kind === "user") shown.queued = false;
    if (id && (shown || this.knownMessageIds.has(id))) return;
    if (clientId) {
      const mine = this.clientIds.get(clientId);
      if (mine) {
        mine.queued = false;
        if (id && !mine.messageId) {
          mine.messageId = id;
          this.messages.set(id, mine);
        }
        mine.pending = false;
        return;
      }
    }
    const answered = str(meta.question_id) ? this.answers.get(str(meta.question_id)) : undefined;
    if (answered) {
      // the answer as stored history showed it
      if (id && !answered.messageId) {
        answered.messageId = id;
        this.messages.set(id, answered);
      }
      return;
    }
    const text = str(d.message);
    const versionOf = str(meta.version_of) || str(meta.regenerate_of) || undefined;
    if (visibility === "hidden") {
      if (id) this.knownMessageIds.add(id);
      // Regenerate's copy of the user's message starts the turn's new version (./versions.ts)
      if (id && versionOf && source === "user") {
        this.push({ kind: "user", key: `m:${id}`, messageId: id, text, versionOf, hiddenCopy: true, agentId, taskId,
          ts: Date.now() });
      }
      return;
    }
    if (source === "user" && visibility === "chat") {
      this.state.suggestions = null;
      const ask = str(meta.question_id) ? this.asksByQuestion.get(str(meta.question_id)) : undefined;
      if (ask && ask.answer === undefined) ask.answer = text;
      this.push({ kind: "user", key: `m:${id || newId()}`, messageId: id || undefined,
        clientMessageId: clientId || undefined, text, agentId, taskId, ts: Date.now(), versionOf,
        route: str(meta.route) || undefined, delivery: str(meta.delivery) || undefined,
        targetAgent: this.roster.isMaster(agentId) ? undefined : this.roster.agentName(agentId) });
      return;
    }
    // Notices (sub-agent / background command completions), and messages agents send each other.
    this.push({ kind: "notice", key: `m:${id || newId()}`, messageId: id || newId(), text, source,
      agentId, agentName: this.roster.agentName(agentId), taskId, from: str(meta.from_agent) || undefined,
      messageType: str(meta.message_type) || undefined, ts: Date.now() } as NoticeItem);
  }

  /** Chips of the reply `message_id`, shown only while that reply is the latest exchange. */
  showSuggestions(d: Pick<SuggestionsEvent, "message_id" | "questions">, taskId: string | undefined): void {
    const questions = optionsOf(d.questions).filter((q) => q.trim());
    if (!questions.length || !this.isLatestReply(str(d.message_id))) return; // late chips of an older reply
    this.state.suggestions = { messageId: str(d.message_id), questions, taskId };
  }

  /** Whether the reply `messageId` has no user message after it (chips of an older exchange are stale). */
  private isLatestReply(messageId: string): boolean {
    for (let i = this.state.items.length - 1; i >= 0; i--) {
      const it = this.state.items[i]!;
      if (it.kind === "assistant" && it.messageId === messageId) return true;
      if (it.kind === "user") return false;
    }
    return false;
  }

  /** A task of the main timeline ended (./taskEnd.ts); a stop says how many queued messages start now. */
  finish(type: TaskEndType, d: Partial<TaskEndEvent & ErrorEvent>, taskId: string | undefined,
    agentId: string | undefined, queued = 0): void {
    finishTask({ items: this.state.items, statusKeys: this.statusKeys, roster: this.roster, push: (it) => this.push(it) },
      type, d, taskId, agentId, queued);
  }

  private register(item: TimelineItem): void {
    switch (item.kind) {
      case "user":
        if (item.messageId) this.messages.set(item.messageId, item);
        if (item.clientMessageId) this.clientIds.set(item.clientMessageId, item);
        if (item.answersQuestion) this.answers.set(item.answersQuestion, item);
        break;
      case "notice":
      case "assistant":
        this.messages.set(item.messageId, item);
        break;
      case "tool":
        this.tools.set(item.toolCallId, item);
        break;
      case "ask":
        if (item.questionId) this.asksByQuestion.set(item.questionId, item);
        if (item.toolCallId) this.asksByToolCall.set(item.toolCallId, item);
        break;
      case "status":
        this.statusKeys.add(item.key.slice(2)); // a line from the stored tasks: its event's replay adds none
        break;
      case "compacted":
        this.summaries.add(item.summaryId);
        break;
    }
  }
}
