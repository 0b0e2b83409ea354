"""How a setting is declared and read: one `setting(...)` per field of `Settings` (modules/config.py) names its
environment variable, its default and its doc; its reader turns the variable's text into the value.

The README's and docs/API.md's configuration tables are generated from the same declarations
(tools/gen_settings_tables.py), so a setting is written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Reader:
    """`parse(name, text)`: the value of a set variable (never called for an unset or blank one, which
    keeps the default); `kind`: what the variable takes, for the tables."""

    kind: str
    parse: Callable[[str, str], Any]


@dataclass(frozen=True)
class Var:
    name: str
    doc: str
    read: Reader
    shown: str | None  # the default as the tables show it, where the value itself would not say it


VAR = "setting"  # the key of a field's metadata that holds its Var


def setting(name: str, default: Any, doc: str, read: Reader, *, shown: str | None = None) -> Any:
    """A field of `Settings` read from the environment variable `name` (blank or unset: `default`)."""
    meta = {VAR: Var(name, doc, read, shown)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def declared(cls: type) -> list[tuple[Field[Any], Var]]:
    """Each setting of the dataclass with its declaration, in declaration order."""
    return [(f, f.metadata[VAR]) for f in fields(cls) if VAR in f.metadata]


def read_env(cls: type, env: dict[str, str]) -> dict[str, Any]:
    """The values of the settings whose variables are set (not blank) in `env`."""
    values: dict[str, Any] = {}
    for f, var in declared(cls):
        raw = env.get(var.name, "").strip()
        if raw:
            values[f.name] = var.read.parse(var.name, raw)
    return values


def default_of(f: Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


# -- readers ---------------------------------------------------------------------------------------------------

def _text(name: str, raw: str) -> str:
    return raw


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {value}")
    return value


def _number(allow_zero: bool) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError as exc:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
        if value < 0 or (value == 0 and not allow_zero):
            raise ConfigError(f"{name} must be {'zero or more' if allow_zero else 'positive'}, got {value}")
        return value
    return parse


def one_of(*choices: str) -> Reader:
    """One of `choices`, whatever its case; the value is the choice as declared."""
    def parse(name: str, raw: str) -> str:
        chosen = next((c for c in choices if c.lower() == raw.lower()), None)
        if chosen is None:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw.lower()!r}")
        return chosen
    return Reader("one of " + ", ".join(f"`{c}`" for c in choices), parse)


def _on_off(name: str, raw: str) -> bool:
    chosen: str = one_of("off", "on").parse(name, raw)
    return chosen == "on"


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


TEXT = Reader("text", _text)
PATH = Reader("path", lambda name, raw: Path(raw))
POSITIVE_INT = Reader("integer > 0", _positive_int)
POSITIVE = Reader("number > 0", _number(allow_zero=False))
NOT_NEGATIVE = Reader("number ≥ 0", _number(allow_zero=True))
ON_OFF = Reader("`on` or `off`", _on_off)
AUTH_TOKENS = Reader("`user:token,...`", lambda name, raw: parse_auth_tokens(raw))
HOST_NAMES = Reader("`name,...`", lambda name, raw: parse_allowed_hosts(raw))
