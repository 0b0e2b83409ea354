// Light or dark: follows the system unless the user picked one (kept in localStorage).

import { ref } from "vue";

export type ThemeChoice = "system" | "light" | "dark";
const KEY = "agentChat.theme";
const ORDER: ThemeChoice[] = ["system", "light", "dark"];

function stored(): ThemeChoice {
  try {
    const v = localStorage.getItem(KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

export const theme = ref<ThemeChoice>(stored());

/** `data-theme` on <html> only for an explicit choice; without it the stylesheet follows `prefers-color-scheme`. */
export function applyTheme(): void {
  const root = document.documentElement;
  if (theme.value === "system") root.removeAttribute("data-theme");
  else root.setAttribute("data-theme", theme.value);
}

export function cycleTheme(): void {
  theme.value = ORDER[(ORDER.indexOf(theme.value) + 1) % ORDER.length]!;
  try {
    if (theme.value === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, theme.value);
  } catch {
    // the choice lasts for this page only
  }
  applyTheme();
}
