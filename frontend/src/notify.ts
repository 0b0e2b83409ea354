// Browser notifications (the Notification API) when work finishes while the tab is hidden: a sub-agent's
// report or a background command's end. Permission is asked once, on a user gesture (the first send), never
// at load; without it, or without the API, only the tab title says it (./tabTitle.ts).

let asked = false;

function api(): typeof Notification | null {
  return typeof window !== "undefined" && "Notification" in window ? window.Notification : null;
}

/** Call from a user gesture: the browser shows its permission prompt once, the first time. */
export function askNotifyPermission(): void {
  const N = api();
  if (!N || asked || N.permission !== "default") return;
  asked = true;
  void Promise.resolve(N.requestPermission()).catch(() => undefined);
}

/** Notify, if allowed and the tab is hidden; a click brings the tab back. */
export function notifyHidden(title: string, body: string): void {
  const N = api();
  if (!N || N.permission !== "granted" || !document.hidden) return;
  try {
    const n = new N(title, { body, tag: "agent-chat-done" });
    n.onclick = () => {
      window.focus();
      n.close();
    };
  } catch {
    // some browsers (Android Chrome) allow notifications only from a service worker: the title says it
  }
}
