// Markdown -> sanitized HTML, code blocks highlighted with highlight.js.

import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";
import { Marked, type Tokens } from "marked";
import { mathExtension } from "./rich/mathSyntax";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** A guess below this relevance, or of text without code punctuation, is plain output (a listing, a
 * date, prose), not code: it stays unlabelled and uncoloured. */
const MIN_RELEVANCE = 4;
const CODE_PUNCTUATION = /[(){};=]/;

/** Highlight `code`; without a known `lang`, guess it only when `auto` (guessing is slow). */
export function highlight(code: string, lang?: string, auto = true): { html: string; language: string } {
  const wanted = (lang ?? "").trim().split(/\s+/)[0]?.toLowerCase() ?? "";
  try {
    if (wanted && hljs.getLanguage(wanted)) {
      return { html: hljs.highlight(code, { language: wanted, ignoreIllegals: true }).value, language: wanted };
    }
    if (auto && code.length < 20000) {
      const result = hljs.highlightAuto(code);
      if (result.language && result.relevance >= MIN_RELEVANCE && CODE_PUNCTUATION.test(code)) {
        return { html: result.value, language: result.language };
      }
    }
  } catch {
    // fall through to plain text
  }
  return { html: escapeHtml(code), language: "" };
}

function markedWith(auto: boolean): Marked {
  return new Marked(mathExtension, {
    gfm: true,
    breaks: true,
    renderer: {
      code({ text, lang }: Tokens.Code): string {
        // A diagram's source, drawn by diagrams.ts once the reply is complete.
        if (lang?.trim().toLowerCase() === "mermaid") {
          return `<pre class="code-block"><code class="language-mermaid">${escapeHtml(text)}</code></pre>`;
        }
        const { html, language } = highlight(text, lang, auto);
        const label = language ? `<span class="code-lang">${escapeHtml(language)}</span>` : "";
        const cls = language ? ` language-${escapeHtml(language)}` : "";
        return `<pre class="code-block">${label}<code class="hljs${cls}">${html}</code></pre>`;
      },
      // A task list's box: a placeholder here (the sanitizer drops every input), a disabled checkbox after it.
      checkbox({ checked }: Tokens.Checkbox): string {
        return `<span data-task="${checked ? "done" : "open"}"></span> `;
      },
    },
  });
}

const finished = markedWith(true);
const streaming = markedWith(false);

// Model text must not restyle or cover the page (inline styles, <style>, the app's own
// classes), pose as a form, or make the browser fetch a remote URL (a tracking pixel can
// carry data out in its query string).
const FORBID_TAGS = ["style", "form", "input", "button", "textarea", "select", "option", "optgroup", "datalist",
  "fieldset", "audio", "video", "source", "track", "picture"];
const FORBID_ATTR = ["style", "srcset", "poster", "background"];
/** What a one-line rendering keeps: no images, blocks or line breaks. */
const INLINE_TAGS = ["strong", "em", "code", "a", "del", "span"];
// Code highlighting's classes (with its sub-scopes such as `function_`), and the code block's own.
const OWN_CLASS = /^(hljs(-[\w-]+)?|[a-z]+_+|language-[\w+#.-]+|code-block|code-lang)$/;

DOMPurify.addHook("uponSanitizeAttribute", (_node, data) => {
  if (data.attrName !== "class") return;
  data.attrValue = data.attrValue.split(/\s+/).filter((c) => OWN_CLASS.test(c)).join(" ");
  if (!data.attrValue) data.keepAttr = false;
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

function localImage(src: string): boolean {
  if (/^data:image\//i.test(src)) return true;
  try {
    return new URL(src, window.location.href).origin === window.location.origin;
  } catch {
    return false;
  }
}

/** A remote image becomes a link to it (named by its alt text): nothing is fetched unless clicked. */
function unloadRemoteImages(root: DocumentFragment): void {
  for (const img of Array.from(root.querySelectorAll("img"))) {
    const src = img.getAttribute("src") ?? "";
    if (localImage(src)) continue;
    const doc = img.ownerDocument;
    const alt = img.getAttribute("alt") ?? "";
    if (/^https?:/i.test(src)) {
      const a = doc.createElement("a");
      a.href = src;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      a.textContent = alt || src;
      img.replaceWith(a);
    } else {
      img.replaceWith(doc.createTextNode(alt));
    }
  }
}

/** Task list placeholders become boxes that show the state and take no input. */
function addTaskBoxes(root: DocumentFragment): void {
  for (const mark of Array.from(root.querySelectorAll("span[data-task]"))) {
    const box = mark.ownerDocument.createElement("input");
    const done = mark.getAttribute("data-task") === "done";
    box.setAttribute("type", "checkbox");
    box.setAttribute("disabled", "");
    if (done) box.setAttribute("checked", "");
    box.setAttribute("aria-label", done ? "done" : "to do");
    mark.replaceWith(box);
  }
}

/** Markdown as safe HTML; `partial` (a reply still streaming) skips guessing unlabelled code languages. */
export function renderMarkdown(source: string, partial = false): string {
  const html = (partial ? streaming : finished).parse(source ?? "", { async: false }) as string;
  // Sanitized into an inert document: nothing in it is fetched before the remote images are gone.
  const frag = DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS,
    FORBID_ATTR,
    RETURN_DOM_FRAGMENT: true,
  });
  unloadRemoteImages(frag);
  addTaskBoxes(frag);
  const box = frag.ownerDocument.createElement("div");
  box.append(frag);
  return box.innerHTML;
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

/** The top-level blocks of `source` (paragraphs, lists, code blocks, …) as their raw text, in order. */
export function markdownBlocks(source: string): string[] {
  return streaming.lexer(source).map((t) => t.raw);
}

/** One line of Markdown (inline only: emphasis, code, links) as safe HTML. */
export function renderInline(source: string): string {
  const html = streaming.parseInline(source ?? "", { async: false }) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS, FORBID_ATTR, ALLOWED_TAGS: INLINE_TAGS });
}
