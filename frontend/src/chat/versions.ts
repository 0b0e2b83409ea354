// Versions of a turn (docs/API.md, "Versions of a turn"): Edit and Regenerate add a version of a user's
// turn instead of piling up. The timeline keeps every item in order; this view shows, for each turn with
// versions, the chosen one (the newest unless the user picked another with ‹ ›). A version runs from its
// user message up to the next version of the same turn (or the end): a version of an earlier turn holds
// the turns that followed it too, as a branch does.

import type { TimelineItem, UserItem } from "../types";

export interface VersionInfo {
  /** The message id of the turn's first version: the key of the choice. */
  root: string;
  /** 0-based index of the version shown, of `count`. */
  index: number;
  count: number;
}

export interface ShownItem {
  item: TimelineItem;
  version?: VersionInfo;
}

/** The first message of a user's turn a version refers to: `versionOf`, else the item itself. */
function rootOf(item: UserItem): string | undefined {
  return item.versionOf ?? item.messageId;
}

/** The items to show, with the chosen version of each turn (`choice`: root -> index; missing = newest). */
export function versionedView(items: TimelineItem[], choice: Record<string, number>): ShownItem[] {
  const starts = new Map<string, number[]>(); // root -> positions of its versions' first messages
  items.forEach((it, i) => {
    if (it.kind !== "user" || !it.versionOf) return;
    const list = starts.get(it.versionOf) ?? [];
    list.push(i);
    starts.set(it.versionOf, list);
  });
  if (!starts.size) return items.filter((it) => !(it.kind === "user" && it.hiddenCopy)).map((item) => ({ item }));
  const out: ShownItem[] = [];
  const walk = (from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      const it = items[i]!;
      const later = it.kind === "user" && !it.versionOf && it.messageId ? starts.get(it.messageId) : undefined;
      if (!later || it.kind !== "user") {
        if (!(it.kind === "user" && it.hiddenCopy)) out.push({ item: it });
        continue;
      }
      const positions = [i, ...later.filter((p) => p > i && p < to)];
      const count = positions.length;
      const wanted = choice[rootOf(it)!];
      const index = wanted !== undefined && wanted >= 0 && wanted < count ? wanted : count - 1;
      const start = positions[index]!;
      const end = index + 1 < count ? positions[index + 1]! : to;
      out.push({ item: items[start]!, version: { root: rootOf(it)!, index, count } });
      walk(start + 1, end);
      return; // what follows belongs to the versions' spans
    }
  };
  walk(0, items.length);
  return out;
}

/** Whether the view shows an older version somewhere (then nothing can be edited or regenerated). */
export function browsingOlder(shown: ShownItem[]): boolean {
  return shown.some((s) => s.version && s.version.index < s.version.count - 1);
}
