import { describe, expect, it } from "vitest";
import { appendPage, mergeFirstPage, precedes } from "../src/conversationPages";
import type { Conversation } from "../src/types";

/** A conversation whose last activity is `sec` seconds (a fraction allowed) after a fixed minute. */
function conv(id: string, sec: number): Conversation {
  const whole = Math.floor(sec);
  const frac = Math.round((sec - whole) * 1e6);
  const iso = `2026-01-01T00:00:${String(whole).padStart(2, "0")}${frac ? `.${String(frac).padStart(6, "0")}` : ""}Z`;
  return { conversation_id: id, title: id, created_at: iso, updated_at: iso };
}
const ids = (cs: Conversation[]) => cs.map((c) => c.conversation_id);
/** The server's list, newest first: `n` conversations c<n-1> (newest) .. c0, one second apart. */
const server = (n: number) => Array.from({ length: n }, (_, i) => conv(`c${String(n - 1 - i).padStart(3, "0")}`, n - 1 - i));

describe("the order of the list", () => {
  it("puts later activity first, a whole second after its fractions, and ties by the smaller id", () => {
    expect(precedes(conv("a", 5), conv("b", 4.5))).toBe(true);
    expect(precedes(conv("a", 5.5), conv("b", 5))).toBe(true); // "…:05Z" is before "…:05.500000Z" as text
    expect(precedes(conv("b", 5), conv("a", 5.5))).toBe(false);
    expect(precedes(conv("a", 5), conv("b", 5))).toBe(true);
    expect(precedes(conv("b", 5), conv("a", 5))).toBe(false);
  });
});

describe("loading the next page", () => {
  it("appends it and takes its cursor", () => {
    const all = server(6);
    const next = appendPage({ items: all.slice(0, 3), cursor: "p1" }, { data: all.slice(3), next_cursor: null });
    expect(ids(next.items)).toEqual(ids(all));
    expect(next.cursor).toBeNull();
  });

  it("keeps a conversation a refresh brought to the top where it is, not twice", () => {
    const moved = conv("c001", 30);
    const list = { items: [moved, ...server(6).slice(0, 3)], cursor: "p1" };
    const next = appendPage(list, { data: [conv("c002", 2), conv("c001", 1)], next_cursor: "p2" });
    expect(ids(next.items)).toEqual(["c001", "c005", "c004", "c003", "c002"]);
    expect(next.cursor).toBe("p2");
  });

  it("reads an older server's answer without a cursor as the last page", () => {
    expect(appendPage({ items: [], cursor: "p1" }, { data: [conv("a", 1)] }).cursor).toBeNull();
  });
});

describe("a fresh first page over the loaded pages", () => {
  const loaded = { items: server(9), cursor: "p3" }; // three pages of three, more to come

  it("keeps the pages below it, so the user's place in a long list survives a new conversation", () => {
    const page = [conv("new", 60), ...server(9).slice(0, 2)];
    const next = mergeFirstPage(loaded, { data: page, next_cursor: "q1" });
    expect(ids(next.items)).toEqual(["new", ...ids(server(9))]);
    expect(next.cursor).toBe("p3");
  });

  it("shows a conversation that became active once, at the top", () => {
    const page = [conv("c002", 60), conv("c008", 8), conv("c007", 7)];
    const next = mergeFirstPage(loaded, { data: page, next_cursor: "q1" });
    expect(ids(next.items)).toEqual(["c002", "c008", "c007", "c006", "c005", "c004", "c003", "c001", "c000"]);
    expect(new Set(ids(next.items)).size).toBe(next.items.length);
  });

  it("drops a loaded conversation the page should hold and does not (deleted elsewhere)", () => {
    const page = [conv("c008", 8), conv("c006", 6), conv("c005", 5)];
    const next = mergeFirstPage(loaded, { data: page, next_cursor: "q1" });
    expect(ids(next.items)).toEqual(["c008", "c006", "c005", "c004", "c003", "c002", "c001", "c000"]);
  });

  it("starts anew when the whole page is newer than the list's head: what lies between is unknown", () => {
    const page = [conv("n3", 63), conv("n2", 62), conv("n1", 61)];
    expect(mergeFirstPage(loaded, { data: page, next_cursor: "q1" })).toEqual({ items: page, cursor: "q1" });
  });

  it("is the whole list when it is the last page", () => {
    const page = server(2);
    expect(mergeFirstPage(loaded, { data: page, next_cursor: null })).toEqual({ items: page, cursor: null });
    expect(mergeFirstPage(loaded, { data: [] })).toEqual({ items: [], cursor: null });
  });

  it("is the list when nothing was loaded yet", () => {
    const page = server(3);
    expect(mergeFirstPage({ items: [], cursor: null }, { data: page, next_cursor: "q1" })).toEqual({ items: page, cursor: "q1" });
  });

  it("keeps a complete list complete", () => {
    const page = [conv("new", 60), ...server(4).slice(0, 2)];
    const next = mergeFirstPage({ items: server(4), cursor: null }, { data: page, next_cursor: "q1" });
    expect(ids(next.items)).toEqual(["new", "c003", "c002", "c001", "c000"]);
    expect(next.cursor).toBeNull();
  });
});
