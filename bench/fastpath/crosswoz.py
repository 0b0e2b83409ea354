"""CrossWOZ (thu-coai/CrossWOZ, Apache-2.0) as a labelled set: one agent per domain, labels from dialogue acts.

The validation split ships as bench/crosswoz/val.json.zip (a copy of
`data/crosswoz/val.json.zip` of that repository; see bench/crosswoz/README.md). Each user
turn is labelled by the domains of its own dialogue acts (General acts such as thanks
and greetings name none): no domain, or only the domain of the previous turn, is a
same-agent follow-up; any other domain is a topic switch to that domain's agent (a turn
naming the previous domain and a new one counts as a switch to the new one). The agents
answer with the dataset's system replies. Dialogues are split by sorted id: the first
half `dev` (the profiles' keywords were chosen on it), the second `held_out`.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from bench.fastpath.dialogue_set import Turn

DATA = Path(__file__).resolve().parent.parent / "crosswoz" / "val.json.zip"
PROFILES = Path(__file__).resolve().parent.parent / "crosswoz" / "profiles.toml"
AGENTS = {"餐馆": "RestaurantAgent", "景点": "AttractionAgent", "酒店": "HotelAgent", "地铁": "MetroAgent",
          "出租": "TaxiAgent"}
MASTER = "MasterAgent"


def _domains(acts: list[list[str]]) -> list[str]:
    return list(dict.fromkeys(a[1] for a in acts if a[0] != "General" and a[1] in AGENTS))


def load_crosswoz(path: Path = DATA) -> list[list[Turn]]:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".json"))
        data = json.loads(z.read(name).decode("utf-8"))
    ids = sorted(data)
    half = len(ids) // 2
    return [_dialogue(did, data[did]["messages"], "dev" if i < half else "held_out") for i, did in enumerate(ids)]


def _dialogue(did: str, messages: list[dict], split: str) -> list[Turn]:
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        if m["role"] != "usr":
            continue
        reply = next((r["content"] for r in messages[i + 1:i + 2] if r["role"] == "sys"), "")
        domains = _domains(m["dialog_act"])
        if not turns:
            agent, cont, kind = (AGENTS[domains[0]] if domains else MASTER), False, "new"
        else:
            before = turns[-1].agent
            new = [AGENTS[d] for d in domains if AGENTS[d] != before]
            if not new:
                agent, cont, kind = before, True, "follow_up" if domains else "ack"
            else:
                agent, cont, kind = new[0], False, "switch"
        turns.append(Turn(f"crosswoz-{did}", "zh", len(turns), m["content"], kind, agent, cont, None, None, reply,
                          split))
    return turns
