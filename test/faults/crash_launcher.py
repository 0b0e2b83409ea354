"""`run.py` whose first turn end crashes (a bug the turn's thread does not survive), for the watchdog's tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run  # noqa: E402  (patches the standard library for eventlet first)
from server.tasks import models  # noqa: E402

CRASH = "injected: the turn's end crashed"
_finish = models.TaskManager._finish
_crashed: list[str] = []


def _crashing_finish(self, running, outcome):
    if not _crashed:
        _crashed.append(running.turn.task_id)
        raise RuntimeError(CRASH)
    return _finish(self, running, outcome)


models.TaskManager._finish = _crashing_finish

if __name__ == "__main__":
    sys.exit(run.main(sys.argv[1:]))
