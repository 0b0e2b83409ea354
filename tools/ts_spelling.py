"""How a Python annotation is spelt in TypeScript, for the generators of frontend/src/generated/
(tools/gen_event_types.py, tools/gen_statuses.py, tools/gen_api_types.py): one spelling, so the UI's types agree
with each other."""

from __future__ import annotations

import types
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

from pydantic import BaseModel
from typing_extensions import get_type_hints, is_typeddict


def is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and is_typeddict(tp)


def ts(tp: Any, named: dict[str, type]) -> str:
    """The TypeScript spelling of one annotation; nested TypedDicts and models are collected into `named`."""
    origin = get_origin(tp)
    if origin in (NotRequired, Required):
        return ts(get_args(tp)[0], named)
    if is_typed_dict(tp) or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        named.setdefault(tp.__name__, tp)
        return tp.__name__
    if (isinstance(tp, type) and issubclass(tp, StrEnum)) or origin is Literal:
        return " | ".join(_members(tp, named))
    if tp is Any:
        return "unknown"
    if tp is type(None) or tp is None:
        return "null"
    simple = {str: "string", int: "number", float: "number", bool: "boolean"}
    if tp in simple:
        return simple[tp]
    if origin in (list, tuple):
        inner = ts(get_args(tp)[0], named)
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<string, {ts(get_args(tp)[1], named)}>"
    if origin in (Union, types.UnionType):  # each member once: enums of one union may share values
        return " | ".join(dict.fromkeys(m for a in get_args(tp) for m in _members(a, named)))
    raise TypeError(f"no TypeScript spelling for {tp!r}")


def _members(tp: Any, named: dict[str, type]) -> list[str]:
    """A union member's spellings: an enum's or a Literal's values one by one, anything else whole."""
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return [f'"{member.value}"' for member in tp]
    if get_origin(tp) is Literal:
        return [f'"{v}"' if isinstance(v, str) else str(v).lower() for v in get_args(tp)]
    return [ts(tp, named)]


def doc_comment(cls: type) -> str:
    """The class's docstring as a one-line TSDoc comment (none for a generated dataclass docstring)."""
    doc = (cls.__doc__ or "").strip()
    if not doc or doc.startswith(f"{cls.__name__}("):
        return ""
    return "/** " + " ".join(doc.split()) + " */\n"


def interface(name: str, fields: dict[str, tuple[Any, bool]], named: dict[str, type], doc: str = "") -> str:
    """`export interface name { ... }` of fields name -> (annotation, required)."""
    lines = [f"  {key}{'' if required else '?'}: {ts(tp, named)};" for key, (tp, required) in fields.items()]
    return f"{doc}export interface {name} {{\n" + "\n".join(lines) + "\n}\n"


def typed_dict_fields(td: type) -> dict[str, tuple[Any, bool]]:
    hints = get_type_hints(td, include_extras=True)
    return {key: (tp, key not in td.__optional_keys__) for key, tp in hints.items()}  # type: ignore[attr-defined]


def model_fields(model: type[BaseModel]) -> dict[str, tuple[Any, bool]]:
    """A response model's fields by alias: all sent, unless the model says it may leave out those with a
    default (`sends_defaults`, an error body's)."""
    whole = getattr(model, "sends_defaults", True)
    return {(field.alias or name): (field.annotation, whole or field.is_required())
            for name, field in model.model_fields.items()}


def render_named(named: dict[str, type]) -> dict[str, str]:
    """An interface for each collected TypedDict or model, nested ones found while rendering, by name."""
    blocks: dict[str, str] = {}
    done: set[str] = set()
    while len(done) < len(named):
        for name in sorted(set(named) - done):
            cls = named[name]
            fields = model_fields(cls) if issubclass(cls, BaseModel) else typed_dict_fields(cls)
            blocks[name] = interface(name, fields, named, doc_comment(cls))
            done.add(name)
    return blocks


def write_or_check(output: Path, text: str, script: str, argv: list[str]) -> int:
    """A generator's command line: rewrite `output`, or with `--check` exit 1 when it is stale."""
    if "--check" in argv:
        if not output.exists() or output.read_text() != text:
            print(f"{output} is stale: run .venv/bin/python {script}")
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(f"wrote {output}")
    return 0
