import { describe, expect, it } from "vitest";
import { pastedName, splitAttachments, withAttachments } from "../src/attachments";

describe("attachments named in the message", () => {
  it("round-trips the user's text and the files' names", () => {
    const content = withAttachments("look at these", ["notes.txt", "a b, c.png"]);
    expect(content).toBe("look at these\n\n[Attached to this message: `/workspace/notes.txt`, `/workspace/a b, c.png`]");
    expect(splitAttachments(content)).toEqual({ text: "look at these", files: ["notes.txt", "a b, c.png"] });
  });

  it("leaves a message without the line alone, and a message of files only has no text", () => {
    expect(splitAttachments("plain [Attached to this message: x]")).toEqual({ text: "plain [Attached to this message: x]", files: [] });
    expect(splitAttachments(withAttachments("", ["x.txt"]))).toEqual({ text: "", files: ["x.txt"] });
  });

  it("gives each pasted image its own name", () => {
    const img = new File(["x"], "image.png", { type: "image/png" });
    expect(pastedName(img, new Date("2026-12-02T03:04:05Z"))).toMatch(/^pasted-20261202-030405-[a-z0-9]{1,4}\.png$/);
    expect(pastedName(new File(["x"], "report.pdf"))).toBe("report.pdf");
  });
});
