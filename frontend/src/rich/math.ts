// Typesetting of the formula placeholders mathSyntax.ts leaves in rendered Markdown (`data-math`), with
// KaTeX loaded on the first formula only. KaTeX builds its nodes through the DOM (styles set as
// properties, not markup), and with `trust` off it renders no links, classes or HTML of the model's.

type Katex = typeof import("katex").default;

let katex: Promise<Katex> | null = null;

function loadKatex(): Promise<Katex> {
  katex ??= Promise.all([import("katex"), import("katex/dist/katex.min.css")]).then(([m]) => m.default);
  return katex;
}

/** Typeset every formula under `root` that is not yet typeset. */
export async function typesetMath(root: HTMLElement): Promise<void> {
  const pending = Array.from(root.querySelectorAll<HTMLElement>("[data-math]:not([data-typeset])"));
  if (!pending.length) return;
  const k = await loadKatex();
  for (const el of pending) {
    if (!el.isConnected || el.dataset.typeset) continue;
    const tex = el.textContent ?? "";
    el.dataset.typeset = "1";
    el.title = tex;
    k.render(tex, el, {
      displayMode: el.dataset.math === "display",
      throwOnError: false,
      output: "htmlAndMathml",
      trust: false,
      maxSize: 20,
      maxExpand: 200,
    });
  }
}
