// A reply's rendered body. While it streams, only its last block (the one still growing) is parsed and
// replaced on each update: the blocks before it are complete, rendered once and left alone, so a long
// reply costs per frame what its last paragraph costs. A finished reply is rendered whole once (code
// languages guessed), then formulas typeset, diagrams drawn and code blocks given a Copy button.

import { copyText } from "../clipboard";
import { markdownBlocks, renderMarkdown } from "../markdown";
import { drawDiagrams } from "./diagrams";
import { typesetMath } from "./math";

function nodesOf(html: string): Node[] {
  const t = document.createElement("template");
  t.innerHTML = html;
  return Array.from(t.content.childNodes);
}

/** A copy button on each code block, added to the rendered DOM (model HTML never carries buttons). */
function addCopyButtons(root: HTMLElement): void {
  for (const pre of root.querySelectorAll<HTMLElement>("pre.code-block")) {
    if (pre.querySelector(":scope > .copy-code") || pre.querySelector(":scope > code.language-mermaid")) continue;
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "copy-code";
    btn.dataset.testid = "copy-code";
    btn.textContent = "Copy";
    btn.setAttribute("aria-label", "Copy the code");
    btn.addEventListener("click", async () => {
      if (await copyText(pre.querySelector("code")?.textContent ?? "")) {
        btn.textContent = "Copied";
        setTimeout(() => (btn.textContent = "Copy"), 1500);
      }
    });
    pre.appendChild(btn);
  }
}

export class ReplyBody {
  /** The text of the blocks rendered for good (a prefix of every later text while it streams). */
  private settled = "";
  private growing: Node[] = [];

  constructor(private readonly el: HTMLElement) {}

  /** The reply so far: render what is new in it, and re-render only its growing last block. */
  streaming(text: string): void {
    if (!text.startsWith(this.settled)) this.clear();
    const rest = text.slice(this.settled.length);
    const blocks = markdownBlocks(rest);
    let last = blocks.length - 1;
    while (last > 0 && !blocks[last]!.trim()) last--;
    let done = blocks.slice(0, Math.max(last, 0)).join("");
    if (!rest.startsWith(done)) done = "";
    for (const n of this.growing) n.parentNode?.removeChild(n);
    if (done) {
      for (const raw of blocks.slice(0, last)) this.el.append(...nodesOf(renderMarkdown(raw, true)));
      this.settled += done;
    }
    this.growing = nodesOf(renderMarkdown(rest.slice(done.length), true));
    this.el.append(...this.growing);
    void typesetMath(this.el);
  }

  /** The finished reply, rendered whole. */
  finished(text: string): void {
    this.clear();
    this.el.innerHTML = renderMarkdown(text);
    addCopyButtons(this.el);
    void typesetMath(this.el);
    void drawDiagrams(this.el);
  }

  private clear(): void {
    this.el.replaceChildren();
    this.settled = "";
    this.growing = [];
  }
}
