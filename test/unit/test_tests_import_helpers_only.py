"""A test module imports helpers, never another test module (CONTRIBUTING.md, "The checks"): what two test
files share lives in a helper module (`test/integration/helpers.py`, `test/unit/teams.py`, ...), so running,
renaming or deleting one test file never changes another."""

from __future__ import annotations

import ast

from test.literal_scan import ROOT

TESTS = ROOT / "test"


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of each test module the source imports; `package` resolves relative imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            if _is_test_module(base):
                found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if _is_test_module(a.name)]
    return found


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        offenders += [f"{path.relative_to(ROOT)}:{line}: {module}"
                      for line, module in imported_test_modules(path.read_text(), package)]
    assert offenders == [], "move what they share into a helper module:\n" + "\n".join(offenders)


def test_the_scan_finds_each_way_of_importing_a_test_module():
    source = '''
from test.integration.test_demo_examples import Recorder
import test.unit.test_routing_units
from test.integration import test_slow_clients
from .test_notifications import helper
from test.integration.helpers import history
from test.conftest import wait_until
'''
    assert imported_test_modules(source, "test.integration") == [
        (2, "test.integration.test_demo_examples"), (3, "test.unit.test_routing_units"),
        (4, "test.integration.test_slow_clients"), (5, "test.integration.test_notifications")]
