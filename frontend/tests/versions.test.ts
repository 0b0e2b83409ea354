import { describe, expect, it } from "vitest";
import { browsingOlder, versionedView } from "../src/chat/versions";
import type { TimelineItem } from "../src/types";

const user = (id: string, extra: object = {}): TimelineItem =>
  ({ kind: "user", key: id, messageId: id, text: id, ...extra }) as TimelineItem;
const reply = (id: string): TimelineItem => ({ kind: "assistant", key: id, messageId: id, text: id, done: true }) as TimelineItem;
const keys = (items: TimelineItem[], choice: Record<string, number> = {}) =>
  versionedView(items, choice).map((s) => s.item.key + (s.version ? ` ${s.version.index + 1}/${s.version.count}` : ""));

describe("versions of a turn", () => {
  it("without versions shows every item", () => {
    expect(keys([user("u1"), reply("a1")])).toEqual(["u1", "a1"]);
  });

  it("a regenerate shows the newest answer, the older one by choice, never the hidden copy itself", () => {
    const items = [user("u1"), reply("a1"), user("h1", { versionOf: "u1", hiddenCopy: true }), reply("a2")];
    expect(keys(items)).toEqual(["h1 2/2", "a2"]);
    expect(keys(items, { u1: 0 })).toEqual(["u1 1/2", "a1"]);
  });

  it("an edit of an earlier turn holds the turns that followed the older version", () => {
    const items = [user("u1"), reply("a1"), user("u2"), reply("a2"), user("e1", { versionOf: "u1" }), reply("a3")];
    expect(keys(items)).toEqual(["e1 2/2", "a3"]);
    expect(keys(items, { u1: 0 })).toEqual(["u1 1/2", "a1", "u2", "a2"]);
  });

  it("versions nest: a later turn of the newest version has versions of its own", () => {
    const items = [user("u1"), reply("a1"), user("e1", { versionOf: "u1" }), reply("a2"), user("u3"), reply("a3"),
      user("e3", { versionOf: "u3" }), reply("a4")];
    const shown = versionedView(items, {});
    expect(shown.map((s) => s.item.key)).toEqual(["e1", "a2", "e3", "a4"]);
    expect(browsingOlder(shown)).toBe(false);
    expect(browsingOlder(versionedView(items, { u3: 0 }))).toBe(true);
  });
});
