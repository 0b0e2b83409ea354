"""bench/streaming/cpu.py: the CPU seconds of a component over a window, and what they say bounds streams/s."""

from __future__ import annotations

import subprocess
import sys

from bench.streaming import cpu
from test.conftest import wait_until


def _cpu_s(pid: int) -> float:
    got = cpu._stat(pid)
    return got[0] / cpu.TICKS if got else 0.0


def test_the_meter_counts_a_process_cpu_from_the_start_of_the_window_only():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        wait_until(lambda: _cpu_s(spinner.pid) >= 0.2, 20, what="the spinner to burn 0.2 s before the window")
        before = _cpu_s(spinner.pid)
        meter = cpu.CpuMeter(lambda: {"server": [spinner.pid], "gone": [2 ** 22 + 1]}, lambda: {"rows": 10})
        meter.start()
        wait_until(lambda: _cpu_s(spinner.pid) >= before + 0.3, 20, what="0.3 s more in the window")
        meter.stop()
    finally:
        spinner.kill()
        spinner.wait()
    use = meter.use(streams=3, events=30)
    assert use is not None and use.streams == 3 and use.events == 30
    assert 0.3 <= use.seconds["server"] < before + 0.3 + use.wall_s  # not the CPU spent before the window
    assert use.seconds["gone"] == 0 and use.counts == {"rows": 0}
    assert use.servers_s == use.seconds["server"] and use.rest_s == 0


def test_the_ceiling_is_the_free_cores_over_the_cpu_per_stream_or_one_core_per_process(monkeypatch):
    monkeypatch.setattr(cpu, "CORES", 2)
    one = cpu.CpuUse(wall_s=10, seconds={"server 1": 8.0, "driver (node)": 2.0}, machine_busy_s=15.0,
                     machine_steal_s=0, streams=100, events=3000)
    two = cpu.CpuUse(wall_s=10, seconds={"server 1": 6.0, "server 2": 6.0, "driver (node)": 3.0},
                     machine_busy_s=15.0, machine_steal_s=0, streams=100, events=3000)
    text = cpu.report([("1 process", one), ("2 processes", two)])
    free_one = cpu.CORES - 0.5  # the other work: 15 - 8 - 2 = 5 s in 10 s
    assert f"at most {min(free_one / 0.1, 1 / 0.08):.1f} streams/s" in text
    assert "streams per server-CPU-second 0.67x one process's" in text  # 100/12 against 100/8
    assert "events delivered per stream" in text
    # no other work: one process at most 1/0.08 = 12.5/s; two need 150 ms of CPU per stream on 2 cores
    assert "allow 13.3 streams/s against one process's 12.5: at most 1.07x" in text


def test_the_machine_scaling_compares_n_spinners_at_once_with_one():
    scaling = cpu.machine_scaling(2, loops=2_000_000)
    assert 0.2 < scaling.work < 2.5  # two at once finish in at most the time of two in a row, less on free cores
    assert 0.5 < scaling.cpu_per_work < 3  # the same loop: about the same CPU, more when the cores contend
