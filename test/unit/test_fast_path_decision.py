"""The active-agent fast path's decision (`ActiveAgentFastPath.decide`, modules/multi_agent/active_agent.py) on a
real database: which agent it would go to, and when it is taken."""

from __future__ import annotations

import pytest

from modules.agents.profiles import AgentProfile
from modules.event_catalogue import SuggestionsEvent
from modules.multi_agent.active_agent import Active, ActiveAgentFastPath, ActiveAgentSessionStore
from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import load_routing_signals
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from modules.storage.models import Agent
from modules.storage.session_store import SessionStore
from test.unit.teams import conversation_with_sub_agent

STAGES = ("QueryRewritingAgent", "IntentRecognitionAgent", "RoutingAgent")


@pytest.fixture
def team(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, manager = conversation_with_sub_agent(db)
    signals = load_routing_signals(None)
    profiles = {"MasterAgent": AgentProfile("MasterAgent", "Leads the team.", "You lead.", (), kind="master"),
                "InfoAgent": AgentProfile("InfoAgent", "Explains travel policies.", "You explain.", ())}
    fast = ActiveAgentFastPath(db, ActiveAgentSessionStore(SessionStore(db)), signals,
                               TeamVocabulary.of(profiles, signals))
    yield db, conv, master, sub, manager, fast
    db.dispose()


def test_no_active_agent_means_no_fast_path(team):
    db, conv, master, sub, _, fast = team
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert (decided.active, decided.target, decided.taken, decided.reason) == (None, None, False, "no active agent")


def test_a_continuation_goes_to_the_active_sub_agent(team):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_agent(conv.id, sub.id)
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.target.id == sub.id and decided.taken


def test_the_active_agent_is_stored_by_id_so_a_renamed_agent_stays_active(team):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_agent(conv.id, sub.id)
    with db.write() as s:
        s.get(Agent, sub.id).display_name = "RenamedAgent_7"
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.target.display_name == "RenamedAgent_7" and decided.taken
    assert fast.store.get(conv.id) == Active(agent_id=sub.id)


def test_a_routing_stage_is_stored_apart_from_agents_and_is_no_target(team):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_agent(conv.id, sub.id)
    fast.store.set_active_stage(conv.id, master.display_name)  # a stage named like an agent is still no agent
    assert fast.store.get(conv.id) == Active(stage=master.display_name)
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.active is None and decided.target is None and not decided.taken


def test_a_record_by_display_name_of_an_earlier_version_reads_as_no_active_agent(team):
    db, conv, master, sub, _, fast = team
    SessionStore(db).set(ActiveAgentSessionStore.key(conv.id), ActiveAgentSessionStore.FIELD,
                         {"agentName": sub.display_name})
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.target is None and not decided.taken


def test_the_master_is_a_target_and_a_new_topic_is_not_taken(team):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_agent(conv.id, master.id)
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "帮我查一下杭州的差旅政策")
    assert decided.target.id == master.id and not decided.taken


@pytest.mark.parametrize("stage", STAGES)
def test_a_routing_stage_is_no_target(team, stage):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_stage(conv.id, stage)
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.active is None and decided.target is None and not decided.taken


def test_an_unknown_agent_id_is_no_target(team):
    db, conv, master, sub, _, fast = team
    fast.store.set_active_agent(conv.id, "no-such-agent")
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.active == "no-such-agent" and decided.target is None and not decided.taken


def test_a_terminated_sub_agent_is_no_target(team):
    db, conv, master, sub, manager, fast = team
    fast.store.set_active_agent(conv.id, sub.id)
    assert manager.mark_terminated(sub.id)
    decided = fast.decide(conv.id, agent_store.list_agents(db, conv.id), "好的")
    assert decided.target is None and not decided.taken


# -- the verdict reads the active agent's last reply and the chips offered after it ----------------------------

def _reply(db, conv, agent, text, task_id="t-1"):
    [msg] = message_store.append_messages(db, conv.id, agent.id, [
        MessageDraft(role="assistant", content=text, meta=MessageMeta(task_id=task_id))])
    return msg


def test_an_action_word_continues_only_after_a_reply_that_proposed_it(team):
    db, conv, master, sub, _, fast = team
    assert not fast.verdict(sub, "提交").continues  # nothing was proposed yet
    _reply(db, conv, sub, "杭州：住宿每晚 500 元以内。要我帮您提交报销吗？")
    assert fast.verdict(sub, "提交").continues


def test_an_action_word_offered_as_a_chip_after_the_last_reply_continues(team):
    db, conv, master, sub, _, fast = team
    with db.write() as s:
        task_id = task_store.create_task_in(s, conversation_id=conv.id, agent_id=sub.id, task_type="chat").id
    reply = _reply(db, conv, sub, "杭州：住宿每晚 500 元以内。", task_id)  # proposes nothing itself
    chip = "提交"
    assert not fast.verdict(sub, chip).continues
    task_store.insert_events(db, task_id, 0, [(SuggestionsEvent.TYPE, {"message_id": reply.message_id,
                                                                       "questions": [chip]})])
    assert fast.verdict(sub, chip).continues


def test_a_term_of_the_agents_own_domain_continues_and_another_agents_does_not(team):
    db, conv, master, sub, _, fast = team
    _reply(db, conv, sub, "Done.")
    _reply(db, conv, master, "Done.")
    # a word of InfoAgent's own description ties it to InfoAgent (the model may still send a short English
    # message to the routing request: modules/multi_agent/follow_up_model.py), never to the master
    assert fast.verdict(sub, "policy limits?").reason.endswith("own domain term")
    assert not fast.verdict(master, "policy limits?").continues  # InfoAgent's, not the master's
