"""Print the mutation score of the core per file, and every mutant that survived (`make mutate`).

Reads the `.meta` files mutmut 3 leaves under mutants/. A mutant no test covers counts as surviving:
it is a change nothing would notice. Timeouts count as killed (the tests noticed: they hung). Survivors
judged equivalent (tools/equivalent_mutants.toml, each with its reason) are listed apart from those that
still want a test; an entry that no longer names a survivor is reported as stale."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = tomllib.loads((ROOT / "tools" / "equivalent_mutants.toml").read_text())["equivalent"]
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          37: "type check"}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


def main() -> int:
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    total_killed = total = 0
    survivors: dict[str, str] = {}  # name -> "survived" or "no tests"
    read: list[str] = []  # the modules whose results were read
    print(f"{'file':45} {'killed':>7} {'of':>5} {'score':>7}  (unchecked)")
    for path in core:
        meta = ROOT / "mutants" / f"{path}.meta"
        if not meta.exists():
            print(f"{path:45} {'-':>7} {'-':>5} {'-':>7}  not run")
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        read.append(path.removesuffix(".py").replace("/", "."))
        checked = {name: code for name, code in codes.items() if code in KILLED or code in SURVIVED}
        killed = sum(code in KILLED for code in checked.values())
        total_killed, total = total_killed + killed, total + len(checked)
        survivors |= {name: SURVIVED[code] for name, code in sorted(checked.items()) if code in SURVIVED}
        score = f"{100 * killed / len(checked):.1f}%" if checked else "-"
        print(f"{path:45} {killed:7} {len(checked):5} {score:>7}  ({len(codes) - len(checked)})")
    if total:
        print(f"{'core':45} {total_killed:7} {total:5} {100 * total_killed / total:6.1f}%")
    equivalent = [name for name in survivors if name in EQUIVALENT]
    wanting = [name for name in survivors if name not in EQUIVALENT]
    stale = sorted(name for name in EQUIVALENT if name not in survivors
                   and any(name.startswith(f"{module}.x") for module in read))
    print(f"\n{len(equivalent)} surviving mutants judged equivalent (tools/equivalent_mutants.toml):")
    print("\n".join(f"  {name}: {EQUIVALENT[name]}" for name in equivalent))
    print(f"\n{len(wanting)} surviving mutants that want a test (see one with `.venv/bin/mutmut show <name>`):")
    print("\n".join(f"  {survivors[name]:9} {name}" for name in wanting))
    if stale:
        print(f"\n{len(stale)} stale entries of tools/equivalent_mutants.toml (killed now, renumbered or gone):")
        print("\n".join(f"  {name}" for name in stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
