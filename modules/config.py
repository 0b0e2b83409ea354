"""Settings read once from the environment (API.md, "Configuration").

One frozen record is built at start-up and passed down; nothing below reads
`os.environ` again, so tests can build a Settings by hand.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


def read_toml(path: Path, error: type[ValueError]) -> dict[str, Any]:
    """A configuration file's TOML, or `error` naming the file."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None


def _int(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {value}")
    return value


def _choice(env: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, the first when unset."""
    raw = env.get(name, "").strip().lower()
    if raw and raw not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw or choices[0]


def _float(env: dict[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'zero or more' if allow_zero else 'positive'}, got {value}")
    return value


def _limit(env: dict[str, str], name: str) -> float | None:
    """An optional positive budget: unset (or empty) is no limit."""
    if not env.get(name, "").strip():
        return None
    return _float(env, name, 0.0)


def parse_auth_tokens(raw: str) -> dict[str, str]:
    """`user:token,...` -> {token: user}. Rejects malformed pairs loudly."""
    tokens: dict[str, str] = {}
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        user, sep, token = part.partition(":")
        if not sep or not user.strip() or not token.strip():
            raise ConfigError(f"AUTH_TOKENS entry {part!r} is not of the form user:token")
        tokens[token.strip()] = user.strip()
    return tokens


def parse_allowed_hosts(raw: str) -> tuple[str, ...]:
    """`name,...` -> the extra names a request's Host header may carry (any port); lower-cased."""
    names = tuple(n.strip().lower() for n in raw.split(",") if n.strip())
    for name in names:
        bracketed = name.startswith("[")
        if "/" in name or (bracketed and not name.endswith("]")) or (not bracketed and name.count(":") == 1):
            raise ConfigError(f"ALLOWED_HOSTS entry {name!r} must be a host name without scheme or port")
    return names


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 5000
    database_url: str = f"sqlite:///{PROJECT_ROOT / 'data' / 'app.db'}"
    data_dir: Path = PROJECT_ROOT / "data"
    redis_url: str | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    llm_model: str = ""
    llm_model_rewrite: str = ""
    llm_model_intent: str = ""
    llm_model_suggest: str = ""
    llm_model_compact: str = ""  # the model that writes context summaries; unset: the agent's own
    model_context_tokens: int | None = None  # every model's context window; unset: modules/context/budget.py
    llm_timeout_s: float = 120.0
    llm_max_retries: int = 4
    llm_backoff_base_s: float = 0.5
    auth_tokens: dict[str, str] = field(default_factory=dict)
    allowed_hosts: tuple[str, ...] = ()
    ask_timeout_s: float = 600.0
    command_timeout_s: float = 600.0
    sub_agent_timeout_s: float = 1800.0
    max_message_chars: int = 20_000
    max_request_bytes: int = 256 * 1024
    max_tool_iterations: int = 25
    notice_settle_ms: float = 25.0
    stream_flush_ms: float = 40.0
    peer_poll_s: float = 1.0
    db_timeout_s: float = 5.0
    db_pool_size: int = 20
    db_pool_overflow: int = 20
    command_output_tail_chars: int = 8_000
    sandbox: str = "auto"
    sandbox_network: bool = False
    command_memory_mb: int = 2048
    command_max_processes: int = 256
    command_file_mb: int = 1024
    command_log_max_bytes: int = 1024 * 1024
    command_log_retention_days: float = 7.0
    demo_chunk_delay_s: float = 0.02
    upload_max_mb: float = 10.0
    client_header_timeout_s: float = 10.0
    client_idle_timeout_s: float = 30.0
    client_body_timeout_s: float = 60.0
    client_max_connections: int = 128
    max_commands_per_conversation: int = 32
    max_commands_per_user: int = 64
    max_sub_agents_per_conversation: int = 16
    max_sub_agents_per_user: int = 64
    rate_limit_sends_per_min: int = 120
    workspace_max_mb: int = 2048
    data_disk_reserve_mb: int = 256
    rate_limit_conversations_per_min: int = 60
    rate_limit_socket_events_per_min: int = 1200
    frontend_dir: Path = PROJECT_ROOT / "frontend" / "dist"
    agent_profiles_path: Path | None = None
    routing_signals_path: Path | None = None
    routing_stages: str = "combined"  # or "separate": query rewriting, then intent recognition
    model_prices_path: Path | None = None  # MODEL_PRICES: price per million tokens of each model (TOML)
    budget_tokens_per_day: float | None = None  # per user; None: no limit
    budget_tokens_per_month: float | None = None
    budget_cost_per_day: float | None = None
    budget_cost_per_month: float | None = None
    metrics_token: str | None = None  # METRICS_TOKEN: what /metrics wants as a bearer token with AUTH_TOKENS
    traces: str = "off"  # TRACES: `otlp` exports OpenTelemetry traces of turns (modules/tracing.py)

    @property
    def workspaces_dir(self) -> Path:
        return self.data_dir / "workspaces"

    @property
    def uses_demo_model(self) -> bool:
        return not self.openai_api_key

    @property
    def auth_required(self) -> bool:
        return bool(self.auth_tokens)

    def stage_model(self, stage: str) -> str:
        """Model of a pipeline stage (`rewrite`, `intent`, `suggest`), falling back to LLM_MODEL."""
        return getattr(self, f"llm_model_{stage}") or self.llm_model

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        data_dir = Path(env.get("DATA_DIR") or PROJECT_ROOT / "data")
        base = cls()
        llm_model = env.get("LLM_MODEL", "").strip()
        return cls(
            host=env.get("HOST", base.host).strip() or base.host,
            port=_int(env, "PORT", base.port),
            database_url=env.get("DATABASE_URL", "").strip() or f"sqlite:///{data_dir / 'app.db'}",
            data_dir=data_dir,
            redis_url=env.get("REDIS_URL", "").strip() or None,
            openai_base_url=env.get("OPENAI_BASE_URL", "").strip() or None,
            openai_api_key=env.get("OPENAI_API_KEY", "").strip() or None,
            llm_model=llm_model,
            llm_model_rewrite=env.get("LLM_MODEL_REWRITE", "").strip(),
            llm_model_intent=env.get("LLM_MODEL_INTENT", "").strip(),
            llm_model_suggest=env.get("LLM_MODEL_SUGGEST", "").strip(),
            llm_model_compact=env.get("LLM_MODEL_COMPACT", "").strip(),
            model_context_tokens=_int(env, "MODEL_CONTEXT_TOKENS", 0) or None,
            llm_timeout_s=_float(env, "LLM_TIMEOUT_S", base.llm_timeout_s),
            llm_max_retries=_int(env, "LLM_MAX_RETRIES", base.llm_max_retries),
            llm_backoff_base_s=_float(env, "LLM_BACKOFF_BASE_S", base.llm_backoff_base_s),
            auth_tokens=parse_auth_tokens(env.get("AUTH_TOKENS", "")),
            allowed_hosts=parse_allowed_hosts(env.get("ALLOWED_HOSTS", "")),
            ask_timeout_s=_float(env, "ASK_TIMEOUT_S", base.ask_timeout_s),
            command_timeout_s=_float(env, "COMMAND_TIMEOUT_S", base.command_timeout_s),
            sub_agent_timeout_s=_float(env, "SUB_AGENT_TIMEOUT_S", base.sub_agent_timeout_s),
            max_message_chars=_int(env, "MAX_MESSAGE_CHARS", base.max_message_chars),
            max_request_bytes=_int(env, "MAX_REQUEST_BYTES", base.max_request_bytes),
            max_tool_iterations=_int(env, "MAX_TOOL_ITERATIONS", base.max_tool_iterations),
            notice_settle_ms=_float(env, "NOTICE_SETTLE_MS", base.notice_settle_ms, allow_zero=True),
            stream_flush_ms=_float(env, "STREAM_FLUSH_MS", base.stream_flush_ms, allow_zero=True),
            peer_poll_s=_float(env, "PEER_POLL_S", base.peer_poll_s),
            db_timeout_s=_float(env, "DB_TIMEOUT_S", base.db_timeout_s),
            db_pool_size=_int(env, "DB_POOL_SIZE", base.db_pool_size),
            db_pool_overflow=_int(env, "DB_POOL_OVERFLOW", base.db_pool_overflow),
            sandbox=_choice(env, "SANDBOX", ("auto", "on", "off")),
            sandbox_network=_choice(env, "SANDBOX_NETWORK", ("off", "on")) == "on",
            command_memory_mb=_int(env, "COMMAND_MEMORY_MB", base.command_memory_mb),
            command_max_processes=_int(env, "COMMAND_MAX_PROCESSES", base.command_max_processes),
            command_file_mb=_int(env, "COMMAND_FILE_MB", base.command_file_mb),
            command_log_max_bytes=_int(env, "COMMAND_LOG_MAX_BYTES", base.command_log_max_bytes),
            command_log_retention_days=_float(env, "COMMAND_LOG_RETENTION_DAYS", base.command_log_retention_days),
            demo_chunk_delay_s=_float(env, "DEMO_CHUNK_DELAY_S", base.demo_chunk_delay_s, allow_zero=True),
            upload_max_mb=_float(env, "UPLOAD_MAX_MB", base.upload_max_mb),
            client_header_timeout_s=_float(env, "CLIENT_HEADER_TIMEOUT_S", base.client_header_timeout_s),
            client_idle_timeout_s=_float(env, "CLIENT_IDLE_TIMEOUT_S", base.client_idle_timeout_s),
            client_body_timeout_s=_float(env, "CLIENT_BODY_TIMEOUT_S", base.client_body_timeout_s),
            client_max_connections=_int(env, "CLIENT_MAX_CONNECTIONS", base.client_max_connections),
            max_commands_per_conversation=_int(env, "MAX_COMMANDS_PER_CONVERSATION",
                                               base.max_commands_per_conversation),
            max_commands_per_user=_int(env, "MAX_COMMANDS_PER_USER", base.max_commands_per_user),
            max_sub_agents_per_conversation=_int(env, "MAX_SUB_AGENTS_PER_CONVERSATION",
                                                 base.max_sub_agents_per_conversation),
            max_sub_agents_per_user=_int(env, "MAX_SUB_AGENTS_PER_USER", base.max_sub_agents_per_user),
            rate_limit_sends_per_min=_int(env, "RATE_LIMIT_SENDS_PER_MIN", base.rate_limit_sends_per_min),
            workspace_max_mb=_int(env, "WORKSPACE_MAX_MB", base.workspace_max_mb),
            data_disk_reserve_mb=_int(env, "DATA_DISK_RESERVE_MB", base.data_disk_reserve_mb),
            rate_limit_conversations_per_min=_int(env, "RATE_LIMIT_CONVERSATIONS_PER_MIN",
                                                  base.rate_limit_conversations_per_min),
            rate_limit_socket_events_per_min=_int(env, "RATE_LIMIT_SOCKET_EVENTS_PER_MIN",
                                                  base.rate_limit_socket_events_per_min),
            frontend_dir=Path(env.get("FRONTEND_DIR") or base.frontend_dir),
            agent_profiles_path=Path(env["AGENT_PROFILES"]) if env.get("AGENT_PROFILES") else None,
            routing_signals_path=Path(env["ROUTING_SIGNALS"]) if env.get("ROUTING_SIGNALS") else None,
            routing_stages=_choice(env, "ROUTING_STAGES", ("combined", "separate")),
            model_prices_path=Path(env["MODEL_PRICES"]) if env.get("MODEL_PRICES") else None,
            budget_tokens_per_day=_limit(env, "BUDGET_TOKENS_PER_DAY"),
            budget_tokens_per_month=_limit(env, "BUDGET_TOKENS_PER_MONTH"),
            budget_cost_per_day=_limit(env, "BUDGET_COST_PER_DAY"),
            budget_cost_per_month=_limit(env, "BUDGET_COST_PER_MONTH"),
            metrics_token=env.get("METRICS_TOKEN", "").strip() or None,
            traces=_choice(env, "TRACES", ("off", "otlp")),
        )
