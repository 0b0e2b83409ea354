// Markdown -> sanitized HTML, code blocks highlighted with highlight.js.

import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";
import { Marked, type Tokens } from "marked";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

export function highlight(code: string, lang?: string): { html: string; language: string } {
  const wanted = (lang ?? "").trim().split(/\s+/)[0]?.toLowerCase() ?? "";
  try {
    if (wanted && hljs.getLanguage(wanted)) {
      return { html: hljs.highlight(code, { language: wanted, ignoreIllegals: true }).value, language: wanted };
    }
    if (code.length < 20000) {
      const auto = hljs.highlightAuto(code);
      return { html: auto.value, language: auto.language ?? "" };
    }
  } catch {
    // fall through to plain text
  }
  return { html: escapeHtml(code), language: "" };
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const { html, language } = highlight(text, lang);
      const label = language ? `<span class="code-lang">${escapeHtml(language)}</span>` : "";
      const cls = language ? ` language-${escapeHtml(language)}` : "";
      return `<pre class="code-block">${label}<code class="hljs${cls}">${html}</code></pre>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function renderMarkdown(source: string): string {
  const html = marked.parse(source ?? "", { async: false }) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}

/** Pretty-print a JSON string if it is JSON, else return it as it is. */
export function prettyJson(raw: string | undefined): string {
  if (raw === undefined || raw === null) return "";
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return String(raw);
  }
}
