"""The smallest team the unit tests build on a real database: a conversation, its master, one sub-agent."""

from __future__ import annotations

from modules.agents.profiles import load_profiles
from modules.storage import conversations
from modules.storage.db import Database
from modules.storage.models import Agent, Conversation
from modules.storage.users import get_or_create_user
from modules.sub_agent.manager import SubAgentManager
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.run_command import RUN_COMMAND

TOOL_NAMES = frozenset(t.name for t in (RUN_COMMAND, *AGENT_TOOLS))  # every tool a profile may name


def conversation_with_sub_agent(db: Database) -> tuple[Conversation, Agent, Agent, SubAgentManager]:
    """Migrate `db`, then make a conversation with its master and an InfoAgent sub-agent (and their manager)."""
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    manager = SubAgentManager(db, load_profiles(None, TOOL_NAMES))
    return conv, master, manager.create_sub_agent(master, "InfoAgent", "task"), manager
