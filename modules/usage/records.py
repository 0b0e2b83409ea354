"""The typed records of metering: who a model request was made for, and what it used."""

from __future__ import annotations

from dataclasses import dataclass

# What a model request was for (the ledger's `purpose`).
AGENT = "agent"  # a round of an agent's turn
ROUTING = "routing"  # the combined routing request
REWRITE = "rewrite"  # query rewriting (ROUTING_STAGES=separate)
INTENT = "intent"  # intent recognition (ROUTING_STAGES=separate)
SUGGESTIONS = "suggestions"
COMPACTION = "compaction"  # summarising a history that outgrew the model's context
UNATTRIBUTED = "unattributed"  # a caller that did not bind a context (a bug to fix, still counted)

OK, FAILED, STOPPED = "ok", "failed", "stopped"


@dataclass(frozen=True)
class CallContext:
    """Who a model request is made for; bound to the model with `MeteredChatModel.bound`."""

    purpose: str
    conversation_id: str | None = None
    user_id: int | None = None  # resolved from the conversation when not given
    agent: str = ""  # the agent's display name, or the stage's name (RoutingAgent, ...)
    agent_id: str | None = None
    task_id: str | None = None


@dataclass(frozen=True)
class UsageRecord:
    """One model request as the ledger keeps it."""

    context: CallContext
    user_id: int | None
    model: str
    status: str
    estimated: bool
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost: float | None
    latency_s: float
    first_token_s: float | None
    created_at: float

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
