"""MultiWOZ 2.1 (as in thu-coai/ConvLab-2, Apache-2.0) as a labelled English set: one agent per domain, labels from
the user's own dialogue acts.

The validation split ships as bench/multiwoz/val.json.zip (a copy of `data/multiwoz/val.json.zip` of ConvLab-2;
see bench/multiwoz/README.md). The labelling is CrossWOZ's (bench/fastpath/crosswoz.py): a user turn whose acts
name no domain (`general-thank`, `general-bye`, `Booking-*`), or only the previous turn's, is a same-agent
follow-up; another domain is a topic switch to its agent. The agents answer with the dataset's system turns,
and the team is described in a sentence each, with no keywords (bench/multiwoz/profiles.toml). Dialogues are
split by sorted id: the first half `dev` (read while the rules were changed), the second `held_out`.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from bench.fastpath.dialogue_set import Turn

DATA = Path(__file__).resolve().parent.parent / "multiwoz" / "val.json.zip"
PROFILES = Path(__file__).resolve().parent.parent / "multiwoz" / "profiles.toml"
AGENTS = {"Restaurant": "RestaurantAgent", "Hotel": "HotelAgent", "Attraction": "AttractionAgent",
          "Train": "TrainAgent", "Taxi": "TaxiAgent", "Police": "PoliceAgent", "Hospital": "HospitalAgent"}
MASTER = "MasterAgent"


def _domains(acts: dict[str, list]) -> list[str]:
    return list(dict.fromkeys(d for d in (a.split("-", 1)[0] for a in acts) if d in AGENTS))


def load_multiwoz(path: Path = DATA) -> list[list[Turn]]:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".json"))
        data = json.loads(z.read(name).decode("utf-8"))
    ids = sorted(data)
    half = len(ids) // 2
    return [_dialogue(did, data[did]["log"], "dev" if i < half else "held_out") for i, did in enumerate(ids)]


def _dialogue(did: str, log: list[dict], split: str) -> list[Turn]:
    turns: list[Turn] = []
    for i in range(0, len(log), 2):  # user and system turns alternate, the user first
        reply = log[i + 1]["text"] if i + 1 < len(log) else ""
        domains = _domains(log[i].get("dialog_act") or {})
        if not turns:
            agent, cont, kind = (AGENTS[domains[0]] if domains else MASTER), False, "new"
        else:
            before = turns[-1].agent
            new = [AGENTS[d] for d in domains if AGENTS[d] != before]
            if not new:
                agent, cont, kind = before, True, "follow_up" if domains else "ack"
            else:
                agent, cont, kind = new[0], False, "switch"
        turns.append(Turn(f"multiwoz-{did}", "en", len(turns), log[i]["text"].strip(), kind, agent, cont, None, None,
                          reply, split))
    return turns
