"""Print the mutation score of the core per file, and every mutant that survived (`make mutate`).

Reads the `.meta` files mutmut 3 leaves under mutants/. A mutant no test covers counts as surviving:
it is a change nothing would notice. Timeouts count as killed (the tests noticed: they hung)."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          37: "type check"}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


def main() -> int:
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    total_killed = total = 0
    survivors: list[str] = []
    print(f"{'file':45} {'killed':>7} {'of':>5} {'score':>7}  (unchecked)")
    for path in core:
        meta = ROOT / "mutants" / f"{path}.meta"
        if not meta.exists():
            print(f"{path:45} {'-':>7} {'-':>5} {'-':>7}  not run")
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        checked = {name: code for name, code in codes.items() if code in KILLED or code in SURVIVED}
        killed = sum(code in KILLED for code in checked.values())
        total_killed, total = total_killed + killed, total + len(checked)
        survivors += [f"{SURVIVED[code]:9} {name}" for name, code in sorted(checked.items()) if code in SURVIVED]
        score = f"{100 * killed / len(checked):.1f}%" if checked else "-"
        print(f"{path:45} {killed:7} {len(checked):5} {score:>7}  ({len(codes) - len(checked)})")
    if total:
        print(f"{'core':45} {total_killed:7} {total:5} {100 * total_killed / total:6.1f}%")
    print(f"\n{len(survivors)} surviving mutants (see one with `.venv/bin/mutmut show <name>`):")
    print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
