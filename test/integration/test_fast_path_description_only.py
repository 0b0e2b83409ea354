"""A new user's team, each agent described in a sentence with no `keywords` (bench/multiwoz/profiles.toml), through
the real server: a topic switch goes through the routing request, a follow-up takes the fast path (README, "The
fast path, measured"; modules/multi_agent/follow_up_model.py)."""

from __future__ import annotations

from pathlib import Path

from modules.statuses import Route, TaskStatus
from test.scripted_llm import match_system, text

PROFILES = Path(__file__).resolve().parents[2] / "bench" / "multiwoz" / "profiles.toml"
ROUTER = match_system("You are RoutingAgent")
TRAIN = match_system("You are TrainAgent_1 ")
HOTEL = match_system("You are HotelAgent_1 ")


def routing_requests(llm) -> int:
    return sum(1 for r in llm.requests if ROUTER(r.body))


def test_a_description_only_team_switches_by_the_routing_request_and_follows_up_on_the_fast_path(make_server, llm):
    server = make_server(env={"AGENT_PROFILES": str(PROFILES)})
    llm.script(text('{"query": "a train to Cambridge on Saturday", "agent": "TrainAgent"}'), match=ROUTER)
    llm.script(text("TR1234 leaves at 09:00 and arrives at 09:52. Would you like me to book it?"), match=TRAIN)
    first = server.send("I need a train to Cambridge on Saturday.")
    cid = first["conversation_id"]
    assert (first["route"], first["target_agent"]) == (Route.PIPELINE, "TrainAgent_1")
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED

    llm.script(text("Booked, reference ABC123. Is there anything else?"), match=TRAIN)
    before = routing_requests(llm)
    booked = server.send("Yes, please book it for 2 people.", cid)
    assert (booked["route"], booked["target_agent"]) == (Route.FAST_PATH, "TrainAgent_1")
    assert server.wait_task(booked["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert routing_requests(llm) == before  # no model request before the agent

    # another agent's domain, named in a message that would otherwise pass as a request to the active agent
    llm.script(text('{"query": "a hotel in the north with free parking", "agent": "HotelAgent"}'), match=ROUTER)
    llm.script(text("Acorn Guest House is a guesthouse in the north with free parking."), match=HOTEL)
    switched = server.send("I am also looking for a hotel in the north with free parking.", cid)
    assert (switched["route"], switched["target_agent"]) == (Route.PIPELINE, "HotelAgent_1")
    assert server.wait_task(switched["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert routing_requests(llm) == before + 1

    # the agent that answered is the active one (stored by id): its follow-up goes straight to it
    llm.script(text("It is at 154 Chesterton Road."), match=HOTEL)
    follow = server.send("Could I get the full address as well?", cid)
    assert (follow["route"], follow["target_agent"]) == (Route.FAST_PATH, "HotelAgent_1")
    assert server.wait_task(follow["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert routing_requests(llm) == before + 1
