// Task logs: each logged event applied once and in index order, however it arrives.
import { describe, expect, it } from "vitest";
import { TaskLogs } from "../src/chat/taskLogs";
import { chipCandidates } from "../src/chat/suggestions";
import type { ChatEvent } from "../src/types";

function make() {
  const applied: number[] = [];
  let holding = true;
  const logs = new TaskLogs({
    apply: (ev: ChatEvent) => applied.push(ev.data.idx as number),
    changed: () => {},
    holding: () => holding,
    online: () => true,
    generation: () => 1,
    conversationId: () => "c1",
  });
  const ev = (idx: number): ChatEvent => ({ type: "text_chunk", data: { idx } });
  return { logs, applied, ev, release: () => (holding = false) };
}

describe("TaskLogs", () => {
  it("holds events while history loads and applies them in index order, each once", () => {
    const { logs, applied, ev, release } = make();
    const t = logs.track("t1", "a1");
    for (const i of [2, 0, 1, 1, 0, 3]) logs.offer(t, i, ev(i));
    expect(applied).toEqual([]);
    release();
    logs.drain(t);
    expect(applied).toEqual([0, 1, 2, 3]);
    logs.offer(t, 2, ev(2)); // a socket echo of an applied event
    logs.offer(t, 4, ev(4));
    expect(applied).toEqual([0, 1, 2, 3, 4]);
    expect(t.next).toBe(5);
  });

  it("a task that had finished before the view opened starts final", () => {
    const { logs } = make();
    logs.finished.set("t9", "a1");
    expect(logs.track("t9").final).toBe(true);
    expect(logs.track("t10").final).toBe(false);
  });
});

describe("chip candidates", () => {
  it("are the last three finished tasks and the master's last, newest first", () => {
    const finished: [string, string][] = [["m1", "M"], ["s1", "S"], ["s2", "S"], ["s3", "S"], ["s4", "S"]];
    expect(chipCandidates(finished, "M")).toEqual(["s4", "s3", "s2", "m1"]);
    expect(chipCandidates([["m1", "M"], ["m2", "M"]], "M")).toEqual(["m2", "m1"]);
  });
});
