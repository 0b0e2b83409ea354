import { describe, expect, it } from "vitest";
import { liveItem, nextLiveReply } from "../src/chat/liveReply";

describe("a sub-agent's reply in progress", () => {
  it("grows with its chunks and gives way to the stored reply", () => {
    let live = nextLiveReply(null, "ai_message_start", { message_id: "m1" });
    live = nextLiveReply(live, "text_chunk", { message_id: "m1", content: "Hel" });
    live = nextLiveReply(live, "text_chunk", { message_id: "m1", content: "lo" });
    expect(liveItem(live, new Set(), "Coder")?.text).toBe("Hello");
    live = nextLiveReply(live, "text_end", { message_id: "m1" });
    expect(liveItem(live, new Set(["m1"]), "Coder")).toBeNull();
    expect(nextLiveReply(live, "task_complete", {})).toBeNull();
  });
});
