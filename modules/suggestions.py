"""Suggested follow-ups: 1 to 4 clickable questions after a reply.

The quick-action ones are drawn from the continuation word list, so that a
click lands exactly on the fast path. A malformed answer or a failed call
yields no suggestions, never an error.
"""

from __future__ import annotations

import json
import logging
import re

from modules.llm import ChatModel, ModelError

log = logging.getLogger(__name__)

MAX_QUESTIONS = 4
MAX_CHARS = 80
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

_PROMPT = """You suggest what the user may want to say next, after the assistant's reply.
Give 1 to 4 short suggestions in the user's language, written as the user would type them.
Use quick-action words when the user will likely confirm, change or cancel as a whole:
- after a plan, report or conclusion: confirm / modify / redo words;
- after an answer to a follow-up: acknowledge / continue words;
- after several options where the user may want all or none: such words.
Quick-action words (use them exactly as written): {quick}
Answer with JSON only: {{"questions": ["...", "..."]}}"""


def parse_suggestions(answer: str) -> list[str]:
    match = _JSON_OBJECT.search(answer or "")
    if not match:
        return []
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return []
    raw = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return []
    questions: list[str] = []
    for item in raw:
        if isinstance(item, str) and item.strip() and len(item.strip()) <= MAX_CHARS and item.strip() not in questions:
            questions.append(item.strip())
    return questions[:MAX_QUESTIONS]


def generate_suggestions(model: ChatModel, model_name: str | None, user_message: str, reply: str,
                         quick_actions: list[str]) -> list[str]:
    system = _PROMPT.format(quick=", ".join(quick_actions))
    try:
        answer = model.stream_chat(messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": f"User said: {user_message}\n\nAssistant replied: {reply}"},
        ], tools=None, model=model_name)
    except ModelError as exc:
        log.info("no suggestions: %s", exc)
        return []
    return parse_suggestions(answer.content)
