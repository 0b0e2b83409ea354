"""Closing the sandboxes started ahead leaves no process of ours running or unreaped, a start in flight
included (modules/tools/sandbox_warm.py): a test session's end and the server's exit rely on it."""

from __future__ import annotations

import os
import subprocess
import threading

from modules.tools import sandbox_warm
from modules.tools.sandbox_warm import Warm, WarmStarts


def _process_waiting_on_a_pipe() -> Warm:
    """A stand-in for bwrap waiting for its options: `cat` reading the options pipe until it is closed."""
    options_r, options_w = os.pipe()
    script_r, script_w = os.pipe()
    output_r, output_w = os.pipe()
    proc = subprocess.Popen(["cat"], stdin=options_r, stdout=output_w)
    for fd in (options_r, script_r, output_w):
        os.close(fd)
    return Warm(proc, options_w=options_w, script_w=script_w, script_fd=3, output_r=output_r, seccomp_fd=None,
                cgroup=None)


def test_closing_every_start_reaps_the_ready_one_and_the_one_in_flight():
    started: list[Warm] = []
    in_flight, may_finish = threading.Event(), threading.Event()

    def start() -> Warm:
        warm = _process_waiting_on_a_pipe()
        started.append(warm)
        if len(started) > 1:  # the next start is still under way when the starts are closed
            in_flight.set()
            assert may_finish.wait(10)
        return warm

    starts = WarmStarts(start)
    ready = None
    for _ in range(200):  # the first start, in the background (each take that finds none ready starts one)
        if (ready := starts.take()) is not None:
            break
        threading.Event().wait(0.05)
    assert ready is not None
    ready.discard()  # as a command would have used it
    assert in_flight.wait(10)
    may_finish.set()
    sandbox_warm.close_all()
    assert len(started) >= 2 and [w.proc.returncode for w in started] == [0] * len(started)  # all reaped
    count = len(started)
    assert starts.take() is None and len(started) == count  # closed: no start begins any more
