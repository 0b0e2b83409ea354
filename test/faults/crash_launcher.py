"""`run.py` whose first turn end crashes (a bug the turn's thread does not survive), for the watchdog's tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run  # noqa: E402  (patches the standard library for eventlet first)
from server.turns import manager  # noqa: E402

CRASH = "injected: the turn's end crashed"
_finish = manager.TurnManager._finish
_crashed: list[str] = []


def _crashing_finish(self, turn, sender, outcome):
    if not _crashed:
        _crashed.append(turn.task_id)
        raise RuntimeError(CRASH)
    return _finish(self, turn, sender, outcome)


manager.TurnManager._finish = _crashing_finish

if __name__ == "__main__":
    sys.exit(run.main(sys.argv[1:]))
