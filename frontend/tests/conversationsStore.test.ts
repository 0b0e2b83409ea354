import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Conversation } from "../src/types";

const calls: string[] = [];
/** Requests waiting for their answer, oldest first, each answered by the test (one may overtake another). */
const pending: { path: string; resolve: (body: unknown) => void }[] = [];
vi.mock("../src/api", () => ({
  api: (path: string, opts: { method?: string } = {}) => {
    calls.push(opts.method ? `${opts.method} ${path}` : path);
    if (opts.method) return Promise.resolve({});
    return new Promise((resolve) => pending.push({ path, resolve }));
  },
  download: () => Promise.resolve(),
  unsupported: () => false,
}));

const { useConversations, PAGE_SIZE } = await import("../src/conversations");

function conv(id: string, sec: number): Conversation {
  const iso = `2026-01-01T00:${String(Math.floor(sec / 60)).padStart(2, "0")}:${String(sec % 60).padStart(2, "0")}Z`;
  return { conversation_id: id, title: id, created_at: iso, updated_at: iso };
}
const ids = (cs: Conversation[]) => cs.map((c) => c.conversation_id);
const first = (q = "") => `/api/conversations?limit=${PAGE_SIZE}${q ? `&q=${q}` : ""}`;
const after = (cursor: string, q = "") => `${first(q)}&before=${cursor}`;

/** Answer the oldest waiting request for `path` (`newest`: the newest one). */
async function answer(path: string, body: unknown, newest = false): Promise<void> {
  const waiting = pending.filter((p) => p.path === path);
  const req = newest ? waiting[waiting.length - 1] : waiting[0];
  if (!req) throw new Error(`no request for ${path}; asked: ${calls.join(", ")}`);
  pending.splice(pending.indexOf(req), 1);
  req.resolve(body);
  await new Promise((r) => setTimeout(r, 0));
}

function store() {
  return useConversations({ conversationId: null, title: "" } as never, () => undefined);
}

beforeEach(() => {
  calls.length = 0;
  pending.length = 0;
});

describe("the conversation list's pages", () => {
  it("loads the next page after the loaded ones, until the last", async () => {
    const s = store();
    void s.load();
    await answer(first(), { data: [conv("b", 2), conv("a", 1)], next_cursor: "k1" });
    expect(s.nextCursor.value).toBe("k1");
    void s.loadMore();
    void s.loadMore(); // one page at a time
    expect(calls.filter((c) => c === after("k1"))).toHaveLength(1);
    await answer(after("k1"), { data: [conv("z", 0)], next_cursor: null });
    expect(ids(s.conversations.value)).toEqual(["b", "a", "z"]);
    expect(s.nextCursor.value).toBeNull();
    await s.loadMore();
    expect(calls).toHaveLength(2);
  });

  it("keeps the pages loaded when a change reloads the first page, without duplicates", async () => {
    const s = store();
    void s.load();
    await answer(first(), { data: [conv("c", 3), conv("b", 2)], next_cursor: "k1" });
    void s.loadMore();
    await answer(after("k1"), { data: [conv("a", 1), conv("z", 0)], next_cursor: "k2" });
    void s.load(); // "a" was renamed: it is the newest now
    await answer(first(), { data: [conv("a", 9), conv("c", 3)], next_cursor: "k3" });
    expect(ids(s.conversations.value)).toEqual(["a", "c", "b", "z"]);
    expect(s.nextCursor.value).toBe("k2");
  });

  it("shows a conversation once when its old page arrives after a refresh brought it to the top", async () => {
    const s = store();
    void s.load();
    await answer(first(), { data: [conv("c", 3), conv("b", 2)], next_cursor: "k1" });
    void s.loadMore();
    void s.load();
    await answer(first(), { data: [conv("a", 9), conv("c", 3)], next_cursor: "k3" });
    await answer(after("k1"), { data: [conv("a", 1), conv("z", 0)], next_cursor: "k2" });
    expect(ids(s.conversations.value)).toEqual(["a", "c", "b", "z"]);
  });

  it("starts a search's own list, and drops what the earlier list's pages answer later", async () => {
    const s = store();
    void s.load();
    await answer(first(), { data: [conv("b", 2), conv("a", 1)], next_cursor: "k1" });
    void s.loadMore();
    s.onSearch("zoo");
    expect(ids(s.conversations.value)).toEqual(["b", "a"]); // the old list stays until the new one is in
    await s.loadMore(); // the old list's cursor is not the search's
    expect(calls).not.toContain(after("k1", "zoo"));
    await answer(after("k1"), { data: [conv("x", 0)], next_cursor: null });
    await answer(first("zoo"), { data: [conv("zoo1", 5)], next_cursor: "s1" });
    expect(ids(s.conversations.value)).toEqual(["zoo1"]);
    void s.loadMore();
    await answer(after("s1", "zoo"), { data: [conv("zoo0", 4)], next_cursor: null });
    expect(ids(s.conversations.value)).toEqual(["zoo1", "zoo0"]);
  });

  it("ignores a first page older than the one shown", async () => {
    const s = store();
    void s.load();
    void s.load();
    await answer(first(), { data: [conv("b", 2), conv("a", 1)], next_cursor: null }, true);
    await answer(first(), { data: [conv("a", 1)], next_cursor: null });
    expect(ids(s.conversations.value)).toEqual(["b", "a"]);
  });

  it("takes a deleted conversation out of the loaded pages at once", async () => {
    const s = store();
    void s.load();
    await answer(first(), { data: [conv("b", 2)], next_cursor: "k1" });
    void s.loadMore();
    await answer(after("k1"), { data: [conv("a", 1)], next_cursor: "k2" });
    void s.remove("a");
    await new Promise((r) => setTimeout(r, 0));
    expect(ids(s.conversations.value)).toEqual(["b"]);
  });
});
