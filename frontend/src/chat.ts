// The open conversation: its timeline, built from stored history, the durable task event
// logs (REST) and live socket events, with every event applied exactly once and in order.
//
// Ordering and dedupe: events that belong to a task carry `task_id` and `idx` (their index
// in the task's log). Per task we keep the contiguous watermark `next`: an event with
// idx < next was applied already; an event with idx > next is buffered and the gap is
// fetched from `GET /api/tasks/<id>?from=next`. So a dropped connection, a late join or a
// socket echo never loses or doubles a chunk. Items are deduped too: messages by
// `message_id`, tool cards by `tool_call_id`, questions by `question_id`, so replaying a
// task's log from 0 on top of the stored history adds only what history lacks.

import { reactive } from "vue";
import { api, ApiError } from "./api";
import { askAnswerOf, historyItems, mergeByTime, optionsOf, parseJson, str } from "./history";
import type {
  AgentInfo,
  AskItem,
  ChatEvent,
  Conversation,
  MessagesAnswer,
  NoticeItem,
  RunningStatus,
  SendAnswer,
  StatusItem,
  TaskSummary,
  TaskWithEvents,
  TimelineItem,
  ToolItem,
  UserItem,
} from "./types";

/** The server's page size of a task's event log (GET /api/tasks/<id>?from=). */
const EVENTS_PAGE = 5000;
/** How often the active tasks' logs are read while the socket is down. */
const OFFLINE_POLL_MS = 1500;
/** How long a send waits for its acknowledgement before retrying over REST (same client_message_id). */
const SEND_ACK_TIMEOUT_MS = 60000;
const FINAL_STATUSES = new Set(["succeeded", "failed", "stopped"]);
const FINAL = new Set(["task_complete", "task_stopped", "error"]);

interface TaskTrack {
  id: string;
  next: number;
  buffer: Map<number, ChatEvent>;
  final: boolean;
  agentId?: string;
  /** A sub-agent's task the user takes part in (a message of the user, or a question to the user). */
  userFacing: boolean;
  fetching: boolean;
  refetch: boolean;
  failures: number;
}

export interface SocketLike {
  connected: boolean;
  emit(event: string, ...args: unknown[]): unknown;
  timeout(ms: number): { emitWithAck(event: string, ...args: unknown[]): Promise<unknown> };
}

export interface Suggestions {
  messageId: string;
  questions: string[];
  taskId?: string;
}

export interface ChatState {
  conversationId: string | null;
  title: string;
  items: TimelineItem[];
  loading: boolean;
  loadError: string;
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
}

/** A conversation created at a first send; `viewGen` is the generation of the view that shows it,
 * null when the user had moved on (another conversation, or another new chat) before it was created. */
interface Created {
  id: string;
  viewGen: number | null;
}

function newId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  if (c && typeof c.randomUUID === "function") return c.randomUUID();
  return "c" + Date.now().toString(36) + Math.random().toString(36).slice(2, 12);
}

export class Chat {
  state: ChatState = reactive({
    conversationId: null,
    title: "",
    items: [],
    loading: false,
    loadError: "",
    masterAgentId: null,
    agents: [],
    running: [],
    suggestions: null,
    subAgentWaiting: null,
    background: { subAgents: false, commands: false },
    stopping: false,
    creating: false,
    textMismatches: 0,
    agentActivity: {},
  }) as ChatState;

  private tracks = new Map<string, TaskTrack>();
  private messages = new Map<string, TimelineItem>(); // message_id -> its item
  private knownMessageIds = new Set<string>(); // ids in stored history, and hidden messages
  private clientIds = new Map<string, UserItem>();
  private answers = new Map<string, UserItem>(); // question_id -> the user's answer
  private tools = new Map<string, ToolItem>();
  private asksByQuestion = new Map<string, AskItem>();
  private asksByToolCall = new Map<string, AskItem>();
  private lastAskToolCall = new Map<string, string>(); // agent_id -> tool_call_id of its open ask_user
  private statusKeys = new Set<string>();
  private knownTasks = new Set<string>();
  private finishedTasks = new Map<string, string>(); // final when the conversation was opened -> its agent id
  private holding = false; // history is loading: buffer task events, apply them afterwards
  private ephemeral: ChatEvent[] = [];
  private generation = 0; // bumped when another conversation opens: late answers are dropped
  private agentsTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimers = new Set<ReturnType<typeof setTimeout>>();
  /** The conversation being created for the fresh view of generation `gen`: sends made meanwhile in that view share it. */
  private creating: { gen: number; promise: Promise<Created> } | null = null;
  private pollTimer: ReturnType<typeof setTimeout> | null = null;
  private listingActive = false; // an offline poll of the active tasks is in flight
  onConversationsChanged: () => void = () => {};

  constructor(private socket: SocketLike) {}

  // ---- opening a conversation -----------------------------------------------------

  reset(conversationId: string | null, title = ""): void {
    this.generation++;
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    this.tracks.clear();
    this.messages.clear();
    this.knownMessageIds.clear();
    this.clientIds.clear();
    this.answers.clear();
    this.tools.clear();
    this.asksByQuestion.clear();
    this.asksByToolCall.clear();
    this.lastAskToolCall.clear();
    this.statusKeys.clear();
    this.knownTasks.clear();
    this.finishedTasks.clear();
    this.ephemeral = [];
    this.holding = false;
    const s = this.state;
    s.conversationId = conversationId;
    s.title = title;
    s.items = [];
    s.loading = false;
    s.loadError = "";
    s.masterAgentId = null;
    s.agents = [];
    s.running = [];
    s.suggestions = null;
    s.subAgentWaiting = null;
    s.background = { subAgents: false, commands: false };
    s.stopping = false;
    s.creating = false;
    s.agentActivity = {};
  }

  /** Open a conversation: join its room, load its history, then attach to its active tasks. */
  async open(conversationId: string, title = ""): Promise<void> {
    this.reset(conversationId, title);
    const gen = this.generation;
    this.state.loading = true;
    this.holding = true;
    this.join();
    try {
      const cid = encodeURIComponent(conversationId);
      const [history, tasks, agents] = await Promise.all([
        api<MessagesAnswer>(`/api/conversations/${cid}/messages`),
        api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${cid}`),
        api<{ data: AgentInfo[] }>(`/api/conversations/${cid}/agents`),
      ]);
      if (gen !== this.generation) return;
      this.state.masterAgentId = history.agent_id;
      this.masterDisplayName = history.display_name;
      this.state.agents = agents.data;
      this.updateRunning();
      // The master's history, and what the user did with sub-agents (their questions, the
      // user's messages routed to them and their replies), in time order.
      const subs = agents.data.filter((a) => a.agent_id !== history.agent_id);
      const subHistories = await Promise.all(
        subs.map((a) =>
          api<MessagesAnswer>(`/api/conversations/${cid}/messages?agent=${encodeURIComponent(a.agent_id)}`).catch(
            () => null,
          ),
        ),
      );
      if (gen !== this.generation) return;
      const parts = [historyItems(history.data, history.display_name)];
      for (const h of subHistories) if (h) parts.push(historyItems(h.data, h.display_name, true));
      for (const part of parts) for (const id of part.messageIds) this.knownMessageIds.add(id);
      const items = mergeByTime(parts.map((p) => p.items));
      for (const item of items) this.register(item);
      this.state.items.push(...items);
      for (const t of tasks.data) {
        this.knownTasks.add(t.task_id);
        if (!FINAL_STATUSES.has(t.status)) this.track(t.task_id, t.agent_id);
        else this.finishedTasks.set(t.task_id, t.agent_id);
      }
    } catch (err) {
      if (gen !== this.generation) return;
      this.state.loadError = err instanceof ApiError ? err.message : String(err);
    } finally {
      if (gen === this.generation) {
        this.holding = false;
        this.state.loading = false;
      }
    }
    if (gen !== this.generation) return;
    this.refreshAgents();
    // Replay every task that is still active (and any whose events came in meanwhile) from
    // its start: what history already shows is deduped away.
    for (const t of this.tracks.values()) {
      this.drain(t);
      if (!t.final) this.fetchFrom(t);
    }
    const held = this.ephemeral;
    this.ephemeral = [];
    for (const ev of held) this.apply(ev);
    void this.restoreSuggestions(gen);
  }

  /** The latest reply's chips survive a reload: they are the last `suggestions` event of the
   * last finished task that replied to the user, shown while that reply is still the latest thing
   * in the timeline. A sub-agent's background task may have finished after the master's reply,
   * so the candidates are the master's last finished task and the last few finished tasks (a
   * sub-agent's turn with the user has chips too), newest first. */
  private async restoreSuggestions(gen: number): Promise<void> {
    if (this.state.suggestions) return;
    const finished = [...this.finishedTasks].reverse();
    const master = this.state.masterAgentId;
    const lastOfMaster = finished.find(([, agentId]) => agentId === master)?.[0];
    const candidates = finished.filter(([id], i) => i < 3 || id === lastOfMaster).map(([id]) => id);
    try {
      for (const taskId of candidates) {
        let from = 0;
        let found: Record<string, unknown> | null = null;
        for (let page = 0; page < 10; page++) {
          const body = await api<TaskWithEvents>(`/api/tasks/${encodeURIComponent(taskId)}?from=${from}`);
          if (gen !== this.generation || this.state.suggestions) return;
          for (const e of body.events) if (e.type === "suggestions") found = e.data ?? null;
          if (body.events.length < EVENTS_PAGE) break;
          from = body.next_offset;
        }
        if (found) this.showSuggestions(found, taskId);
        if (this.state.suggestions) return;
      }
    } catch {
      // Chips are a convenience: without them the conversation reads the same.
    }
  }

  private showSuggestions(d: Record<string, unknown>, taskId: string | undefined): void {
    const questions = optionsOf(d.questions).filter((q) => q.trim());
    if (!questions.length || !this.isLatestReply(str(d.message_id))) return; // late chips of an older reply
    this.state.suggestions = { messageId: str(d.message_id), questions, taskId };
  }

  /** Start a fresh, empty conversation view (the conversation is created at the first send). */
  startNew(): void {
    this.reset(null, "");
  }

  join(): void {
    const cid = this.state.conversationId;
    if (cid && this.socket.connected) this.socket.emit("join_conversation", { conversation_id: cid });
  }

  /** After a reconnect: rejoin the room and fetch what was missed. */
  async resync(): Promise<void> {
    const cid = this.state.conversationId;
    if (!cid) return;
    this.join();
    if (this.holding) return; // open() attaches to the tasks once history is in
    const gen = this.generation;
    for (const t of this.tracks.values()) if (!t.final) this.fetchFrom(t);
    this.recoverSuggestions(gen);
    try {
      const tasks = await api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${encodeURIComponent(cid)}`);
      if (gen !== this.generation) return;
      for (const t of tasks.data) {
        const fresh = !this.knownTasks.has(t.task_id) && !this.tracks.has(t.task_id);
        this.knownTasks.add(t.task_id);
        if (fresh) this.fetchFrom(this.track(t.task_id, t.agent_id));
      }
    } catch {
      // the next reconnect or event tries again
    }
    this.refreshAgents();
  }

  /** Chips come after their task's final event, so a drop right after it loses them: read on
   * from the watermark of the last task that finished here, or from the log of the last one
   * that had finished before the conversation opened. */
  private recoverSuggestions(gen: number): void {
    if (this.state.suggestions) return;
    const finished = [...this.tracks.values()].filter((t) => t.final && this.foreground(t));
    const last = finished[finished.length - 1];
    if (last) this.fetchFrom(last);
    else void this.restoreSuggestions(gen);
  }

  /** While the socket is down, nothing pushes events: poll the active tasks' logs, and the
   * conversation's list of active tasks for turns that start meanwhile, until it is back. */
  pollWhileOffline(): void {
    if (this.pollTimer || this.socket.connected) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      if (this.socket.connected) return;
      if (!this.holding) {
        for (const t of this.tracks.values()) if (!t.final) this.fetchFrom(t);
        void this.pollActiveTasks();
      }
      this.pollWhileOffline();
    }, OFFLINE_POLL_MS);
  }

  /** Turns that start while offline (a follow-up turn, a notice's turn, a send answered without a
   * task id) reach no socket: track the conversation's active tasks we do not know yet, as
   * `resync` does. Their logs are read from the start; what was applied already is deduped. */
  private async pollActiveTasks(): Promise<void> {
    const cid = this.state.conversationId;
    if (!cid || this.listingActive) return;
    this.listingActive = true;
    const gen = this.generation;
    try {
      const tasks = await api<{ data: TaskSummary[] }>(
        `/api/tasks?conversation_id=${encodeURIComponent(cid)}&status=active`,
      );
      if (gen !== this.generation) return;
      for (const t of tasks.data) {
        if (this.tracks.has(t.task_id) || this.finishedTasks.has(t.task_id)) continue;
        this.fetchFrom(this.track(t.task_id, t.agent_id));
      }
    } catch {
      // the next poll tries again
    } finally {
      this.listingActive = false;
    }
  }

  // ---- events in ----------------------------------------------------------------

  /** A socket event: `type` is its name, `data` carries `task_id` and `idx` when it is logged. */
  ingest(ev: ChatEvent): void {
    const d = ev.data ?? {};
    const cid = this.state.conversationId;
    if (!cid || d.conversation_id !== cid) return;
    const taskId = typeof d.task_id === "string" ? d.task_id : null;
    const idx = typeof d.idx === "number" ? d.idx : null;
    if (taskId === null || idx === null) {
      if (this.holding) this.ephemeral.push(ev);
      else this.apply(ev);
      return;
    }
    const t = this.track(taskId, str(d.agent_id) || undefined);
    this.offer(t, idx, ev);
  }

  private track(taskId: string, agentId?: string): TaskTrack {
    let t = this.tracks.get(taskId);
    if (!t) {
      // A late event of a task that had finished (suggestions come after the end) replays it, deduped.
      const final = this.finishedTasks.has(taskId);
      t = { id: taskId, next: 0, buffer: new Map(), final, agentId, userFacing: false, fetching: false,
        refetch: false, failures: 0 };
      this.tracks.set(taskId, t);
      this.knownTasks.add(taskId);
      this.updateRunning();
    } else if (!t.agentId && agentId) {
      t.agentId = agentId;
      this.updateRunning();
    }
    return t;
  }

  /** Whether a task's events belong in the main timeline: the master's, or a sub-agent's turn with the user. */
  private foreground(t: TaskTrack | undefined): boolean {
    return !t || this.isMaster(t.agentId) || t.userFacing;
  }

  private updateRunning(): void {
    const ids = [...this.tracks.values()].filter((t) => !t.final && this.foreground(t)).map((t) => t.id);
    const cur = this.state.running;
    if (ids.length !== cur.length || ids.some((id, i) => cur[i] !== id)) this.state.running = ids;
    if (ids.length === 0) this.state.stopping = false;
  }

  private offer(t: TaskTrack, idx: number, ev: ChatEvent): void {
    if (idx < t.next || t.buffer.has(idx)) return; // seen already
    t.buffer.set(idx, ev);
    if (this.holding) return;
    this.drain(t);
    if (t.buffer.size > 0) this.fetchFrom(t); // a gap: some events never reached us
  }

  private drain(t: TaskTrack): void {
    for (;;) {
      const ev = t.buffer.get(t.next);
      if (!ev) break;
      t.buffer.delete(t.next);
      t.next++;
      this.apply(ev);
    }
  }

  /** Fetch a task's log from its watermark and apply it; one fetch per task at a time. */
  private async fetchFrom(t: TaskTrack): Promise<void> {
    if (t.fetching) {
      t.refetch = true;
      return;
    }
    t.fetching = true;
    const gen = this.generation;
    try {
      do {
        t.refetch = false;
        const body = await api<TaskWithEvents>(`/api/tasks/${encodeURIComponent(t.id)}?from=${t.next}`);
        if (gen !== this.generation) return;
        t.agentId ??= body.agent_id;
        for (const e of body.events) {
          // The log's own task id and index win over anything nested in the data.
          const data: Record<string, unknown> = {
            ...(e.data ?? {}), task_id: t.id, idx: e.idx, conversation_id: body.conversation_id,
          };
          if (data.agent_id === undefined) data.agent_id = body.agent_id;
          this.offer(t, e.idx, { type: e.type, data });
        }
        t.failures = 0;
        if (body.events.length >= EVENTS_PAGE) {
          t.refetch = true; // a full page: the log goes on
          continue;
        }
        if (FINAL_STATUSES.has(body.status) && t.buffer.size === 0 && t.next >= body.next_offset) {
          this.markFinal(t);
        }
      } while (t.refetch);
    } catch {
      if (gen !== this.generation) return;
      t.failures++;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (gen === this.generation && (t.buffer.size > 0 || (!t.final && !this.socket.connected))) this.fetchFrom(t);
      }, Math.min(5000, 300 * 2 ** t.failures));
      this.retryTimers.add(timer);
    } finally {
      t.fetching = false;
    }
  }

  private markFinal(t: TaskTrack): void {
    t.final = true;
    this.updateRunning();
  }

  // ---- applying one event ---------------------------------------------------------

  private isMaster(agentId: string | undefined): boolean {
    return !agentId || !this.state.masterAgentId || agentId === this.state.masterAgentId;
  }

  private masterDisplayName = "";

  private masterName(): string {
    const id = this.state.masterAgentId;
    return this.state.agents.find((a) => a.agent_id === id)?.display_name ?? this.masterDisplayName;
  }

  private agentName(agentId: string | undefined): string | undefined {
    if (!agentId) return undefined;
    return this.state.agents.find((a) => a.agent_id === agentId)?.display_name;
  }

  private bump(agentId: string | undefined): void {
    if (agentId) this.state.agentActivity[agentId] = (this.state.agentActivity[agentId] ?? 0) + 1;
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

  private push(item: TimelineItem): TimelineItem {
    const r = reactive(item) as TimelineItem;
    this.register(r);
    this.state.items.push(r);
    return r;
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
    }
  }

  private apply(ev: ChatEvent): void {
    const d = ev.data ?? {};
    const agentId = str(d.agent_id) || undefined;
    const taskId = str(d.task_id) || undefined;
    this.bump(agentId);
    const track = taskId ? this.tracks.get(taskId) : undefined;
    if (track && !this.foreground(track)) {
      // A sub-agent working in the background: the team panel shows it. The main timeline
      // takes only what involves the user: its questions, and messages of the user to it.
      if (ev.type === "tool_start" && str(d.name) === "ask_user") {
        if (agentId) this.lastAskToolCall.set(agentId, str(d.tool_call_id));
        return;
      } else if (ev.type === "ask_user") track.userFacing = true;
      else if (ev.type === "user_message" && str(d.source) === "user" && str(d.visibility) !== "hidden") {
        track.userFacing = true;
      } else if (ev.type === "agent_state") {
        this.onAgentState(d, agentId);
        return;
      } else if (FINAL.has(ev.type)) {
        this.onFinal(ev.type, d, taskId, agentId, true);
        return;
      } else {
        return;
      }
      this.updateRunning();
    }
    switch (ev.type) {
      case "user_message":
        this.onUserMessage(d, agentId, taskId);
        break;
      case "ai_message_start": {
        const id = str(d.message_id);
        if (!id || this.messages.has(id) || this.knownMessageIds.has(id)) break;
        this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: "", done: false,
          agentName: str(d.display_name) || this.agentName(agentId), agentId, taskId });
        break;
      }
      case "text_chunk": {
        const id = str(d.message_id);
        let item = this.messages.get(id);
        if (!item) {
          if (this.knownMessageIds.has(id)) break;
          item = this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: "", done: false,
            agentName: this.agentName(agentId), agentId, taskId });
        }
        if (item.kind !== "assistant" || item.fromHistory || item.done) break;
        item.text += str(d.content);
        break;
      }
      case "text_end": {
        const id = str(d.message_id);
        const item = this.messages.get(id);
        const content = str(d.content);
        if (!item) {
          if (content && !this.knownMessageIds.has(id)) {
            this.push({ kind: "assistant", key: `m:${id}`, messageId: id, text: content, done: true,
              agentName: this.agentName(agentId), agentId, taskId });
          }
          break;
        }
        if (item.kind !== "assistant" || item.fromHistory || item.done) break;
        if (item.text !== content) this.state.textMismatches++;
        item.text = content || item.text;
        item.done = true;
        break;
      }
      case "tool_start": {
        const id = str(d.tool_call_id);
        const name = str(d.name);
        if (!id) break;
        if (name === "ask_user") {
          if (agentId) this.lastAskToolCall.set(agentId, id);
          break;
        }
        if (this.tools.has(id)) break;
        this.push({ kind: "tool", key: `t:${id}`, toolCallId: id, name, arguments: str(d.arguments),
          agentId, agentName: this.agentName(agentId), taskId });
        break;
      }
      case "tool_result": {
        const id = str(d.tool_call_id);
        const name = str(d.name);
        if (!id) break;
        if (name === "ask_user") {
          const ask = this.asksByToolCall.get(id);
          if (ask && ask.answer === undefined) ask.answer = askAnswerOf(d.result) ?? "(answered)";
          const qid = str(parseJson(d.result)?.question_id);
          if (ask && qid && !ask.questionId) {
            ask.questionId = qid;
            this.asksByQuestion.set(qid, ask);
          }
          break;
        }
        const tool = this.tools.get(id);
        if (tool) {
          if (tool.result === undefined) tool.result = str(d.result);
        } else {
          this.push({ kind: "tool", key: `t:${id}`, toolCallId: id, name, arguments: "", result: str(d.result),
            agentId, agentName: this.agentName(agentId), taskId });
        }
        break;
      }
      case "ask_user": {
        const qid = str(d.question_id);
        if (qid && this.asksByQuestion.has(qid)) break;
        const callId = (agentId && this.lastAskToolCall.get(agentId)) || str(d.tool_call_id) || undefined;
        const known = callId ? this.asksByToolCall.get(callId) : undefined;
        if (known) {
          if (qid && !known.questionId) {
            known.questionId = qid;
            this.asksByQuestion.set(qid, known);
          }
          break;
        }
        this.push({ kind: "ask", key: `q:${qid || callId || newId()}`, questionId: qid, toolCallId: callId,
          question: str(d.question), options: optionsOf(d.options), agentId,
          agentName: str(d.display_name) || this.agentName(agentId), taskId });
        break;
      }
      case "suggestions":
        this.showSuggestions(d, taskId);
        break;
      case "route": {
        const target = str(d.message_id) ? this.messages.get(str(d.message_id)) : undefined;
        const item = target?.kind === "user" ? target : this.lastUserItem((u) => !u.route);
        if (item) {
          item.route = str(d.route) || item.route;
          item.delivery = str(d.delivery) || item.delivery;
          const target = str(d.target_agent);
          if (target && target !== this.masterName()) item.targetAgent = target;
        }
        break;
      }
      case "agent_state":
        this.onAgentState(d, agentId);
        break;
      case "sub_agent_waiting": {
        const count = Number(d.count ?? 0);
        const tasks = Array.isArray(d.tasks)
          ? (d.tasks as { agent_id?: string; display_name?: string; summary?: string }[])
          : [];
        this.state.subAgentWaiting = count > 0 ? { count, tasks } : null;
        break;
      }
      case "task_complete":
      case "task_stopped":
      case "error":
        this.onFinal(ev.type, d, taskId, agentId);
        break;
      default:
        break;
    }
  }

  private lastUserItem(pred: (u: UserItem) => boolean = () => true): UserItem | undefined {
    for (let i = this.state.items.length - 1; i >= 0; i--) {
      const it = this.state.items[i]!;
      if (it.kind === "user" && pred(it)) return it;
    }
    return undefined;
  }

  private onUserMessage(d: Record<string, unknown>, agentId: string | undefined, taskId: string | undefined): void {
    const id = str(d.message_id);
    const meta = (d.metadata && typeof d.metadata === "object" ? d.metadata : {}) as Record<string, unknown>;
    const source = str(d.source) || "user";
    const visibility = str(d.visibility) || "chat";
    const clientId = str(meta.client_message_id);
    if (id && (this.messages.has(id) || this.knownMessageIds.has(id))) return;
    if (clientId) {
      const mine = this.clientIds.get(clientId);
      if (mine) {
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
    if (visibility === "hidden") {
      if (id) this.knownMessageIds.add(id);
      return;
    }
    const text = str(d.message);
    if (source === "user" && visibility === "chat") {
      this.state.suggestions = null;
      this.answerAskFrom(meta, text);
      this.push({ kind: "user", key: `m:${id || newId()}`, messageId: id || undefined,
        clientMessageId: clientId || undefined, text, agentId, taskId,
        route: str(meta.route) || undefined, delivery: str(meta.delivery) || undefined,
        targetAgent: this.isMaster(agentId) ? undefined : this.agentName(agentId) });
      return;
    }
    // Notices (sub-agent / background command completions), and messages agents send each other.
    this.push({ kind: "notice", key: `m:${id || newId()}`, messageId: id || newId(), text, source,
      agentId, agentName: this.agentName(agentId), taskId, from: str(meta.from_agent) || undefined,
      messageType: str(meta.message_type) || undefined } as NoticeItem);
  }

  private answerAskFrom(meta: Record<string, unknown>, text: string): void {
    const qid = str(meta.question_id);
    const ask = qid ? this.asksByQuestion.get(qid) : undefined;
    if (ask && ask.answer === undefined) ask.answer = text;
  }

  private onAgentState(d: Record<string, unknown>, agentId: string | undefined): void {
    const state = str(d.state);
    const a = this.state.agents.find((x) => x.agent_id === agentId);
    if (a) {
      if (state) a.state = state;
      if (str(d.display_name)) a.display_name = str(d.display_name);
    }
    this.refreshAgentsSoon();
  }

  private onFinal(type: string, d: Record<string, unknown>, taskId: string | undefined, agentId?: string,
    quiet = false): void {
    if (taskId) {
      const t = this.tracks.get(taskId);
      if (t) this.markFinal(t);
    }
    if (quiet) {
      if (d.has_running_sub_agents === false) this.state.subAgentWaiting = null;
      this.refreshAgentsSoon();
      return;
    }
    for (const it of this.state.items) {
      if (it.kind === "assistant" && !it.done && (!taskId || it.taskId === taskId)) it.done = true;
    }
    this.state.background = {
      subAgents: d.has_running_sub_agents === true,
      commands: d.has_running_background_commands === true,
    };
    if (!this.state.background.subAgents) this.state.subAgentWaiting = null;
    const key = `${taskId ?? ""}:${type}`;
    if (this.statusKeys.has(key)) return;
    this.statusKeys.add(key);
    const who = this.isMaster(agentId) ? "" : `${this.agentName(agentId) ?? "sub-agent"}: `;
    if (type === "error") {
      const code = str(d.code);
      const msg = str(d.message) || "the task failed";
      this.push({ kind: "status", key: `s:${key}`, tone: "error", text: `${who}${msg}${code ? ` (${code})` : ""}`,
        taskId, agentId } as StatusItem);
    } else if (type === "task_stopped") {
      this.push({ kind: "status", key: `s:${key}`, tone: "stopped", text: `${who}Stopped.`, taskId, agentId } as StatusItem);
    }
    this.refreshAgentsSoon();
    this.onConversationsChanged();
  }

  // ---- agents ------------------------------------------------------------------------

  refreshAgentsSoon(delay = 250): void {
    if (this.agentsTimer) return;
    this.agentsTimer = setTimeout(() => {
      this.agentsTimer = null;
      this.refreshAgents();
    }, delay);
  }

  async refreshAgents(): Promise<void> {
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

  // ---- actions -------------------------------------------------------------------------

  /** Send a user message; `ask` is the question card it answers, if any. */
  async send(text: string, ask?: AskItem): Promise<SendAnswer> {
    const message = text.trim();
    if (!message) return { success: false, code: "empty", error: "empty message" };
    let cid = this.state.conversationId;
    if (!cid) {
      const before = this.generation;
      try {
        const created = await this.createConversation();
        cid = created.id;
        if (created.viewGen === null || created.viewGen !== this.generation) {
          // The user moved on while the conversation was created: it still gets the message (and
          // shows in the list), but the view stays where the user is.
          const answer = await this.deliver({ conversation_id: cid, message, client_message_id: newId() });
          this.onConversationsChanged();
          return answer;
        }
      } catch (err) {
        const failed = { success: false, code: (err as ApiError).code ?? "network_error", error: (err as Error).message };
        // Keep what the user wrote on screen, marked as not sent, unless they moved on meanwhile.
        if (before === this.generation) {
          this.push({ kind: "user", key: `c:${newId()}`, text: message, failed: failed.error || failed.code });
        }
        return failed;
      }
    }
    const gen = this.generation;
    const clientMessageId = newId();
    this.state.suggestions = null;
    if (ask) ask.answer = message;
    const item = this.push({ kind: "user", key: `c:${clientMessageId}`, clientMessageId, text: message,
      pending: true, answersQuestion: ask?.questionId || undefined }) as UserItem;
    const payload: Record<string, string> = { conversation_id: cid, message, client_message_id: clientMessageId };
    if (ask?.questionId) payload.question_id = ask.questionId;
    const answer = await this.deliver(payload);
    if (gen !== this.generation) return answer;
    if (answer?.code === "duplicate_in_progress") return answer; // the first send is still being routed
    item.pending = false;
    if (!answer || answer.success === false) {
      item.failed = answer.error || answer.code || "not sent";
      if (ask) ask.answer = answer.code === "stale_question" ? "(this question is no longer open)" : undefined;
      return answer;
    }
    item.route = answer.route ?? item.route;
    item.delivery = answer.delivery ?? item.delivery;
    if (answer.message_id) {
      const other = this.messages.get(answer.message_id);
      if (other && other !== item) {
        // the event got here first under another item: keep one
        const i = this.state.items.indexOf(other);
        if (i >= 0) this.state.items.splice(i, 1);
      }
      item.messageId = answer.message_id;
      this.messages.set(answer.message_id, item);
    }
    if (answer.agent_id && !this.isMaster(answer.agent_id)) {
      item.targetAgent = answer.target_agent || this.agentName(answer.agent_id);
    }
    if (answer.task_id) {
      const t = this.track(answer.task_id, answer.agent_id);
      if (!this.isMaster(answer.agent_id) && !t.userFacing) {
        t.userFacing = true;
        this.updateRunning();
      }
      if (!this.socket.connected) {
        this.fetchFrom(t);
        this.pollWhileOffline();
      }
    }
    this.onConversationsChanged();
    return answer;
  }

  /** Hand a message to the server: over the socket, else (or without an acknowledgement) over REST. */
  private async deliver(payload: Record<string, string>): Promise<SendAnswer> {
    try {
      if (!this.socket.connected) throw new Error("offline");
      // Routing may take the rewrite and intent model calls: wait for them, not a fixed few seconds.
      return (await this.socket.timeout(SEND_ACK_TIMEOUT_MS).emitWithAck("send_message", payload)) as SendAnswer;
    } catch {
      // No acknowledgement (connection lost): the same client_message_id makes the REST retry idempotent.
      try {
        return await api<SendAnswer>("/api/tasks", { method: "POST", body: payload });
      } catch (err) {
        return { success: false, code: (err as ApiError).code ?? "network_error", error: (err as Error).message };
      }
    }
  }

  /** Create the conversation of a fresh view, once: a second send meanwhile in the same view waits
   * for the same one. The view switches to it only if the user is still on the view that asked. */
  private createConversation(): Promise<Created> {
    const gen = this.generation;
    if (this.creating?.gen === gen) return this.creating.promise;
    const entry = {
      gen,
      promise: (async (): Promise<Created> => {
        this.state.creating = true;
        try {
          const created = await api<Conversation & { agents?: AgentInfo[] }>("/api/conversations", {
            method: "POST",
            body: {},
          });
          if (gen !== this.generation) {
            this.onConversationsChanged();
            return { id: created.conversation_id, viewGen: null };
          }
          this.reset(created.conversation_id, created.title);
          if (created.agents?.length) {
            this.state.agents = created.agents;
            this.state.masterAgentId = created.agents[0]!.agent_id;
            this.masterDisplayName = created.agents[0]!.display_name;
          }
          this.join();
          this.onConversationsChanged();
          return { id: created.conversation_id, viewGen: this.generation };
        } finally {
          if (this.creating?.gen === gen) this.creating = null;
          if (gen === this.generation) this.state.creating = false; // (a view change cleared it already)
        }
      })(),
    };
    this.creating = entry;
    return entry.promise;
  }

  /** Stop the running task(s): the master's first, as the server reports it. */
  async stop(): Promise<void> {
    const cid = this.state.conversationId;
    if (!cid) return;
    this.state.stopping = true;
    const ids = new Set<string>(this.state.running);
    try {
      const status = await api<RunningStatus>(`/api/conversations/${encodeURIComponent(cid)}/running-status`);
      if (status.main_task_id) ids.add(status.main_task_id);
    } catch {
      // use what we know
    }
    for (const id of ids) {
      try {
        // Offline, the socket would only buffer the stop until its ack timed out.
        if (!this.socket.connected) throw new Error("offline");
        const ack = (await this.socket.timeout(10000).emitWithAck("stop_task", { task_id: id })) as SendAnswer;
        if (ack?.success === false && ack.code !== "task_not_running") {
          await api(`/api/tasks/${encodeURIComponent(id)}/cancel`, { method: "POST" }).catch(() => undefined);
        }
      } catch {
        await api(`/api/tasks/${encodeURIComponent(id)}/cancel`, { method: "POST" }).catch(() => undefined);
      }
      const t = this.tracks.get(id);
      if (t && !t.final) this.fetchFrom(t);
    }
    this.pollWhileOffline();
    if (this.state.running.length === 0) this.state.stopping = false;
  }
}
