// REST client: same origin, JSON, an optional bearer token kept in localStorage.

const TOKEN_KEY = "agentChat.token";

export function getToken(): string {
  try {
    return localStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

export function setToken(token: string): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage may be unavailable (private mode); the token then lasts for this page only
  }
}

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(path: string, opts: { method?: string; body?: unknown } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method: opts.method ?? "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      cache: "no-store",
    });
  } catch (err) {
    throw new ApiError(0, "network_error", `network error: ${(err as Error).message}`);
  }
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) {
    const b = (body ?? {}) as { code?: string; error?: string };
    throw new ApiError(res.status, b.code ?? `http_${res.status}`, b.error ?? res.statusText);
  }
  return body as T;
}

/** A raw authorised request (uploads, downloads): the answer as it came, errors as `ApiError`. */
export async function apiRaw(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = getToken();
  if (token) headers.set("Authorization", `Bearer ${token}`);
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers, cache: "no-store" });
  } catch (err) {
    throw new ApiError(0, "network_error", `network error: ${(err as Error).message}`);
  }
  if (!res.ok) {
    const b = ((await res.json().catch(() => null)) ?? {}) as { code?: string; error?: string };
    throw new ApiError(res.status, b.code ?? `http_${res.status}`, b.error ?? res.statusText);
  }
  return res;
}

/** Save what `path` answers as a file (the token rides in a header, so a plain link cannot fetch it). */
export async function download(path: string, fallbackName: string): Promise<void> {
  const res = await apiRaw(path);
  const disposition = res.headers.get("Content-Disposition") ?? "";
  const name = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1] ?? fallbackName;
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = decodeURIComponent(name);
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Whether an error means the server has no such endpoint (an older server): the feature hides itself. */
export function unsupported(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  return err.status === 405 || (err.status === 404 && /requested URL/i.test(err.message)); // no route, not no row
}
