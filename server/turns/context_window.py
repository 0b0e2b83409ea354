"""The model's view of an agent's history, kept inside the model's context window (README, "Long
conversations").

Before each model request of every agent: the newest summary and the history after it are read (never the
whole history); when the request would pass the budget's threshold, old tool results and long old
messages are shortened, then the oldest span is summarised by one model request (`request_summary`) into
a stored summary the model sees in place of that span, and a `context_compacted` event tells the user.
The stored history stays whole."""

from __future__ import annotations

import logging
from typing import Any

from modules.context import compaction
from modules.context.budget import SUMMARY_SHARE, ContextBudget, budget_for
from modules.context.shorten import shorten_tokens
from modules.context.versions import current_versions
from modules.context.view import HistoryRow, HistoryView, producer_of
from modules.event_catalogue import ContextCompactedEvent
from modules.llm import ModelError
from modules.llm.tokens import count_messages, count_tokens, count_tools
from modules.storage import summaries as summary_store
from modules.storage.summaries import Summary, SummaryDraft
from modules.usage.records import COMPACTION, CallContext
from server.sender import EventSender
from server.turns.context import TurnRuntime
from server.turns.types import Turn

log = logging.getLogger(__name__)

MIN_HISTORY_TOKENS = 256  # below this, after the system prompt and tools, no conversation fits


class ContextTooLarge(Exception):
    """The request cannot fit the window however much is compacted: its newest message (or the system
    prompt and tools) alone exceeds it. The turn fails with `context_too_large`; the next one sees that
    message shortened, as an old one."""


def agent_model(rt: TurnRuntime, turn: Turn) -> str:
    return turn.profile.model or rt.settings.llm_model or ""


def agent_producer(rt: TurnRuntime, turn: Turn) -> str:
    """The endpoint and model the agent's requests go to, as its replies are stored with (`producer_of`)."""
    return producer_of(rt.model.label, agent_model(rt, turn))


def agent_budget(rt: TurnRuntime, turn: Turn) -> ContextBudget:
    """The budget of the agent's model, below any size that model refused in this process."""
    model = agent_model(rt, turn)
    return rt.refused_sizes.within(model, budget_for(model, setting=rt.settings.model_context_tokens,
                                                     profile=turn.profile.context_tokens))


def current_from_seq(turn: Turn) -> int:
    """The first history `seq` of the running turn: what it drained at its start (its newest messages)."""
    return min((m.seq for m in turn.drained), default=2**62)


def request_summary(rt: TurnRuntime, turn: Turn, model: str, messages: list[dict[str, Any]]) -> str:
    """The one place compaction asks a model (LLM_MODEL_COMPACT, else the agent's): one request, no tools,
    metered as the turn's `compaction`. "" when the user stopped the turn meanwhile (a summary cut short is
    never stored)."""
    context = CallContext(COMPACTION, turn.conversation_id, agent=turn.display_name, agent_id=turn.agent_id,
                          task_id=turn.task_id)
    reply = rt.model.bound(context).stream_chat(messages=messages, model=model or None, should_stop=turn.stopped)
    return "" if reply.finish_reason == "stopped" else reply.content.strip()


def request_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """The estimated size of a request (modules/llm/tokens.py)."""
    return count_messages(messages) + count_tools(tools)


def build_model_messages(rt: TurnRuntime, turn: Turn, sender: EventSender, tools: list[dict[str, Any]] | None,
                         *, refused_at: int | None = None) -> list[dict[str, Any]]:
    """The messages of the agent's next request, within its budget; `refused_at`: the size of a request
    the provider refused as too long although the budget thought it fit (then the budget shrinks below it
    and compaction goes as far as it can). Raises ContextTooLarge when nothing fits."""
    model = agent_model(rt, turn)
    harder = refused_at is not None
    if refused_at is not None:
        rt.refused_sizes.refused(model, refused_at)
    budget = agent_budget(rt, turn)
    system = {"role": "system", "content": turn.profile.system_message(turn.display_name)}
    fixed = count_messages([system]) + count_tools(tools)
    room = budget.limit - fixed  # what the summary and the history may hold
    if room < MIN_HISTORY_TOKENS:
        raise ContextTooLarge(f"the system prompt and tool definitions ({fixed} tokens) leave no room in "
                              f"the model's context window of {budget.window} tokens")
    summary = summary_store.latest(rt.db, turn.agent_id)
    current = current_from_seq(turn)
    rows = current_versions(turn.history.read(rt.db, summary.through_seq if summary else -1))
    view = HistoryView.of(rows, current, agent_producer(rt, turn))
    summary_tokens = _summary_tokens(summary)
    if harder or fixed + summary_tokens + view.tokens > budget.threshold(fixed):
        # First the cheap step: old tool results, then any long old message.
        view.shorten_where(max(64, room // 16), current_from_seq=current, roles=("tool",))
        view.shorten_where(room // 4, current_from_seq=current, roles=("user", "assistant"))
    if harder or fixed + summary_tokens + view.tokens > budget.threshold(fixed):
        tail = budget.tail(fixed)
        split = compaction.choose_split(view.rows, view.sizes, tail)
        if split:
            before = fixed + summary_tokens + view.tokens
            fresh = _summarise(rt, turn, summary, view.rows[:split], room, budget.limit, model)
            if fresh is not None:
                view.drop_first(split)
                summary_tokens = _summary_tokens(fresh)
                summary = summary_store.add(rt.db, SummaryDraft(
                    conversation_id=turn.conversation_id, agent_id=turn.agent_id, through_seq=fresh.through_seq,
                    content=fresh.content, summarised_messages=split, tokens_before=before,
                    tokens_after=fixed + summary_tokens + view.tokens, model=_compact_model(rt, model),
                    task_id=turn.task_id))
                _emit_compacted(sender, summary)
            elif not turn.stopped() and fixed + summary_tokens + view.tokens > budget.limit:
                raise ModelError("model_error", "the context summary could not be written", retryable=True)
    if turn.stopped():
        return [system, *view.messages]  # no request follows (the caller sees the stop)
    if fixed + summary_tokens + view.tokens > budget.limit:
        view.shorten_where(room // 4, current_from_seq=current, roles=("tool",), current=True)
    if fixed + summary_tokens + view.tokens > budget.limit:
        biggest = max(view.sizes, default=0)
        raise ContextTooLarge(f"the newest messages ({view.tokens} tokens, the largest {biggest}) do not fit "
                              f"the model's context window of {budget.window} tokens")
    if summary is not None:
        system = {**system, "content": f"{system['content']}\n\n{compaction.SUMMARY_HEADER}{summary.content}"}
    return [system, *view.messages]


def _summary_tokens(summary: Summary | None) -> int:
    return count_tokens(compaction.SUMMARY_HEADER + summary.content) if summary else 0


def _compact_model(rt: TurnRuntime, model: str) -> str:
    return rt.settings.llm_model_compact or model


def _summarise(rt: TurnRuntime, turn: Turn, previous: Summary | None, span: list[HistoryRow], room: int,
               limit: int, model: str) -> Summary | None:
    """The summary of the previous one and `span`: one request per piece of the span that fits a request
    of `limit` tokens beside the prompt, the previous summary and the answer (usually one piece). None when
    the model failed or the turn was stopped: the caller goes on without, if the request still fits. A
    LLM_MODEL_COMPACT of a smaller window than the agent's model bounds the pieces by its own window."""
    compact = _compact_model(rt, model)
    if compact != model:
        limit = min(limit, rt.refused_sizes.within(compact, budget_for(
            compact, setting=rt.settings.model_context_tokens)).limit)
        room = min(room, limit)
    summary_tokens = int(room * SUMMARY_SHARE)
    words = compaction.summary_words(summary_tokens)
    piece_tokens = max(limit - 2 * summary_tokens - count_tokens(compaction.COMPACT_PROMPT) - 16, room // 4)
    text = previous.content if previous else ""
    try:
        for piece in compaction.transcript_pieces(span, piece_tokens, line_tokens=max(64, room // 16)):
            text = request_summary(rt, turn, compact, compaction.summary_request(text, piece, words))
            if not text:
                return None
    except ModelError as exc:
        log.warning("context summary for agent %s failed: %s %s", turn.agent_id, exc.code, exc)
        return None
    text = shorten_tokens(text, summary_tokens)
    return Summary("", span[-1].seq, text, len(span), 0, 0)


def _emit_compacted(sender: EventSender, summary: Summary) -> None:
    sender.emit(ContextCompactedEvent(
        summary_id=summary.summary_id, summary=summary.content, through_seq=summary.through_seq,
        summarised_messages=summary.summarised_messages, tokens_before=summary.tokens_before,
        tokens_after=summary.tokens_after,
    ))
