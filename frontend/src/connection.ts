// The Socket.IO connection (same origin), its visible status, and the wiring to the chat.

import { io, type Socket } from "socket.io-client";
import { reactive } from "vue";
import { api, ApiError, getToken } from "./api";
import { Chat } from "./chat";

export interface ConnectionState {
  status: "connecting" | "connected" | "disconnected";
  error: string;
  everConnected: boolean;
  /** Why a connection failed, as a REST probe tells: the token was refused, or the server is out of reach. */
  reason: "" | "auth" | "unreachable";
}

export const connection: ConnectionState = reactive({
  status: "connecting", error: "", everConnected: false, reason: "",
});

/** The socket's own errors ("xhr poll error") do not say why: one REST call does. */
async function probe(): Promise<void> {
  try {
    await api("/api/conversations?limit=1");
    connection.reason = "";
  } catch (err) {
    connection.reason = err instanceof ApiError && (err.status === 401 || err.status === 403) ? "auth" : "unreachable";
  }
}

export const socket: Socket = io({
  path: "/socket.io",
  // A function, so a token changed in the settings is used by the next (re)connect.
  auth: (cb: (data: object) => void) => {
    const token = getToken();
    cb(token ? { token } : {});
  },
  reconnection: true,
  reconnectionDelay: 300,
  reconnectionDelayMax: 3000,
});

export const chat = new Chat(socket);

socket.on("connect", () => {
  connection.status = "connected";
  connection.error = "";
  connection.reason = "";
  connection.everConnected = true;
  void chat.resync();
  void chat.retryUnsent();
});

socket.on("disconnect", (reason) => {
  connection.status = "disconnected";
  chat.logs.pollWhileOffline();
  if (reason === "transport close" || reason === "transport error") void probe();
  // A disconnect the server decided is not retried by the client: retry it ourselves.
  if (reason === "io server disconnect") setTimeout(() => socket.connect(), 500);
});

socket.on("connect_error", (err) => {
  connection.status = "disconnected";
  connection.error = err.message || "cannot connect";
  void probe();
  // A refused connection (bad token) is not retried automatically.
  if (!socket.active) setTimeout(() => socket.connect(), 3000);
});

socket.io.on("reconnect_attempt", () => {
  connection.status = "connecting";
});

socket.onAny((type: string, data: unknown) => {
  if (data && typeof data === "object") chat.ingest({ type, data: data as Record<string, unknown> });
});

/** Reconnect with the current token (after it changed in the settings). */
export function reconnect(): void {
  socket.disconnect();
  socket.connect();
}

// Hooks for the browser tests and for debugging from the console.
declare global {
  interface Window {
    __agentChat?: unknown;
  }
}
window.__agentChat = {
  socket,
  chat,
  state: chat.state,
  /** Drop the socket without telling the server; the client reconnects by itself. */
  dropConnection: () => socket.io.engine?.close(),
  disconnect: () => socket.disconnect(),
  connect: () => socket.connect(),
};
