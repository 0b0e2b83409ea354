"""Settings read once from the environment (docs/API.md, "Configuration").

One frozen record is built at start-up and passed down; nothing below reads
`os.environ` again, so tests can build a Settings by hand. Each setting is declared
once, below: its variable, default and doc (`setting`, modules/settings_fields.py); the
README's and docs/API.md's tables are generated from these declarations
(`tools/gen_settings_tables.py`, checked by test/unit/test_settings_tables.py).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from modules.settings_fields import (
    AUTH_TOKENS,
    HOST_NAMES,
    NOT_NEGATIVE,
    ON_OFF,
    PATH,
    POSITIVE,
    POSITIVE_INT,
    TEXT,
    ConfigError,
    one_of,
    parse_allowed_hosts,
    parse_auth_tokens,
    read_env,
    setting,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["PROJECT_ROOT", "ConfigError", "Settings", "parse_allowed_hosts", "parse_auth_tokens", "read_toml"]


def read_toml(path: Path, error: type[ValueError]) -> dict[str, Any]:
    """A configuration file's TOML, or `error` naming the file."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None


@dataclass(frozen=True)
class Settings:
    host: str = setting("HOST", "127.0.0.1", "where the server listens (`run.py --host` too); without `AUTH_TOKENS` "
                        "it refuses a non-loopback host", TEXT)
    port: int = setting("PORT", 5000, "the port it listens on (`run.py --port` too)", POSITIVE_INT)
    database_url: str = setting(
        "DATABASE_URL", "", "any SQLAlchemy URL: SQLite, `postgresql+psycopg://...`, `mysql+pymysql://...`; the "
        "schema is migrated at start-up (`run.py --database-url` too)", TEXT, shown="`sqlite:///DATA_DIR/app.db`")
    data_dir: Path = setting("DATA_DIR", PROJECT_ROOT / "data", "the SQLite file, per-conversation workspaces, "
                             "command logs", PATH)
    redis_url: str | None = setting(
        "REDIS_URL", None, "several processes: Socket.IO message queue and peer signals (answers to asks, stops, "
        "wake-ups); its database number also names their pub/sub channels, so deployments on different numbers "
        "never hear each other", TEXT)
    openai_base_url: str | None = setting("OPENAI_BASE_URL", None, "any OpenAI-compatible endpoint (README, "
                                          "\"Providers\")", TEXT)
    openai_api_key: str | None = setting("OPENAI_API_KEY", None, "its key; with none, the offline demo model "
                                         "answers", TEXT)
    llm_model: str = setting("LLM_MODEL", "", "model of agents without their own", TEXT, shown="provider default")
    llm_model_rewrite: str = setting("LLM_MODEL_REWRITE", "", "model of query rewriting", TEXT, shown="`LLM_MODEL`")
    llm_model_intent: str = setting("LLM_MODEL_INTENT", "", "model of intent recognition and of the combined "
                                    "routing request", TEXT, shown="`LLM_MODEL`")
    llm_model_suggest: str = setting("LLM_MODEL_SUGGEST", "", "model of the suggested follow-up questions", TEXT,
                                     shown="`LLM_MODEL`")
    llm_model_compact: str = setting("LLM_MODEL_COMPACT", "", "model that writes context summaries (README, "
                                     "\"Long conversations\")", TEXT, shown="the agent's model")
    model_context_tokens: int | None = setting(
        "MODEL_CONTEXT_TOKENS", None, "context window of every agent's model in tokens (a profile's "
        "`context_tokens` wins); unset: the table of known names in `modules/context/budget.py` (an unknown name "
        "32,768). A quarter of it (at most 8,192) is kept for the reply; compaction starts at 80 % of the rest",
        POSITIVE_INT, shown="by model name")
    llm_timeout_s: float = setting("LLM_TIMEOUT_S", 120.0, "model call timeout per read: a stream that sends "
                                   "nothing for this long fails", POSITIVE)
    llm_max_connections: int = setting(
        "LLM_MAX_CONNECTIONS", 1000, "connections to the model endpoint open at once, each kept alive for the next "
        "request; one per stream, so at least the streams a process runs at once (a stream beyond it waits for "
        "a free one)", POSITIVE_INT)
    llm_max_retries: int = setting(
        "LLM_MAX_RETRIES", 4, "retries with exponential backoff on 429, 5xx, 408, timeouts, and an error event in "
        "the stream whose code names one (OpenRouter's after its answer began) or that names no status and no "
        "fault of the request (a gateway's \"Upstream error\"); a `Retry-After` (or "
        "`retry-after-ms`) is waited out as asked, up to 60 s, a longer one fails the call at once "
        "(`rate_limited`); a call that already streamed text is never retried", POSITIVE_INT)
    llm_backoff_base_s: float = setting("LLM_BACKOFF_BASE_S", 0.5, "the first retry's wait; each next one doubles "
                                        "it", POSITIVE)
    auth_tokens: dict[str, str] = setting(
        "AUTH_TOKENS", {}, "when set, every REST call and socket connection needs `Authorization: Bearer <token>` "
        "(socket: `auth={\"token\": ...}`); when unset a single local user owns everything, the server refuses to "
        "bind a non-loopback host, and it answers 403 `forbidden_host` to any request (HTTP or the Socket.IO "
        "handshake) whose `Host` header is not `localhost`, `127.0.0.1`, `[::1]`, `HOST` or in `ALLOWED_HOSTS`",
        AUTH_TOKENS)
    allowed_hosts: tuple[str, ...] = setting(
        "ALLOWED_HOSTS", (), "without `AUTH_TOKENS`: more names the `Host` header may carry, comma-separated, "
        "without port (e.g. the name a reverse proxy forwards)", HOST_NAMES)
    ask_timeout_s: float = setting("ASK_TIMEOUT_S", 600.0, "longest wait of a blocking ask (`ask_master`, "
                                   "`ask_user`, ...)", POSITIVE)
    command_timeout_s: float = setting("COMMAND_TIMEOUT_S", 600.0, "longest run of a background command",
                                       POSITIVE)
    sub_agent_timeout_s: float = setting("SUB_AGENT_TIMEOUT_S", 1800.0, "longest wait for a blocking sub-agent "
                                         "run", POSITIVE)
    max_message_chars: int = setting("MAX_MESSAGE_CHARS", 20_000, "a longer `message` answers 413 "
                                     "`message_too_large`", POSITIVE_INT)
    max_request_bytes: int = setting("MAX_REQUEST_BYTES", 256 * 1024, "a larger request body answers 413 "
                                     "`payload_too_large` (uploads are exempt)", POSITIVE_INT)
    max_tool_iterations: int = setting("MAX_TOOL_ITERATIONS", 25, "model calls per turn; beyond, the task fails "
                                       "with `iteration_limit`", POSITIVE_INT)
    notice_settle_ms: float = setting(
        "NOTICE_SETTLE_MS", 25.0, "a completion notice to an idle agent waits until no other arrived for this long "
        "(at most 500 ms), so one wave of completions costs one turn; 0: no wait", NOT_NEGATIVE)
    stream_flush_ms: float = setting(
        "STREAM_FLUSH_MS", 40.0, "consecutive `text_chunk`s (or `reasoning_chunk`s) of one message that arrive "
        "within this window are sent and logged as one (their `content` joined); 0 sends every chunk as it comes",
        NOT_NEGATIVE)
    stream_events_per_s: float = setting(
        "STREAM_EVENTS_PER_S", 1000.0, "under load, a message's later chunks wait longer than `STREAM_FLUSH_MS` (up "
        "to 1 s), so that the streams of a process send about this many chunk events a second in all (with S "
        "messages streaming: S / this many seconds); a message's first chunk keeps `STREAM_FLUSH_MS`; 0: never "
        "longer", NOT_NEGATIVE)
    group_commit_gather_ms: float = setting(
        "GROUP_COMMIT_GATHER_MS", 4.0, "SQLite: while a process writes for many streams at once, each shared write "
        "transaction first waits this long for more writers (as PostgreSQL's `commit_delay`); a quiet server's "
        "writes never wait; 0: never", NOT_NEGATIVE)
    peer_poll_s: float = setting("PEER_POLL_S", 1.0, "several processes: besides the Redis signals, how often a "
                                 "process reads the database for stops and answers meant for it", POSITIVE)
    db_timeout_s: float = setting(
        "DB_TIMEOUT_S", 5.0, "longest wait on the database: connect, pool checkout, one transaction (PostgreSQL "
        "`statement_timeout`, MySQL read/write timeouts, SQLite's file lock, and a whole-transaction deadline "
        "under eventlet)", POSITIVE)
    db_pool_size: int = setting(
        "DB_POOL_SIZE", 20, "PostgreSQL/MySQL connections a process keeps; the heartbeat has one more of its own. N "
        "processes need N x (size + overflow + 1) under the server's `max_connections` (PostgreSQL's default 100 "
        "fits 2 processes)", POSITIVE_INT)
    db_pool_overflow: int = setting("DB_POOL_OVERFLOW", 20, "connections a process may open beyond "
                                    "`DB_POOL_SIZE` under load", POSITIVE_INT)
    command_output_tail_chars: int = setting("COMMAND_OUTPUT_TAIL_CHARS", 8_000, "the end of a command's output "
                                             "that its result and notice carry", POSITIVE_INT)
    sandbox: str = setting(
        "SANDBOX", "auto", "where commands run (README, \"Command sandbox\"): `auto` sandboxes them when "
        "bubblewrap works here; `on` refuses commands when it does not; `off` runs them with the server's "
        "authority", one_of("auto", "on", "off"))
    sandbox_network: bool = setting("SANDBOX_NETWORK", False, "`on` gives commands a network of their own "
                                    "(slirp4netns) that cannot reach this host's loopback", ON_OFF)
    command_memory_mb: int = setting("COMMAND_MEMORY_MB", 2048, "memory of a whole command (its cgroup; also each "
                                     "process's address space)", POSITIVE_INT)
    command_max_processes: int = setting(
        "COMMAND_MAX_PROCESSES", 256, "processes of a whole command (its cgroup; without one, processes per "
        "conversation on a root server)", POSITIVE_INT)
    command_file_mb: int = setting("COMMAND_FILE_MB", 1024, "largest file a command writes", POSITIVE_INT)
    command_log_max_bytes: int = setting("COMMAND_LOG_MAX_BYTES", 1024 * 1024, "a command's log on disk keeps its "
                                         "first and last half of this (the middle dropped, with a marker)",
                                         POSITIVE_INT)
    command_log_retention_days: float = setting("COMMAND_LOG_RETENTION_DAYS", 7.0, "logs of ended commands are "
                                                "deleted after this many days", POSITIVE)
    demo_chunk_delay_s: float = setting("DEMO_CHUNK_DELAY_S", 0.02, "the offline demo model's pause between "
                                        "streamed chunks; 0: none", NOT_NEGATIVE)
    upload_max_mb: float = setting("UPLOAD_MAX_MB", 10.0, "a larger file uploaded into a workspace answers 413 "
                                   "`file_too_large` (uploads are exempt from `MAX_REQUEST_BYTES`)", POSITIVE)
    client_header_timeout_s: float = setting("CLIENT_HEADER_TIMEOUT_S", 10.0, "slow clients: once a request's "
                                             "first byte arrived, its request line and headers must all arrive "
                                             "within this", POSITIVE)
    client_idle_timeout_s: float = setting("CLIENT_IDLE_TIMEOUT_S", 30.0, "a connection with no request (new, or "
                                           "kept alive between requests) is closed after this", POSITIVE)
    client_body_timeout_s: float = setting(
        "CLIENT_BODY_TIMEOUT_S", 60.0, "each read of a body and each write of an answer may wait this long (keep "
        "it above Engine.IO's 45 s ping cycle: a WebSocket idles that long)", POSITIVE)
    client_max_connections: int = setting(
        "CLIENT_MAX_CONNECTIONS", 128, "connections one client address may hold at once; the next is answered 429 "
        "`too_many_connections` and closed (behind a reverse proxy all clients share its address: raise it "
        "there)", POSITIVE_INT)
    max_commands_per_conversation: int = setting(
        "MAX_COMMANDS_PER_CONVERSATION", 32, "background commands that may run at once in one conversation "
        "(counted in the database, so across processes); `run_command` past it answers `success: false` naming "
        "the cap, and starts nothing", POSITIVE_INT)
    max_commands_per_user: int = setting("MAX_COMMANDS_PER_USER", 64, "the same, over all of one user's "
                                         "conversations", POSITIVE_INT)
    max_foreground_commands_per_user: int = setting(
        "MAX_FOREGROUND_COMMANDS_PER_USER", 32, "foreground commands (`run_command` waiting for its result) that may "
        "run at once over all of one user's conversations (counted in the database, so across processes); past it "
        "`run_command` answers `success: false` naming the cap, and starts nothing. A turn runs one at a time, so "
        "a conversation runs at most one for each of its agents at work", POSITIVE_INT)
    max_sub_agents_per_conversation: int = setting(
        "MAX_SUB_AGENTS_PER_CONVERSATION", 16, "sub-agents neither completed nor terminated that one conversation "
        "may have at once; `create_sub_agent` past it answers `success: false` naming the cap", POSITIVE_INT)
    max_sub_agents_per_user: int = setting("MAX_SUB_AGENTS_PER_USER", 64, "the same, over all of one user's "
                                           "conversations", POSITIVE_INT)
    rate_limit_sends_per_min: int = setting(
        "RATE_LIMIT_SENDS_PER_MIN", 120, "per user and clock minute: sends (`POST /api/tasks`, the socket's "
        "`send_message`, an edit, a regenerate: each starts a turn); past it, 429 `rate_limited` with "
        "`Retry-After` (also `retry_after_s` in the body) or an error acknowledgement with `status: 429`, and "
        "nothing is stored. Counted in Redis when `REDIS_URL` is set (every process shares the count), else in the "
        "process; a Redis that does not answer lets requests through", POSITIVE_INT)
    workspace_max_mb: int = setting(
        "WORKSPACE_MAX_MB", 2048, "what a conversation's workspace may hold (its files' allocated blocks): "
        "`run_command` is refused with a tool error past it, and a running command is stopped once it passes it",
        POSITIVE_INT)
    workspace_quota: str = setting(
        "WORKSPACE_QUOTA", "auto", "how `WORKSPACE_MAX_MB` holds (README, \"Command sandbox\"): `loop` = by the "
        "kernel, each workspace a loop-mounted ext4 image of that size (a root server that may mount; it refuses "
        "to start otherwise); `poll` = by reading the workspace's size four times a second; `auto` = `loop` "
        "where it works, else `poll`", one_of("auto", "loop", "poll"))
    data_disk_reserve_mb: int = setting(
        "DATA_DISK_RESERVE_MB", 256, "free space the data disk (`DATA_DIR`) keeps for the server's own writes: "
        "below it commands are refused and stopped as for `WORKSPACE_MAX_MB`, and an upload answers 507 "
        "`insufficient_storage`", POSITIVE_INT)
    rate_limit_conversations_per_min: int = setting(
        "RATE_LIMIT_CONVERSATIONS_PER_MIN", 60, "as `RATE_LIMIT_SENDS_PER_MIN`, for new conversations "
        "(`POST /api/conversations`, and a send without `conversation_id`)", POSITIVE_INT)
    rate_limit_socket_events_per_min: int = setting(
        "RATE_LIMIT_SOCKET_EVENTS_PER_MIN", 1200, "as `RATE_LIMIT_SENDS_PER_MIN`, for socket events",
        POSITIVE_INT)
    frontend_dir: Path = setting("FRONTEND_DIR", PROJECT_ROOT / "frontend" / "dist", "the built UI the server "
                                 "serves (README, \"The UI\")", PATH)
    agent_profiles_path: Path | None = setting(
        "AGENT_PROFILES", None, "path of a TOML file of agent profiles (docs/API.md, \"Configuration\")", PATH,
        shown="built-in file")
    routing_signals_path: Path | None = setting(
        "ROUTING_SIGNALS", None, "path of a TOML file with the fast path's word lists: `continuation` and "
        "`topic_switch` (required), `fillers`, `action`, `reference`, `new_request`, `attribute_prefix`, "
        "`function_words` (optional; a missing one is the built-in list)", PATH, shown="built-in file")
    routing_stages: str = setting(
        "ROUTING_STAGES", "combined", "where the fast path's rules cannot decide: `combined` = one routing request "
        "(rewrite and intent in one answer, naming the active agent); `separate` = query rewriting, then intent "
        "recognition", one_of("combined", "separate"))
    model_prices_path: Path | None = setting(
        "MODEL_PRICES", None, "path of a TOML file: `[models.\"<model>\"]` with `input`, `cached_input` (default "
        "`input`) and `output`, each per million tokens; turns the ledger's tokens into `cost` (the entry of the "
        "model that answered, else of the one asked for: OpenAI answers with a dated snapshot's name); a model "
        "without an entry has `cost: null`", PATH)
    budget_tokens_per_day: float | None = setting(
        "BUDGET_TOKENS_PER_DAY", None, "each user's limit of tokens (prompt + completion of every model request: "
        "agents, routing, suggestions, compaction) in the current UTC day", POSITIVE)
    budget_tokens_per_month: float | None = setting("BUDGET_TOKENS_PER_MONTH", None, "the same, in the current UTC "
                                                    "month", POSITIVE)
    budget_cost_per_day: float | None = setting("BUDGET_COST_PER_DAY", None, "each user's limit of cost (by "
                                                "`MODEL_PRICES`, which must then be set) in the current UTC day",
                                                POSITIVE)
    budget_cost_per_month: float | None = setting("BUDGET_COST_PER_MONTH", None, "the same, in the current UTC "
                                                  "month", POSITIVE)
    metrics_token: str | None = setting(
        "METRICS_TOKEN", None, "with `AUTH_TOKENS` set, `GET /metrics` wants `Authorization: Bearer "
        "<METRICS_TOKEN>` (401 `unauthorized` otherwise, and always while it is unset); set without "
        "`AUTH_TOKENS`, it is wanted too", TEXT)
    traces: str = setting(
        "TRACES", "off", "`otlp`: OpenTelemetry traces of each turn (the turn, the routing, each model request and "
        "tool call) over OTLP/HTTP to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (the "
        "exporter's standard `OTEL_*` variables apply)", one_of("off", "otlp"))
    log_level: str = setting("LOG_LEVEL", "INFO", "the server's log level",
                             one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))

    def __post_init__(self) -> None:
        if not self.database_url:  # the default database lives under DATA_DIR
            object.__setattr__(self, "database_url", f"sqlite:///{self.data_dir / 'app.db'}")
        if (self.budget_cost_per_day or self.budget_cost_per_month) and self.model_prices_path is None:
            # Without prices every cost is null: the budget would never apply, and nothing would say so.
            raise ConfigError("BUDGET_COST_PER_DAY and BUDGET_COST_PER_MONTH count cost by MODEL_PRICES: set "
                              "MODEL_PRICES too")

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
        """The declared settings whose variables are set (a blank one counts as unset); the rest default."""
        return cls(**read_env(cls, dict(os.environ if env is None else env)))
