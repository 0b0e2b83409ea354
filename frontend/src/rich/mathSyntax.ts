// TeX in Markdown: `$…$` and `\(…\)` inline, `$$…$$` and `\[…\]` display. Marked extensions take the TeX
// out before Markdown's own rules run (so `\[` keeps its backslash and `_` never turns into emphasis);
// code spans and blocks are tokenized first and keep their dollars. Each formula becomes a placeholder
// element holding its TeX as text, typeset later by rich/math.ts (and readable as TeX if that never loads).

import type { MarkedExtension, TokenizerAndRendererExtension, Tokens } from "marked";

interface MathToken extends Tokens.Generic {
  type: "math";
  raw: string;
  tex: string;
  display: boolean;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** `$$…$$` / `\[…\]` starting a block (the formula may span lines). */
const BLOCK = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n+|$)/;
/** Display math inside a line. */
const INLINE_DISPLAY = /^(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])/;
/** `\(…\)` inside a line. */
const INLINE_PAREN = /^\\\(([\s\S]+?)\\\)/;
/** `$…$` inside a line: no space just inside either dollar and no digit right after the closing one, so
 * prices ("$5 and $10") stay text; the formula stays on one line. */
const INLINE_DOLLAR = /^\$(?!\s)((?:\\.|[^\\$\n])+?)(?<!\s)\$(?!\d)/;

function token(raw: string, tex: string | undefined, display: boolean): MathToken | undefined {
  const t = (tex ?? "").trim();
  return t ? { type: "math", raw, tex: t, display } : undefined;
}

function render(tok: Tokens.Generic): string {
  const { tex, display } = tok as MathToken;
  const tag = display ? "div" : "span";
  return `<${tag} data-math="${display ? "display" : "inline"}">${escapeHtml(tex)}</${tag}>`;
}

const blockMath: TokenizerAndRendererExtension = {
  name: "math",
  level: "block",
  start: (src) => src.match(/(?:^|\n) {0,3}(?:\$\$|\\\[)/)?.index,
  tokenizer(src) {
    const m = BLOCK.exec(src);
    return m ? token(m[0], m[1] ?? m[2], true) : undefined;
  },
  renderer: render,
};

const inlineMath: TokenizerAndRendererExtension = {
  name: "math",
  level: "inline",
  start: (src) => src.match(/\$|\\[([]/)?.index,
  tokenizer(src) {
    let m = INLINE_DISPLAY.exec(src);
    if (m) return token(m[0], m[1] ?? m[2], true);
    m = INLINE_PAREN.exec(src) ?? INLINE_DOLLAR.exec(src);
    return m ? token(m[0], m[1], false) : undefined;
  },
  renderer: render,
};

export const mathExtension: MarkedExtension = { extensions: [blockMath, inlineMath] };
