// Focus for what opens over the page (popovers, drawers, side views): it moves into what opened and goes back
// to where it was (the button that opened it) when that closes, so a keyboard user is never left on <body>.

import { nextTick, onBeforeUnmount, onMounted, watch, type Ref } from "vue";

const FOCUSABLE = 'input:not([disabled]), button:not([disabled]), textarea, select, a[href], [tabindex]:not([tabindex="-1"])';

/** Focus `preferred` under `root`, else its first focusable element. */
export function focusInto(root: HTMLElement | null | undefined, preferred?: string): void {
  const target = (preferred && root?.querySelector<HTMLElement>(preferred)) || root?.querySelector<HTMLElement>(FOCUSABLE);
  target?.focus();
}

/** Focus goes back to `back` unless the user already put it somewhere else on purpose. */
function giveBack(root: HTMLElement | null | undefined, back: Element | null): void {
  const now = document.activeElement;
  const lost = !now || now === document.body || !!root?.contains(now) || !now.isConnected;
  if (lost && back instanceof HTMLElement && back.isConnected) back.focus();
}

/** For a component that is shown while mounted (a popover, a side view): focus in on mount, back on unmount. */
export function useFocusWhileMounted(root: Ref<HTMLElement | null>, preferred?: string): void {
  let back: Element | null = null;
  onMounted(() => {
    back = document.activeElement;
    focusInto(root.value, preferred);
  });
  onBeforeUnmount(() => {
    const el = root.value;
    // after the element is gone, so the focus is not moved back into it
    void nextTick(() => giveBack(el, back));
  });
}

/** For a drawer toggled by `open`: focus into `panel()` when it opens, back to `toggle` when it closes. */
export function useDrawerFocus(open: Ref<boolean>, panel: () => HTMLElement | null, toggle: Ref<HTMLElement | null>): void {
  watch(open, (isOpen) => {
    const el = panel();
    if (isOpen) void nextTick(() => focusInto(panel()));
    else giveBack(el, toggle.value);
  });
}
