// Mermaid diagrams: a finished reply's ```mermaid blocks are drawn as SVG. The mermaid package is large, so it
// is loaded on the first diagram only. `securityLevel: "strict"` escapes labels and drops click handlers; the
// SVG is sanitized once more (its own DOMPurify instance, SVG only: no script, no foreignObject, no handlers)
// before it enters the page. A block that does not parse stays as code, with the reason beside it.

import DOMPurify from "dompurify";

type Mermaid = typeof import("mermaid").default;

let mermaid: Promise<Mermaid> | null = null;
let drawn = 0;
const svgPurify = DOMPurify(window);

function loadMermaid(): Promise<Mermaid> {
  mermaid ??= import("mermaid").then((m) => m.default);
  return mermaid;
}

function dark(): boolean {
  const chosen = document.documentElement.dataset.theme;
  return chosen ? chosen === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
}

function safeSvg(svg: string): DocumentFragment {
  return svgPurify.sanitize(svg, {
    USE_PROFILES: { svg: true, svgFilters: true },
    FORBID_TAGS: ["script", "foreignObject", "a", "image", "use"],
    RETURN_DOM_FRAGMENT: true,
  });
}

async function draw(m: Mermaid, pre: HTMLElement, source: string): Promise<void> {
  m.initialize({
    startOnLoad: false,
    securityLevel: "strict",
    htmlLabels: false,
    theme: dark() ? "dark" : "default",
    suppressErrorRendering: true,
  });
  const figure = document.createElement("figure");
  figure.className = "mermaid-diagram";
  figure.dataset.testid = "mermaid-diagram";
  figure.setAttribute("role", "img");
  figure.setAttribute("aria-label", `Diagram: ${source.split("\n")[0]?.trim() ?? ""}`);
  try {
    const { svg } = await m.render(`mermaid-${++drawn}`, source);
    if (!pre.isConnected) return;
    figure.append(safeSvg(svg));
    pre.replaceWith(figure);
  } catch (err) {
    const note = document.createElement("div");
    note.className = "mermaid-error";
    note.dataset.testid = "mermaid-error";
    note.textContent = `Diagram not drawn: ${(err as Error).message.split("\n")[0] ?? "syntax error"}`;
    pre.after(note);
  }
}

/** Draw every ```mermaid block under `root` (once each). */
export async function drawDiagrams(root: HTMLElement): Promise<void> {
  const blocks = Array.from(root.querySelectorAll<HTMLElement>("pre.code-block:not([data-diagram])"))
    .filter((pre) => pre.querySelector(":scope > code.language-mermaid"));
  if (!blocks.length) return;
  const m = await loadMermaid();
  for (const pre of blocks) {
    if (pre.dataset.diagram || !pre.isConnected) continue;
    pre.dataset.diagram = "1";
    await draw(m, pre, pre.querySelector("code")?.textContent ?? "");
  }
}
