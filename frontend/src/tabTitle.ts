// The tab's title: the open conversation's, and a mark when work finished while the tab was hidden (a turn
// ended, a sub-agent reported, a background command ended), so a user in another tab sees it is done. The
// mark goes when the tab is shown again. A sub-agent's report or a command's end also notifies (./notify.ts).

import { computed, ref, watch } from "vue";
import type { ChatState } from "./chat/state";
import { noticeView } from "./notices";
import { notifyHidden } from "./notify";
import type { NoticeItem } from "./types";

const APP = "Agent team chat";
export const FINISHED_MARK = "✓ Done · ";

export function useTabTitle(state: ChatState, title: () => string): void {
  const finished = ref(false);
  /** Reports that came in live (the stored history's are nothing that just finished). */
  const reportItems = computed(() =>
    state.items.filter((it): it is NoticeItem => it.kind === "notice" && !it.fromHistory &&
      (it.source === "sub_agent" || it.source === "background_command")),
  );
  const reports = computed(() => reportItems.value.length);
  const mark = (): void => {
    if (document.hidden && !state.loading) finished.value = true;
  };
  watch(() => state.running.length, (now, before) => {
    if (before > 0 && now === 0) mark();
  });
  watch(reports, (now, before) => {
    if (now <= before) return;
    mark();
    const view = noticeView(reportItems.value[now - 1]!);
    notifyHidden(`${view.label} · ${title() || APP}`, view.detail.replace(/[`*_]/g, ""));
  });
  watch(() => state.conversationId, () => (finished.value = false));
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) finished.value = false;
  });
  watch(
    [finished, title],
    ([done, t]) => {
      const base = t ? `${t} · ${APP}` : APP;
      document.title = done ? FINISHED_MARK + base : base;
    },
    { immediate: true },
  );
}
