// The events of the open conversation, in: each socket event (or replayed task log event) routed, in order,
// to the team panel or the timeline reducer (./timeline.ts); the end of a task refreshes what depends on it.
// The facade (./index.ts) extends it with opening conversations and the user's actions.

import { reactive } from "vue";
import { str } from "../history";
import type { ChatEvent } from "../types";
import type { ServerEvent } from "../generated/events";
import { fetchUsage } from "../usage";
import { Agents } from "./agents";
import type { SocketLike } from "./send";
import { restoreSent } from "./sent";
import { emptyState, type ChatState } from "./state";
import { TaskLogs, type TaskTrack } from "./taskLogs";
import { Timeline, type Data } from "./timeline";

type FinalType = "task_complete" | "task_stopped" | "error";
const FINAL = new Set<string>(["task_complete", "task_stopped", "error"]);
const isFinal = (type: string): type is FinalType => FINAL.has(type);

export abstract class ChatEvents {
  state: ChatState = reactive(emptyState()) as ChatState;
  readonly team = new Agents(this.state);
  readonly timeline = new Timeline(this.state, this.team);
  readonly logs = new TaskLogs({
    apply: (ev) => this.apply(ev),
    changed: () => this.updateRunning(),
    holding: () => this.holding,
    online: () => this.socket.connected,
    generation: () => this.generation,
    conversationId: () => this.state.conversationId,
  });
  protected holding = false; // history is loading: buffer task events, apply them afterwards
  protected ephemeral: ChatEvent[] = [];
  protected generation = 0; // bumped when another conversation opens: late answers are dropped
  protected queuedAtStop = 0; // the master's queue when the user pressed Stop: those messages start next
  onConversationsChanged: () => void = () => {};

  constructor(protected socket: SocketLike) {}

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
    this.logs.offer(this.logs.track(taskId, str(d.agent_id) || undefined), idx, ev);
  }

  /** Whether a task's events belong in the main timeline: the master's, or a sub-agent's turn with the user. */
  protected foreground(t: TaskTrack | undefined): boolean {
    return !t || this.team.isMaster(t.agentId) || t.userFacing;
  }

  protected updateRunning(): void {
    const ids = [...this.logs.tracks.values()].filter((t) => !t.final && this.foreground(t)).map((t) => t.id);
    const cur = this.state.running;
    if (ids.length !== cur.length || ids.some((id, i) => cur[i] !== id)) this.state.running = ids;
    if (ids.length === 0) this.state.stopping = false;
  }

  /** Route one event, in order: the team panel's part here, the timeline's part to the reducer. */
  protected apply(ev: ChatEvent): void {
    const d = ev.data ?? {};
    const agentId = str(d.agent_id) || undefined;
    const taskId = str(d.task_id) || undefined;
    if (agentId) this.state.agentActivity[agentId] = (this.state.agentActivity[agentId] ?? 0) + 1;
    const track = taskId ? this.logs.tracks.get(taskId) : undefined;
    if (track && !this.foreground(track)) {
      // A sub-agent working in the background: the team panel shows it. The main timeline
      // takes only what involves the user: its questions, and messages of the user to it.
      if (ev.type === "tool_start" && str(d.name) === "ask_user") {
        this.timeline.noteAskCall(agentId, str(d.tool_call_id));
        return;
      } else if (ev.type === "ask_user") track.userFacing = true;
      else if (ev.type === "user_message" && str(d.source) === "user" && str(d.visibility) !== "hidden") {
        track.userFacing = true;
      } else if (ev.type === "agent_state") {
        this.team.onState(d, agentId);
        return;
      } else if (isFinal(ev.type)) {
        this.onFinal(ev.type, d, taskId, agentId, true);
        return;
      } else {
        return;
      }
      this.updateRunning();
    }
    if (ev.type === "agent_state" || ev.type === "pending_count") this.team.onState(d, agentId);
    else if (ev.type === "sub_agent_waiting") {
      const count = Number(d.count ?? 0);
      const tasks = Array.isArray(d.tasks) ? (d.tasks as NonNullable<ChatState["subAgentWaiting"]>["tasks"]) : [];
      this.state.subAgentWaiting = count > 0 ? { count, tasks } : null;
    } else if (isFinal(ev.type)) this.onFinal(ev.type, d, taskId, agentId);
    else {
      if (ev.type === "route") {
        this.team.refreshSoon(); // a queued message shows in its agent's queue count
        if (str(d.message_id)) this.showOthersMessage(str(d.message_id));
      }
      this.timeline.apply(ev as unknown as ServerEvent, agentId, taskId); // the wire's data, typed by the catalogue
    }
  }

  protected onFinal(type: FinalType, d: Data, taskId: string | undefined, agentId?: string, quiet = false): void {
    const t = taskId ? this.logs.tracks.get(taskId) : undefined;
    if (t) this.logs.markFinal(t);
    if (quiet) {
      if (d.has_running_sub_agents === false) this.state.subAgentWaiting = null;
      this.team.refreshSoon();
      return;
    }
    this.state.background = {
      subAgents: d.has_running_sub_agents === true,
      commands: d.has_running_background_commands === true,
    };
    if (!this.state.background.subAgents) this.state.subAgentWaiting = null;
    this.timeline.finish(type, d, taskId, agentId, type === "task_stopped" ? this.queuedAtStop : 0);
    void this.refreshUsage();
    this.team.refreshSoon();
    this.onConversationsChanged();
  }

  /** The conversation's usage, read again once a turn has ended (its task_complete carries its own). */
  async refreshUsage(): Promise<void> {
    const cid = this.state.conversationId;
    if (!cid) return;
    const usage = await fetchUsage(cid);
    if (usage && cid === this.state.conversationId) this.state.usage = usage;
  }

  /** A message routed that this tab did not send (another tab's, or a device's): it shows, queued, from
   * `GET .../queued` until its agent reads it (its `user_message` then takes the queued mark off). */
  private showOthersMessage(messageId: string): void {
    const cid = this.state.conversationId;
    if (!cid || this.timeline.message(messageId) || this.timeline.known(messageId)) return;
    const gen = this.generation;
    void restoreSent(cid, this.timeline, () => gen !== this.generation);
  }
}
