"""Finds the strings written where a value of a closed set goes (an event's name, a status), for the guards
`test/unit/test_event_names_in_catalogue_only.py` and `test/unit/test_status_literals.py`.

A value "goes" where it is compared with, assigned to, keyed by or passed as a field of the set: a name,
attribute, key or parameter whose last word (split at `_` or `-`) is one of the set's field words
(`status`, `agent_state`, `row["delivery"]`, `d.get("type")`, `data-status`), or such a word's `_of`
(`states_of(turn)`). Elsewhere the same words may mean other things (a role "user", a tool "ask_user").
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("modules", "server", "test", "bench", "tools", "deploy")
SELF = {"self", "cls"}


def python_files() -> list[Path]:
    """Every Python file of the repository (the generated UI types are TypeScript)."""
    return sorted([*ROOT.glob("*.py"), *(p for top in SCANNED for p in (ROOT / top).rglob("*.py"))])


def called(func: ast.AST) -> str | None:
    """The name a call or reference ends in: `f` of `f(...)`, `m` of `x.m(...)`."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that stand alone as statements (docstrings, notes)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and text(node.value) is not None}


@dataclass(frozen=True)
class Fields:
    """One closed set: its values and the words that name a field holding one."""

    values: frozenset[str]
    words: frozenset[str]
    other_attributes: frozenset[str] = frozenset()  # a page's attributes of such a name that hold other values

    def fieldish(self, word: str | None) -> bool:
        if word is None:
            return False
        parts = word.lower().replace("-", "_").split("_")
        return parts[-1] in self.words or (len(parts) == 2 and parts[1] == "of" and parts[0] in self.words)

    def literals(self, node: ast.AST) -> list[ast.Constant]:
        """The set's values a value holds: itself, or the items of a tuple, list or set written out."""
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [c for c in items if isinstance(c, ast.Constant) and text(c) in self.values]

    def field(self, node: ast.AST) -> bool:
        """Whether an expression reads a field: `x.status`, `state`, `row["delivery"]`, `types[-1]`,
        `d.get("route")`, `states_of(turn)`, `[a["state"] for a in agents]`."""
        if isinstance(node, (ast.Attribute, ast.Name)):
            return self.fieldish(called(node))
        if isinstance(node, ast.Subscript):
            key = text(node.slice)
            return self.fieldish(key) if key is not None else self.field(node.value)
        if isinstance(node, ast.Call):
            name = called(node.func)
            if name == "get" and node.args:
                return self.fieldish(text(node.args[0]))
            return self.fieldish(name)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.field(node.elt)
        return False

    def compared(self, node: ast.Compare) -> Iterator[ast.Constant]:
        sides = [node.left, *node.comparators]
        for pair in zip(sides, sides[1:], strict=False):
            for field, other in (pair, pair[::-1]):
                if isinstance(field, (ast.Tuple, ast.List)) and isinstance(other, (ast.Tuple, ast.List)) \
                        and len(field.elts) == len(other.elts):
                    for f, o in zip(field.elts, other.elts, strict=True):
                        if self.field(f):
                            yield from self.literals(o)
                elif self.field(field):
                    yield from self.literals(other)

    def assigned(self, target: ast.AST, value: ast.AST) -> list[ast.Constant]:
        """The values assigned to a field, one by one when a tuple is assigned to a tuple."""
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            return [c for t, v in zip(target.elts, value.elts, strict=True) for c in self.assigned(t, v)]
        return self.literals(value) if self.field(target) else []

    def parameters(self, trees: Iterable[ast.AST]) -> dict[str, set[int]]:
        """Function name -> the positions of its parameters that are fields (a test helper's
        `agent_is(..., state)`), so that a value passed to one by position is found too."""
        found: dict[str, set[int]] = {}
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
                    if params and params[0] in SELF:
                        params = params[1:]
                    positions = {i for i, name in enumerate(params) if self.fieldish(name)}
                    if positions:
                        found.setdefault(node.name, set()).update(positions)
        return found

    def placed(self, tree: ast.AST, parameters: dict[str, set[int]]) -> list[ast.Constant]:
        """Each value written as a string where a field's value goes."""
        found: list[ast.Constant] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                found += self.compared(node)
            elif isinstance(node, ast.keyword) and self.fieldish(node.arg):
                found += self.literals(node.value)
            elif isinstance(node, ast.Assign):
                found += [c for target in node.targets for c in self.assigned(target, node.value)]
            elif isinstance(node, ast.AnnAssign) and node.value is not None and self.field(node.target):
                found += self.literals(node.value)
            elif isinstance(node, ast.Dict):
                found += [c for key, value in zip(node.keys, node.values, strict=True)
                          if self.fieldish(text(key)) for c in self.literals(value)]
            elif isinstance(node, ast.Call):
                name = called(node.func)
                attribute = text(node.args[0]) if node.args else None
                if name == "to_have_attribute" and self.fieldish(attribute) and attribute not in self.other_attributes:
                    found += [c for arg in node.args[1:2] for c in self.literals(arg)]
                for i in parameters.get(name or "", ()):
                    found += [c for arg in node.args[i:i + 1] for c in self.literals(arg)]
        return found


def unique(nodes: Iterable[ast.Constant]) -> list[ast.Constant]:
    """Each node once, in the order of the source."""
    return sorted({id(c): c for c in nodes}.values(), key=lambda c: (c.lineno, c.col_offset))
