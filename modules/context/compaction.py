"""What compaction summarises and how it asks for the summary (README, "Long conversations").

Pure functions: where the oldest span ends (never between a tool call and its result, never into the
most recent messages), the summary request's prompt, and the span as a transcript cut into pieces that
each fit one request. The server's side (server/turns/context_window.py) reads, stores and calls."""

from __future__ import annotations

from modules.context.shorten import shorten_tokens
from modules.context.view import HistoryRow
from modules.llm.tokens import count_tokens

COMPACT_PROMPT = """You condense the earlier part of a conversation between a user and a team of AI agents, \
so that the agent can go on without it. Write the summary the agent will read in place of those messages:
- every instruction, rule, preference, constraint, correction and decision the user (or the agent's master) \
gave, quoted verbatim, with the newer one where two contradict;
- the facts, names, numbers, file paths, commands and results the work depends on;
- what was done, with which outcome, and what is still open: unanswered questions, pending asks, \
announced but unfinished work, background work whose notice has not come;
- drop greetings, repetition and raw command output that no longer matters.
If a previous summary is given, merge it into yours and drop nothing of its instructions. \
Answer with the summary only, in the conversation's language, at most {words} words."""

SUMMARY_HEADER = ("Summary of the earlier part of this conversation (the messages after it are verbatim; "
                  "the user's instructions in it still hold):\n")


def choose_split(rows: list[HistoryRow], sizes: list[int], tail_tokens: int) -> int:
    """How many of the oldest rows to summarise: as few as leave at most `tail_tokens` of rows after
    them, preferably starting the kept rows at a user message (some chat templates want one first after
    the system message), split only before a row that is not a tool result (a call stays with its
    results), and never past the newest such row (the latest messages always stay verbatim). 0: nothing
    can go."""
    boundaries = [i for i in range(1, len(rows)) if rows[i].role != "tool"]
    if not boundaries:
        return 0
    suffix = 0
    fitting: list[int] = []
    for i in range(len(rows) - 1, 0, -1):
        suffix += sizes[i]
        if suffix > tail_tokens:
            break
        if rows[i].role != "tool":
            fitting.append(i)
    if not fitting:
        return boundaries[-1]
    users = [i for i in fitting if rows[i].role == "user"]
    return min(users) if users else min(fitting)


def render(row: HistoryRow) -> str:
    """One row of the span as a transcript line for the summary request."""
    if row.role == "tool":
        return f"[result of tool call {row.tool_call_id}]: {row.content or ''}"
    text = row.content or ""
    if row.role == "assistant" and row.tool_calls:
        calls = "; ".join(f"{c['function']['name']}({c['function'].get('arguments', '')})"
                          for c in row.tool_calls)
        text = f"{text}\n[calls {calls}]" if text else f"[calls {calls}]"
    return f"{row.role}: {text}"


def transcript_pieces(rows: list[HistoryRow], piece_tokens: int, *, line_tokens: int) -> list[str]:
    """The span as transcript text, in pieces of at most `piece_tokens` each (one summary request per
    piece); a tool result longer than `line_tokens` is shortened, a longer line of anyone else to a piece."""
    pieces: list[str] = []
    lines: list[str] = []
    size = 0
    for row in rows:
        limit = line_tokens if row.role == "tool" else piece_tokens
        line = shorten_tokens(render(row), limit)
        tokens = count_tokens(line) + 1
        if lines and size + tokens > piece_tokens:
            pieces.append("\n".join(lines))
            lines, size = [], 0
        lines.append(line)
        size += tokens
    if lines:
        pieces.append("\n".join(lines))
    return pieces


def summary_request(previous: str, piece: str, words: int) -> list[dict[str, str]]:
    """The messages of one summary request: the prompt, the previous summary, the next piece of the span."""
    parts = []
    if previous:
        parts.append(f"Previous summary:\n{previous}")
    parts.append(f"Messages to add:\n{piece}")
    return [{"role": "system", "content": COMPACT_PROMPT.format(words=words)},
            {"role": "user", "content": "\n\n".join(parts)}]


def summary_words(summary_tokens: int) -> int:
    """The word bound the prompt asks for, so a summary fits the tokens kept for it: the estimate counts a
    summary's words, numbers, paths and punctuation at up to 2.5 tokens a word, and a longer summary is cut
    in its middle."""
    return max(60, min(800, summary_tokens * 2 // 5))
