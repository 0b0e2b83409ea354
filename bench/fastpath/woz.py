"""CrossWOZ, MultiWOZ 2.1 and SGD as labelled sets: one agent per domain, labels from the user's own dialogue acts.

CrossWOZ (thu-coai/CrossWOZ, Apache-2.0, Chinese) and MultiWOZ 2.1 as in thu-coai/ConvLab-2 (Apache-2.0, English)
ship their validation splits as bench/crosswoz/val.json.zip and bench/multiwoz/val.json.zip, unchanged (see the
README beside each); the Schema-Guided Dialogue dataset (CC BY-SA 4.0, English) ships the multi-service dialogues
of its train and dev splits as compact records (bench/sgd/, derived by bench/sgd/derive.py; for SGD a user turn's
"acts" are the services its frames act on). All are read by one loop: each user turn is labelled by the domains of
its own dialogue acts (General acts such as thanks and greetings, and MultiWOZ's `Booking-*`, name none): no domain,
or only the domain of the previous turn, is a same-agent follow-up; any other domain is a topic switch to that
domain's agent (a turn naming the previous domain and a new one counts as a switch to the new one). The agents
answer with the dataset's system replies. CrossWOZ and MultiWOZ are split by sorted id: the first half `dev` (the
rules were read against it and bench/train_follow_up.py fits the follow-up model on it), the second `held_out` (never
tuned on); SGD keeps its own `train` (fitted on) and `dev` (thresholds chosen on) splits.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.fastpath.dialogue_set import Turn

BENCH = Path(__file__).resolve().parent.parent
MASTER = "MasterAgent"

# the user's text, the system's reply, the domains the user's acts name, the domains the reply's acts name
Exchange = tuple[str, str, list[str], list[str]]


@dataclass(frozen=True)
class WozSet:
    name: str
    lang: str
    data: Path
    profiles: Path
    agents: dict[str, str]  # the dataset's domain -> the agent of the team
    exchanges: Callable[[dict[str, Any]], Iterator[Exchange]]  # one dialogue's user turns, in order
    own_splits: bool = False  # each record names its split (SGD); else halves by sorted id

    def load(self, path: Path | None = None) -> list[list[Turn]]:
        with zipfile.ZipFile(path or self.data) as z:
            name = next(n for n in z.namelist() if n.endswith(".json"))
            data = json.loads(z.read(name).decode("utf-8"))
        ids = sorted(data)
        half = len(ids) // 2
        return [self._dialogue(did, data[did], data[did]["split"] if self.own_splits else
                               "dev" if i < half else "held_out") for i, did in enumerate(ids)]

    def _dialogue(self, did: str, dialogue: dict[str, Any], split: str) -> list[Turn]:
        turns: list[Turn] = []
        for user, reply, acts, reply_acts in self.exchanges(dialogue):
            domains = [d for d in dict.fromkeys(acts) if d in self.agents]
            answered = tuple(dict.fromkeys(self.agents[d] for d in reply_acts if d in self.agents))
            if not turns:
                agent, cont, kind = (self.agents[domains[0]] if domains else MASTER), False, "new"
            else:
                before = turns[-1].agent
                new = [self.agents[d] for d in domains if self.agents[d] != before]
                if not new:
                    agent, cont, kind = before, True, "follow_up" if domains else "ack"
                else:
                    agent, cont, kind = new[0], False, "switch"
            turns.append(Turn(f"{self.name}-{did}", self.lang, len(turns), user, kind, agent, cont, None, None, reply,
                              split, answered))
        return turns


def _crosswoz_exchanges(dialogue: dict[str, Any]) -> Iterator[Exchange]:
    messages = dialogue["messages"]
    for i, m in enumerate(messages):
        if m["role"] == "usr":
            sys_turn = next((r for r in messages[i + 1:i + 2] if r["role"] == "sys"), None)
            reply = sys_turn["content"] if sys_turn else ""
            reply_acts = [a[1] for a in sys_turn["dialog_act"] if a[0] != "General"] if sys_turn else []
            yield m["content"], reply, [a[1] for a in m["dialog_act"] if a[0] != "General"], reply_acts


def _multiwoz_exchanges(dialogue: dict[str, Any]) -> Iterator[Exchange]:
    log = dialogue["log"]
    for i in range(0, len(log), 2):  # user and system turns alternate, the user first
        reply = log[i + 1]["text"] if i + 1 < len(log) else ""
        reply_acts = [a.split("-", 1)[0] for a in log[i + 1].get("dialog_act") or {}] if i + 1 < len(log) else []
        yield log[i]["text"].strip(), reply, [a.split("-", 1)[0] for a in log[i].get("dialog_act") or {}], reply_acts


def _sgd_exchanges(dialogue: dict[str, Any]) -> Iterator[Exchange]:
    for user, reply, domains, reply_domains in dialogue["turns"]:
        yield str(user), str(reply), list(domains), list(reply_domains)


CROSSWOZ = WozSet("crosswoz", "zh", BENCH / "crosswoz" / "val.json.zip", BENCH / "crosswoz" / "profiles.toml",
                  {"餐馆": "RestaurantAgent", "景点": "AttractionAgent", "酒店": "HotelAgent", "地铁": "MetroAgent",
                   "出租": "TaxiAgent"}, _crosswoz_exchanges)
MULTIWOZ = WozSet("multiwoz", "en", BENCH / "multiwoz" / "val.json.zip", BENCH / "multiwoz" / "profiles.toml",
                  {"Restaurant": "RestaurantAgent", "Hotel": "HotelAgent", "Attraction": "AttractionAgent",
                   "Train": "TrainAgent", "Taxi": "TaxiAgent", "Police": "PoliceAgent", "Hospital": "HospitalAgent"},
                  _multiwoz_exchanges)
SGD = WozSet("sgd", "en", BENCH / "sgd" / "dialogues.json.zip", BENCH / "sgd" / "profiles.toml",
             {d: f"{d}Agent" for d in ("Alarm", "Banks", "Buses", "Calendar", "Events", "Flights", "Homes", "Hotels",
                                       "Media", "Movies", "Music", "RentalCars", "Restaurants", "RideSharing",
                                       "Services", "Travel", "Weather")},
             _sgd_exchanges, own_splits=True)
