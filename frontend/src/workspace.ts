// The conversation's workspace folder (what its agents' commands see as /workspace): the files in it,
// uploads into it, downloads from it. An older server without these endpoints hides the panel.

import { reactive } from "vue";
import { api, apiRaw, ApiError, download, unsupported } from "./api";

export interface WorkspaceFile {
  name: string;
  size: number;
  modified: string | number | null;
}

export const workspace = reactive({
  conversationId: null as string | null,
  files: [] as WorkspaceFile[],
  supported: true,
  uploading: false,
  error: "",
});

function base(cid: string): string {
  return `/api/conversations/${encodeURIComponent(cid)}/files`;
}

export async function loadFiles(cid: string | null): Promise<void> {
  workspace.conversationId = cid;
  workspace.error = "";
  if (!cid) {
    workspace.files = [];
    return;
  }
  try {
    const body = await api<{ data: WorkspaceFile[] }>(base(cid));
    if (workspace.conversationId === cid) workspace.files = body.data;
  } catch (err) {
    if (unsupported(err)) workspace.supported = false;
    else if (workspace.conversationId === cid) workspace.files = [];
  }
}

/** Upload into the workspace: the name the server stored it under (NFC), or null when it failed (said in `error`). */
export async function uploadFile(cid: string, file: File): Promise<string | null> {
  workspace.uploading = true;
  workspace.error = "";
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    const res = await apiRaw(base(cid), { method: "POST", body: form });
    const stored = ((await res.json().catch(() => null)) ?? {}) as { name?: string };
    await loadFiles(cid);
    return stored.name || file.name;
  } catch (err) {
    if (unsupported(err)) workspace.supported = false;
    workspace.error =
      err instanceof ApiError && err.code === "file_too_large"
        ? `${file.name} is too large: ${err.message}`
        : `${file.name} was not uploaded: ${(err as Error).message}`;
    return null;
  } finally {
    workspace.uploading = false;
  }
}

export function downloadFile(cid: string, name: string): Promise<void> {
  return download(`${base(cid)}/${encodeURIComponent(name)}`, name);
}

export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
