"""Labelled dialogue sets and what the product's own rules predict for each turn.

A turn is what the user typed, labelled: the agent that should handle it and whether
it goes on with the agent of the previous turn (`cont`). The prediction calls the
product's function (`follow_up_model.decide`: the rules, then the trained model) with
what the server would see: the previous turn's agent as the active agent, its reply as
the last reply, and, when the user clicks a chip, that chip as offered after the reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.follow_up_model import decide

KINDS = ("new", "follow_up", "choose", "confirm", "ack", "go_on", "correct", "cancel", "redo", "all_none", "switch")
SPLITS = ("dev", "held_out")


@dataclass(frozen=True)
class Turn:
    dialogue: str
    lang: str
    index: int
    user: str
    kind: str
    agent: str
    cont: bool
    chip: str | None
    note: str | None
    reply: str
    split: str
    reply_agents: tuple[str, ...] = ()  # the agents of the domains the dataset's reply acts in (WOZ sets only)


def load_dialogues(path: Path) -> list[list[Turn]]:
    """bench/dialogues.json: every dialogue with its `split` (`dev`: the rules were tuned on it)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    dialogues: list[list[Turn]] = []
    seen: set[str] = set()
    for d in data["dialogues"]:
        did, turns = d["id"], []
        if did in seen:
            raise ValueError(f"{path}: dialogue id {did} twice")
        seen.add(did)
        split = d.get("split", "dev")
        if split not in SPLITS:
            raise ValueError(f"{path}: {did}: unknown split {split!r}")
        for i, t in enumerate(d["turns"]):
            turn = Turn(did, d["lang"], i, t["user"], t["kind"], t["agent"], bool(t["continue"]), t.get("chip"),
                        t.get("note"), t.get("reply", ""), split)
            check(turn, turns[-1] if turns else None, f"{path}: {did} turn {i + 1}")
            turns.append(turn)
        dialogues.append(turns)
    return dialogues


def check(turn: Turn, previous: Turn | None, where: str) -> None:
    if turn.kind not in KINDS:
        raise ValueError(f"{where}: unknown kind {turn.kind!r}")
    if (previous is None) != (turn.kind == "new") or (previous is None and turn.cont):
        raise ValueError(f"{where}: a dialogue opens with one `new` turn that does not continue")
    if turn.cont and previous is not None and turn.agent != previous.agent:
        raise ValueError(f"{where}: continues, yet names {turn.agent}, not {previous.agent}")
    if turn.chip is not None and not turn.cont:
        raise ValueError(f"{where}: a chip on a turn that does not continue")


@dataclass(frozen=True)
class Outcome:
    turn: Turn
    text: str
    clicked: bool
    fast: bool  # the fast path is taken (to the previous turn's agent)
    reason: str

    @property
    def misroute(self) -> bool:
        """The fast path sent it to an agent other than the labelled one."""
        return self.fast and not self.turn.cont and self.turn.agent != self.previous_agent

    previous_agent: str = ""
    previous_reply_agents: tuple[str, ...] = ()

    @property
    def follows_the_reply(self) -> bool:
        """A misroute whose labelled agent is one the reply before it already acted for: the dataset's system had
        moved to that domain ("What time would you like to leave the restaurant?" before a taxi's "switch"), so
        the turn answers the reply; counted as a misroute all the same, and reported apart."""
        return self.misroute and self.turn.agent in self.previous_reply_agents


def simulate(dialogues: list[list[Turn]], signals: RoutingSignals, vocabulary: TeamVocabulary,
             clicks: bool) -> list[Outcome]:
    """The route of every turn as the server decides it (a conversation's first turn has no active agent)."""
    quick = set(signals.quick_actions())
    out = []
    for turns in dialogues:
        previous: Turn | None = None
        for turn in turns:
            clicked = clicks and turn.chip is not None and turn.chip in quick
            text = turn.chip if clicked else turn.user
            if previous is None:
                out.append(Outcome(turn, text, clicked, False, "no active agent"))
            else:
                v = decide(signals, text, previous.reply, vocabulary.view(previous.agent), (text,) if clicked else ())
                out.append(Outcome(turn, text, clicked, v.continues, v.reason, previous.agent,
                                   previous.reply_agents))
            previous = turn
    return out


@dataclass(frozen=True)
class Score:
    turns: int
    continuations: int
    hits: int
    switches: int
    misroutes: int
    fast_on_switches: int  # includes a switch that stays with the same agent (not a misroute)
    pre_agent_requests: float  # per turn: 0 on the fast path, else `stage_requests`

    @property
    def hit_rate(self) -> float:
        return self.hits / self.continuations if self.continuations else float("nan")


def score(outcomes: list[Outcome], stage_requests: int = 1) -> Score:
    conts = [o for o in outcomes if o.turn.cont]
    switches = [o for o in outcomes if o.turn.index > 0 and not o.turn.cont]
    slow = sum(1 for o in outcomes if not o.fast)
    return Score(len(outcomes), len(conts), sum(o.fast for o in conts), len(switches),
                 sum(o.misroute for o in outcomes), sum(o.fast for o in switches),
                 stage_requests * slow / len(outcomes) if outcomes else float("nan"))
