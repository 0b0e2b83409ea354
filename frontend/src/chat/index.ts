// The open conversation, as the chat view sees it: a facade over the timeline reducer
// (./timeline.ts), the task event logs (./taskLogs.ts), the chips (./suggestions.ts), the sends and
// stops (./send.ts) and the remembered sends (./sent.ts). It loads stored history, attaches to the active
// tasks and acts for the user; the events coming in are routed by ./events.ts.

import { api, ApiError } from "../api";
import type { AgentInfo, AskItem, Conversation, SendAnswer, TaskSummary, TimelineItem, UserItem } from "../types";
import { deliver, editMessage, failure, regenerate, retryable, stopTasks } from "./send";
import { ChatEvents } from "./events";
import { FINAL_STATUSES } from "./taskLogs";
import { historyItems } from "../history";
import { fetchConversation, mergedHistory, withEarlier } from "./load";
import { masterPages, readBlock } from "./pages";
import { rememberSent, restoreSent } from "./sent";
import { restoreChips } from "./suggestions";
import { emptyState } from "./state";
import { newId } from "./timeline";

export type { SocketLike } from "./send";
export type { Suggestions } from "./timeline";

/** A conversation created at a first send; `viewGen` is the generation of the view that shows it,
 * null when the user had moved on (another conversation, or another new chat) before it was created. */
type Created = { id: string; viewGen: number | null };

export class Chat extends ChatEvents {
  /** The conversation being created for the fresh view of generation `gen`: sends made meanwhile in that view share it. */
  private creating: { gen: number; promise: Promise<Created> } | null = null;
  /** Where the master's loaded history starts (./pages.ts): the message to read the earlier block before, and the
   * side items (sub-agents' parts, status lines, summaries) older than the loaded history, which wait for it. */
  private earlier: { before: string | null; side: TimelineItem[] } = { before: null, side: [] };
  private readingEarlier = false;

  // ---- opening a conversation -----------------------------------------------------

  reset(conversationId: string | null, title = ""): void {
    this.generation++;
    this.logs.clear();
    this.timeline.clear();
    this.ephemeral = [];
    this.holding = false;
    this.earlier = { before: null, side: [] };
    this.readingEarlier = false;
    const { textMismatches: _kept, ...fresh } = emptyState();
    Object.assign(this.state, fresh, { conversationId, title });
  }

  /** Open a conversation: join its room, load its history, then attach to its active tasks. */
  async open(conversationId: string, title = ""): Promise<void> {
    this.reset(conversationId, title);
    const gen = this.generation;
    this.state.loading = true;
    this.holding = true;
    this.join();
    try {
      const { history, tasks, agents } = await fetchConversation(conversationId);
      if (gen !== this.generation) return;
      this.state.masterAgentId = history.agent_id;
      this.team.masterDisplayName = history.display_name;
      this.state.agents = agents;
      this.updateRunning();
      const merged = await mergedHistory(conversationId, history, agents, tasks);
      if (gen !== this.generation) return;
      this.timeline.loadHistory(merged.items, merged.messageIds);
      this.earlier = { before: history.before, side: merged.side };
      this.state.hasEarlier = history.before !== null;
      for (const t of tasks) {
        this.logs.known.add(t.task_id);
        if (!FINAL_STATUSES.has(t.status)) this.logs.track(t.task_id, t.agent_id);
        else this.logs.finished.set(t.task_id, t.agent_id);
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
    void this.team.refresh();
    // Replay every task that is still active (and any whose events came in meanwhile) from
    // its start: what history already shows is deduped away.
    for (const t of this.logs.tracks.values()) {
      this.logs.drain(t);
      if (!t.final) void this.logs.fetchFrom(t);
    }
    const held = this.ephemeral;
    this.ephemeral = [];
    for (const ev of held) this.apply(ev);
    void this.restoreSuggestions(gen);
    void this.refreshUsage();
    void restoreSent(conversationId, this.timeline, () => gen !== this.generation);
  }

  /** Read the master's block of history before what is loaded and put it in front, merged with its side items
   * (./load.ts withEarlier): the reader reached the start of what is loaded. A failed read is asked again at the
   * reader's next scroll. */
  async loadEarlier(): Promise<void> {
    const cid = this.state.conversationId;
    const before = this.earlier.before;
    if (!cid || !before || this.readingEarlier) return;
    const gen = this.generation;
    this.readingEarlier = true;
    try {
      const block = await readBlock(masterPages(cid), before);
      if (gen !== this.generation) return;
      const master = historyItems(block.data, block.display_name);
      const merged = withEarlier(block, master, this.earlier.side);
      this.earlier = { before: block.before, side: merged.side };
      this.timeline.prependHistory(merged.items, master.messageIds);
      this.state.hasEarlier = block.before !== null;
      this.state.earlierError = "";
    } catch (err) {
      // said, not swallowed: the reader's next "Show earlier" or scroll to the top asks again
      if (gen === this.generation) {
        const why = err instanceof ApiError ? err.message : String(err);
        this.state.earlierError = `Earlier messages could not be loaded (${why}).`;
      }
    } finally {
      if (gen === this.generation) this.readingEarlier = false;
    }
  }

  /** The latest reply's chips survive a reload (see ./suggestions.ts). */
  private restoreSuggestions(gen: number): Promise<void> {
    return restoreChips(this.logs, this.timeline, this.state, () => gen !== this.generation || !!this.state.suggestions);
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
    this.logs.fetchActive();
    this.recoverSuggestions(gen);
    try {
      const tasks = await api<{ data: TaskSummary[] }>(`/api/tasks?conversation_id=${encodeURIComponent(cid)}`);
      if (gen !== this.generation) return;
      for (const t of tasks.data) {
        const fresh = !this.logs.known.has(t.task_id) && !this.logs.tracks.has(t.task_id);
        this.logs.known.add(t.task_id);
        if (fresh) void this.logs.fetchFrom(this.logs.track(t.task_id, t.agent_id));
      }
    } catch {
      // the next reconnect or event tries again
    }
    void this.team.refresh();
  }

  /** Chips come after their task's final event, so a drop right after it loses them: read on
   * from the watermark of the last task that finished here, or from the log of the last one
   * that had finished before the conversation opened. */
  private recoverSuggestions(gen: number): void {
    if (this.state.suggestions) return;
    const finished = [...this.logs.tracks.values()].filter((t) => t.final && this.foreground(t));
    const last = finished[finished.length - 1];
    if (last) void this.logs.fetchFrom(last);
    else void this.restoreSuggestions(gen);
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
          const answer = await deliver(this.socket, { conversation_id: cid, message, client_message_id: newId() });
          this.onConversationsChanged();
          return answer;
        }
      } catch (err) {
        const failed = failure(err);
        // Keep what the user wrote on screen, marked as not sent, unless they moved on meanwhile.
        if (before === this.generation) {
          this.timeline.push({ kind: "user", key: `c:${newId()}`, text: message, failed: failed.error || failed.code,
            retryable: retryable(failed) });
        }
        return failed;
      }
    }
    const gen = this.generation;
    const clientMessageId = newId();
    this.state.suggestions = null;
    if (ask) ask.answer = message;
    const item = this.timeline.push({ kind: "user", key: `c:${clientMessageId}`, clientMessageId, text: message,
      pending: true, answersQuestion: ask?.questionId || undefined, ts: Date.now() }) as UserItem;
    const payload: Record<string, string> = { conversation_id: cid, message, client_message_id: clientMessageId };
    if (ask?.questionId) payload.question_id = ask.questionId;
    const answer = await deliver(this.socket, payload);
    if (gen !== this.generation) return answer;
    if (answer?.code === "duplicate_in_progress") return answer; // the first send is still being routed
    item.pending = false;
    if (!answer || answer.success === false) {
      item.failed = answer.error || answer.code || "not sent";
      item.retryable = !ask && retryable(answer);
      if (ask) ask.answer = answer.code === "stale_question" ? "(this question is no longer open)" : undefined;
      return answer;
    }
    item.route = answer.route ?? item.route;
    item.delivery = answer.delivery ?? item.delivery;
    if (answer.message_id) {
      this.timeline.bindMessageId(item, answer.message_id);
      if (!ask) rememberSent(cid, answer.message_id, message); // (an answer shows with its question)
    }
    if (answer.agent_id && !this.team.isMaster(answer.agent_id)) {
      item.targetAgent = answer.target_agent || this.team.agentName(answer.agent_id);
    }
    if (answer.task_id) {
      const agentId = answer.agent_id ?? undefined; // null until routed
      const t = this.logs.track(answer.task_id, agentId);
      if (!this.team.isMaster(agentId) && !t.userFacing) {
        t.userFacing = true;
        this.updateRunning();
      }
      if (!this.socket.connected) {
        void this.logs.fetchFrom(t);
        this.logs.pollWhileOffline();
      }
    }
    this.onConversationsChanged();
    return answer;
  }

  /** Send a message that failed again: its bubble goes, the new send shows its own. */
  retry(item: UserItem): Promise<SendAnswer> {
    const i = this.state.items.indexOf(item);
    if (i >= 0) this.state.items.splice(i, 1);
    return this.send(item.text);
  }

  /** Back online: the messages that failed for want of a connection go out again, in order. */
  async retryUnsent(): Promise<void> {
    const unsent = this.state.items.filter((it): it is UserItem => it.kind === "user" && !!it.failed && !!it.retryable);
    for (const it of unsent) await this.retry(it);
  }

  /** A new answer to the last user message; the old one stays in the history. */
  async regenerate(): Promise<SendAnswer> {
    const cid = this.state.conversationId;
    const answer = cid ? await regenerate(cid) : failure(new Error("no conversation"));
    if (answer.task_id) this.logs.track(answer.task_id, answer.agent_id ?? undefined);
    return answer;
  }

  /** A new version of the user's turn that starts with `messageId`, with `text` (docs/API.md, "Versions of a turn"). */
  async edit(messageId: string, text: string): Promise<SendAnswer> {
    const cid = this.state.conversationId;
    const answer = cid ? await editMessage(cid, messageId, text) : failure(new Error("no conversation"));
    if (answer.task_id) this.logs.track(answer.task_id, answer.agent_id ?? undefined);
    this.onConversationsChanged();
    return answer;
  }

  /** The open conversation's id, created first in a fresh view (an upload before the first message). */
  async ensureConversation(): Promise<string | null> {
    if (this.state.conversationId) return this.state.conversationId;
    try {
      const created = await this.createConversation();
      return created.viewGen === this.generation ? created.id : null;
    } catch {
      return null;
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
            this.team.masterDisplayName = created.agents[0]!.display_name;
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
    this.queuedAtStop = this.state.agents.find((a) => a.agent_id === this.state.masterAgentId)?.pending_count ?? 0;
    for (const id of await stopTasks(this.socket, cid, this.state.running)) {
      const t = this.logs.tracks.get(id);
      if (t && !t.final) void this.logs.fetchFrom(t);
    }
    this.logs.pollWhileOffline();
    if (this.state.running.length === 0) this.state.stopping = false;
  }
}
