// A tool call's arguments (or result) as labelled fields a user can read; the raw JSON stays one toggle away.

import { parseJson } from "./history";

export interface Field {
  key: string;
  label: string;
  value: string;
  /** A value of several lines (a script, a file's text): shown as a block. */
  block: boolean;
}

function label(key: string): string {
  const words = key.replace(/[_-]+/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").trim().toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function shown(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (v === null || v === undefined) return "—";
  if (Array.isArray(v) && v.every((x) => typeof x === "string" || typeof x === "number")) return v.join(", ");
  return typeof v === "object" ? JSON.stringify(v, null, 2) : String(v);
}

/** The fields of a JSON object, in its order (`omit`: keys shown elsewhere); null when it is not an object. */
export function jsonFields(raw: string | undefined, omit: string[] = []): Field[] | null {
  const obj = raw === undefined ? null : parseJson(raw);
  if (!obj || Array.isArray(obj)) return null;
  return Object.entries(obj)
    .filter(([k]) => !omit.includes(k))
    .map(([key, v]) => {
      const value = shown(v);
      return { key, label: label(key), value, block: value.includes("\n") || value.length > 120 };
    });
}
