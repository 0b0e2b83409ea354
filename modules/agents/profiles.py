"""Agent profiles: who an agent is, what it may use, which model it calls.

Profiles come from a TOML file (`AGENT_PROFILES`, else the built-in
`default_profiles.toml`). A bad file stops start-up with a message that
names the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modules.config import read_toml

MASTER_KIND, SUB_AGENT_KIND = "master", "sub_agent"
DEFAULT_PROFILES_FILE = Path(__file__).resolve().parent / "default_profiles.toml"
_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class ProfileError(ValueError):
    """A profile file that cannot be used."""


@dataclass(frozen=True)
class AgentProfile:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...]
    kind: str = SUB_AGENT_KIND
    model: str | None = None
    keywords: tuple[str, ...] = ()  # domain terms: a message naming another agent's term leaves the fast path
    context_tokens: int | None = None  # the model's context window, over MODEL_CONTEXT_TOKENS and the table

    def system_message(self, display_name: str) -> str:
        """Every agent's system prompt names its display name (API.md, model-facing contract)."""
        return f"You are {display_name} ({self.name}). {self.system_prompt}"


def load_profiles(path: Path | None, known_tools: set[str]) -> dict[str, AgentProfile]:
    """Read and check a profile file; the master comes first in the result."""
    path = path or DEFAULT_PROFILES_FILE
    data = read_toml(path, ProfileError)
    entries = data.get("agent")
    if not isinstance(entries, list) or not entries:
        raise ProfileError(f"{path}: expected one or more [[agent]] tables")
    profiles: dict[str, AgentProfile] = {}
    for i, entry in enumerate(entries):
        where = f"{path}: agent #{i + 1}"

        def field(name: str, *, required: bool = True, kind: type = str, _e: dict[str, Any] = entry,
                  _w: str = where) -> Any:
            value = _e.get(name)
            if value is None:
                if required:
                    raise ProfileError(f"{_w}: field `{name}` is missing")
                return None
            if not isinstance(value, kind):
                raise ProfileError(f"{_w}: field `{name}` must be a {kind.__name__}")
            return value

        name = field("name")
        where = f"{path}: agent {name!r}"
        if not _NAME.match(name):
            raise ProfileError(f"{where}: field `name` must be PascalCase (e.g. InfoAgent)")
        if name in profiles:
            raise ProfileError(f"{where}: field `name` is used twice")
        kind = field("kind", required=False) or SUB_AGENT_KIND
        if kind not in (MASTER_KIND, SUB_AGENT_KIND):
            raise ProfileError(f"{where}: field `kind` must be 'master' or 'sub_agent'")
        tools = field("tools", kind=list)
        unknown = [t for t in tools if not isinstance(t, str) or t not in known_tools]
        if unknown:
            raise ProfileError(f"{where}: field `tools` names unknown tool(s) {unknown}; "
                               f"known: {sorted(known_tools)}")
        keywords = field("keywords", required=False, kind=list) or []
        if not all(isinstance(k, str) and k.strip() for k in keywords):
            raise ProfileError(f"{where}: field `keywords` must be a list of non-empty strings")
        context_tokens = field("context_tokens", required=False, kind=int)
        if context_tokens is not None and (isinstance(context_tokens, bool) or context_tokens < 256):
            raise ProfileError(f"{where}: field `context_tokens` must be an integer of at least 256")
        profiles[name] = AgentProfile(
            name=name, description=field("description"), system_prompt=field("system_prompt"),
            tools=tuple(tools), kind=kind, model=field("model", required=False) or None,
            keywords=tuple(k.strip() for k in keywords), context_tokens=context_tokens,
        )
    masters = [p for p in profiles.values() if p.kind == MASTER_KIND]
    if len(masters) != 1:
        raise ProfileError(f"{path}: field `kind`: exactly one profile must be the master, found {len(masters)}")
    master = masters[0]
    return {master.name: master, **{n: p for n, p in profiles.items() if n != master.name}}


def master_profile(profiles: dict[str, AgentProfile]) -> AgentProfile:
    return next(p for p in profiles.values() if p.kind == MASTER_KIND)
