import { describe, expect, it } from "vitest";
import { noticeView } from "../src/notices";
import type { NoticeItem } from "../src/types";

function notice(text: string, source: string, extra: Partial<NoticeItem> = {}): NoticeItem {
  return { kind: "notice", key: "k", messageId: "m", text, source, ...extra } as NoticeItem;
}

describe("notices as the user reads them", () => {
  it("a background command: no command id, the command and its last output line, output fenced", () => {
    const v = noticeView(notice(
      "[Background command d21b8885 succeeded, exit code 0, 1.2 s] `ls -la`\nOutput (tail):\ntotal 4\nREADME.md",
      "background_command",
    ));
    expect(v.label).toBe("Command succeeded");
    expect(v.detail).toBe("`ls -la` → `README.md`");
    expect(v.meta).toBe("1.2 s");
    expect(v.body).not.toContain("d21b8885");
    expect(v.body).toContain("```text\ntotal 4\nREADME.md\n```");
  });

  it("a failed command says its exit code", () => {
    const v = noticeView(notice("[Background command abc failed, exit code 2, 0.1 s] `false`\n(no output)",
      "background_command"));
    expect([v.ok, v.label, v.body.endsWith("No output.")]).toEqual([false, "Command failed (exit 2)", true]);
  });

  it("a sub-agent's report keeps its Markdown for the renderer", () => {
    const v = noticeView(notice("[Sub-agent InfoAgent_1 succeeded in 2.0 s]\nResult:\nAll **12** tests pass.",
      "sub_agent"));
    expect([v.label, v.detail, v.body]).toEqual(["InfoAgent_1 succeeded", "All **12** tests pass.",
      "All **12** tests pass."]);
  });

  it("another agent's question: no question id and no tool hint", () => {
    const v = noticeView(notice(
      "[Question q_543052894f92 from InfoAgent_1] Which year?\n(Reply with your answer tool, question_id=q_543052894f92.)",
      "agent", { from: "InfoAgent_1" },
    ));
    expect([v.label, v.detail, v.body]).toEqual(["InfoAgent_1 asks", "Which year?", "Which year?"]);
  });

  it("an answer and a plain message from an agent", () => {
    expect(noticeView(notice("[Answer to q_1 from MasterAgent] 2024", "agent")).label).toBe("MasterAgent answers");
    const v = noticeView(notice("[Message from CoderAgent_1] done", "agent"));
    expect([v.label, v.detail]).toEqual(["From CoderAgent_1", "done"]);
  });
});
