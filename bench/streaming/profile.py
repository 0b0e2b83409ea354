"""`bench/load.py --profile`: where the product's CPU goes while it streams (issue 26).

py-spy (requirements-dev.txt) samples the server process from outside, without pausing it
(`--nonblocking`), and only while a thread is on the CPU (idle green threads sit in the hub's
`epoll` and are not sampled). Under eventlet every green thread runs on the one OS thread, so a
sample is the stack of the green thread that held the CPU at that moment: the figures are shares of
the process's CPU time. The collapsed stacks are kept in the bench's directory (`--keep`) and their
top functions printed twice: by own time (the code that burns the CPU) and by inclusive time (the
path that leads there, from the project's own files).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = 25


def py_spy() -> str | None:
    return shutil.which("py-spy") or (str(ROOT / ".venv" / "bin" / "py-spy")
                                      if (ROOT / ".venv" / "bin" / "py-spy").exists() else None)


class Sampler:
    """py-spy on one pid for the life of the context; `report()` reads what it wrote."""

    def __init__(self, pid: int, out: Path, rate: int = 67):
        self._cmd = [py_spy() or "py-spy", "record", "--pid", str(pid), "--format", "raw", "--output", str(out),
                     "--rate", str(rate), "--nonblocking"]
        self._out = out
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sampler:
        if self._proc is None:
            self._proc = subprocess.Popen(self._cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *_exc: object) -> None:
        """Stops the sampling (once; again is a no-op)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def start(self) -> None:
        self.__enter__()

    def stop(self) -> None:
        self.__exit__()

    def report(self) -> str:
        if not self._out.exists():
            return "profile: py-spy wrote nothing (is it installed, may it trace this process?)"
        return summarise(self._out.read_text())


def _frame_name(frame: str) -> str:
    """`func (path/to/file.py:12)` -> `func (file path relative to the project or the package)`."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/site-packages/", str(ROOT) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def summarise(collapsed: str) -> str:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    project: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
            if frame.split(" (", 1)[1].startswith(("modules/", "server/")):
                project[frame] += count
    if not total:
        return "profile: no samples"
    lines = [f"profile: {total} samples of the product from the send to the end of the streams (py-spy, CPU only)",
             "  own time:"]
    lines += [f"    {n / total:6.1%}  {frame}" for frame, n in own.most_common(TOP)]
    lines.append("  inclusive, the project's own functions:")
    lines += [f"    {n / total:6.1%}  {frame}" for frame, n in project.most_common(TOP)]
    return "\n".join(lines)
