import { describe, expect, it } from "vitest";
import { failedTaskLines } from "../src/chat/load";

describe("the failed tasks' lines after a reload", () => {
  it("says why each of the master's failed tasks ended, where it ended", () => {
    const lines = failedTaskLines([
      { task_id: "t1", status: "succeeded", conversation_id: "c", agent_id: "m" },
      { task_id: "t2", status: "failed", conversation_id: "c", agent_id: "m", finished_at: "2026-01-01T00:00:00Z",
        error: { code: "interrupted", message: "the server process running this task stopped" } },
      { task_id: "t3", status: "failed", conversation_id: "c", agent_id: "sub" },
    ], "m");
    expect(lines.map((l) => [l.key, l.text])).toEqual([
      ["s:t2:error", "the server process running this task stopped (interrupted)"],
    ]);
    expect(lines[0]!.ts).toBe(Date.parse("2026-01-01T00:00:00Z"));
  });
});
