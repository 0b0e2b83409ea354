"""Benchmark: the completion notification pool (README, "Architecture": the notification pool).

For N = 1, 5, 20, 100 background commands that finish close together after the master
stopped, it measures

- the number of follow-up model turns of the master (its tasks after the first one), and
- the latency from the last completion to the first model request that has seen every
  completion (the follow-up task's first request; for the naive dispatcher, the request
  of the turn that carries the last notice),

in two modes, each in a real server process (`run.py`, eventlet, SQLite in a temp dir)
talking to the scripted model server (test/scripted_llm.py), measured the same way:

- `product`: `run.py` as shipped (notices settle for NOTICE_SETTLE_MS, then one wake
  drains the whole queue into one follow-up task);
- `naive`: a mode of this benchmark, not of the product: the same `run.py`, started by
  a small launcher in this file that, inside that process only, replaces the router's
  drain so that a wake takes only the oldest queued message (one notice per follow-up
  task; an inline drain into a running turn leaves notices for their own turn), with
  the settle window 0. This is the one-notice-per-task dispatcher of the seed note.

How it works: the master's first model reply (scripted) starts N `run_command`s in the
background in one tool round. Each command sleeps until a common wall-clock instant
T (computed when the reply is served, far enough ahead that the first turn has ended),
then writes its own finish time (`date +%s.%N`) into the workspace and echoes a marker.
So "the last completion" is measured by the command itself, and the model request by the
scripted server's receipt wall clock. With `--two-wave-n`, an extra scenario splits the
commands into two waves 1.5 s apart (waves = 2). Nothing polls the product between T and
the follow-up's model request (the benchmark waits on the scripted server's own request
list), so the measurement does not load the server it measures.

Latency breakdown (medians): `detect` = last command's own finish -> its `finished_at`
(the moment the server reaped its process; on 2 cores with N shells exiting together this
is mostly the operating system); `settle+wake` = -> the follow-up task's `created_at` (the
batched finish transaction, the settle window and the wake claim); `start` = -> the
task's `ai_message_start` (queue drained into the history, notice events, history build);
`call` = -> the model request's receipt.

Run: `.venv/bin/python bench/notifications.py` (or `make bench`); `--quick` for a smoke
run; `--help` for the options. The whole run takes about 1.5-2.5 minutes on 2 cores and
removes its temp dir and server processes at the end (`--keep` keeps the temp dir).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/notifications.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))


from bench.notifications_report import (  # noqa: E402
    RepResult,
    Row,
    WaveResult,
    print_comparison_and_goals,
    print_table,
)
from modules.event_catalogue import AiMessageStartEvent  # noqa: E402
from modules.statuses import AgentState, CommandStatus, TaskStatus  # noqa: E402
from test.conftest import ServerProcess  # noqa: E402
from test.scripted_llm import ScriptedLLMServer, dynamic, match_system, text, tool_calls  # noqa: E402

MASTER = match_system("You are MasterAgent")
WAVE_GAP_S = 1.5
MARKER = re.compile(r"@(r\d+n\d+)\.(\d+)@")

# The naive mode's launcher: `run` is imported first (it monkey-patches for eventlet), then the
# dispatcher is swapped inside this server process only, then the server runs as usual.
NAIVE_BOOT = ("import sys, run\n"
              "from bench.notifications import install_naive_dispatch\n"
              "install_naive_dispatch()\n"
              "sys.exit(run.main(sys.argv[1:]))\n")


def install_naive_dispatch() -> None:
    """Turn the pool into the naive one-notice-per-task dispatcher (in the calling process only).

    A wake (`last_starts_work=True`) moves only the oldest queued message into the history;
    an inline drain into a running turn takes other messages but leaves notices queued, so each
    notice gets a follow-up task of its own (the end-of-turn check wakes the agent for the next).
    """
    from sqlalchemy import select

    from modules.multi_agent import message_router as mr
    from modules.storage import messages as message_store
    from modules.storage import pending_messages as pm
    from modules.storage.models import PendingMessageRow

    def drain_one(self, session, agent_id, conversation_id, consumed_by, *, last_starts_work):
        queued = list(session.scalars(
            select(PendingMessageRow).where(PendingMessageRow.target_agent_id == agent_id,
                                            PendingMessageRow.status == pm.QUEUED)
            .order_by(PendingMessageRow.seq)
        ))
        chosen = queued[:1] if last_starts_work else [r for r in queued if r.type != "notice"]
        rows = [row for r in chosen if (row := pm.take_in(session, r.id, consumed_by)) is not None]
        drafts = [mr.history_draft(mr.PendingMessage.from_row(row), starts_work=last_starts_work and i == len(rows) - 1)
                  for i, row in enumerate(rows)]
        return message_store.append_in(session, conversation_id, agent_id, drafts) if drafts else []

    mr.MessageRouter.drain_to_history_in = drain_one


# -- server processes ----------------------------------------------------------------


class Server(ServerProcess):
    """run.py, or run.py behind the naive launcher, started as the tests start it, on its own data dir."""

    def __init__(self, mode: str, data_dir: Path, llm_url: str, launcher: list[str], env: dict[str, str]):
        unlimited = {f"RATE_LIMIT_{kind}_PER_MIN": "100000000" for kind in ("SENDS", "CONVERSATIONS", "SOCKET_EVENTS")}
        super().__init__(data_dir, llm_url, env={**unlimited, **env}, launcher=launcher)
        self.mode = mode

    def api(self, path: str) -> Any:
        res = self.get(path)
        res.raise_for_status()
        return res.json()


# -- one repetition ------------------------------------------------------------------


class ScenarioError(RuntimeError):
    pass


def _iso(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _user_markers(body: dict, tag: str) -> set[int]:
    seen: set[int] = set()
    for m in body.get("messages", []):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str):
            seen.update(int(k) for t, k in MARKER.findall(content) if t == tag)
    return seen


def _command(tag: str, k: int, at: float) -> str:
    """Sleep until the wall-clock instant `at`, stamp the real finish time, echo a marker."""
    wait = f"awk -v t={at:.6f} -v n=$(date +%s.%N) 'BEGIN {{ d = t - n; printf \"%.6f\", (d > 0 ? d : 0) }}'"
    return f"sleep $({wait}); date +%s.%N > .bench_{tag}_{k}; echo @{tag}.{k}@"


class RequestScan:
    """The master's model requests in arrival order, each with the markers its user messages carry;
    parsed once each, so waiting costs the benchmark process (and the shared CPUs) next to nothing."""

    def __init__(self, llm: ScriptedLLMServer, tag: str):
        self._llm = llm
        self._tag = tag
        self._seen = 0
        self.master: list[tuple[Any, set[int]]] = []

    def first_seeing(self, wanted: set[int]):
        new = self._llm.requests[self._seen:]
        self._seen += len(new)
        self.master.extend((r, _user_markers(r.body, self._tag)) for r in new if MASTER(r.body))
        return next((r for r, markers in self.master if wanted <= markers), None)


def run_rep(server: Server, llm: ScriptedLLMServer, n: int, waves: int, tag: str, lead_s: float) -> RepResult:
    """One conversation: the first turn starts the commands, they finish at T (per wave), measure."""
    llm.reset()
    llm.set_default(text("ok"))
    wave_of = [k * waves // n for k in range(n)]
    plan: dict[str, list[float]] = {}

    def first_reply(_body: dict):
        start = time.time() + lead_s
        plan["at"] = [start + w * WAVE_GAP_S for w in range(waves)]
        return tool_calls(*[("run_command", {"command": _command(tag, k, plan["at"][wave_of[k]]),
                                             "run_in_background": True}) for k in range(n)])

    llm.script(dynamic(first_reply), match=MASTER)
    began = time.monotonic()
    deadline = began + 20 + lead_s + waves * WAVE_GAP_S + 0.25 * n
    cid = server.send(f"Start {n} background jobs, please.")["conversation_id"]

    # Wait on the scripted server (in this process), not on the product's API: nothing loads the
    # server under test between the completions and the follow-up's model request.
    scan = RequestScan(llm, tag)
    wanted: set[int] = set()
    requests_by_wave = []
    for w in range(waves):
        wanted |= {k for k in range(n) if wave_of[k] == w}
        while (req := scan.first_seeing(wanted)) is None:
            if time.monotonic() > deadline:
                raise ScenarioError(f"{server.mode} N={n}: wave {w + 1} not delivered in time\n{server.log_text()}")
            time.sleep(0.02)
        requests_by_wave.append(req)

    master = next(a for a in server.api(f"/api/conversations/{cid}/agents")["data"] if a["kind"] == "master")
    while True:  # quiescent: every command finished, nothing queued, the master idle, every task final
        status = server.api(f"/api/conversations/{cid}/running-status")
        tasks = [t for t in server.api(f"/api/tasks?conversation_id={cid}")["data"]
                 if t["agent_id"] == master["agent_id"]]
        agent = next(a for a in server.api(f"/api/conversations/{cid}/agents")["data"]
                     if a["agent_id"] == master["agent_id"])
        if (not status["is_main_running"] and not status["has_running_background_commands"]
                and status["pending_notices"] == 0 and agent["pending_count"] == 0
                and agent["state"] != AgentState.RUNNING
                and all(t["status"] in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED) for t in tasks)):
            break
        if time.monotonic() > deadline:
            raise ScenarioError(f"{server.mode} N={n}: not quiescent in time: {status}\n{server.log_text()}")
        time.sleep(0.1)
    failed = [t for t in tasks if t["status"] != TaskStatus.SUCCEEDED]
    if failed:
        raise ScenarioError(f"{server.mode} N={n}: master task(s) did not succeed: {failed}\n{server.log_text()}")

    workspace = server.data_dir / "workspaces" / cid
    done = {k: float((workspace / f".bench_{tag}_{k}").read_text().strip()) for k in range(n)}
    commands = server.api(f"/api/background_commands?conversation_id={cid}")["data"]
    finished = {int(m.group(2)): _iso(c["finished_at"]) for c in commands if (m := MARKER.search(c["command"]))}
    if len(finished) != n or any(c["status"] != CommandStatus.SUCCEEDED for c in commands):
        raise ScenarioError(f"{server.mode} N={n}: commands did not all succeed: {commands}")
    created = sorted((_iso(t["created_at"]), t["task_id"]) for t in tasks)
    slack_ms = (min(done.values()) - _iso(tasks[0]["finished_at"])) * 1000

    results = []
    for w, req in enumerate(requests_by_wave):
        ks = [k for k in range(n) if wave_of[k] == w]
        last_done = max(done[k] for k in ks)
        last_finished = max(finished[k] for k in ks)
        task_created, task_id = max(c for c in created if c[0] <= req.received_wall)
        events = server.api(f"/api/tasks/{task_id}?from=0")["events"]
        model_start = next(e["ts"] for e in events if e["type"] == AiMessageStartEvent.TYPE)
        finishes = sorted(finished[k] for k in ks)
        results.append(WaveResult(
            latency_ms=(req.received_wall - last_done) * 1000,
            detect_ms=(last_finished - last_done) * 1000,
            settle_wake_ms=(task_created - last_finished) * 1000,
            start_ms=(model_start - task_created) * 1000,
            call_ms=(req.received_wall - model_start) * 1000,
            spread_ms=(last_done - min(done[k] for k in ks)) * 1000,
            max_gap_ms=max((b - a for a, b in zip(finishes, finishes[1:], strict=False)), default=0.0) * 1000,
        ))
    return RepResult(turns=len(tasks) - 1, waves=results, slack_ms=slack_ms)


# -- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ns", default="1,5,20,100", help="completion counts N (default 1,5,20,100)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per N and mode (default 5; 3 for N >= 50)")
    p.add_argument("--two-wave-n", type=int, default=20,
                   help="also run N commands in two waves 1.5 s apart (default 20; 0 to skip)")
    p.add_argument("--quick", action="store_true", help="smoke run: N = 1, 5, 20, one repetition, no two-wave run")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (server logs, databases)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every repetition")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from modules.config import Settings

    ns = [1, 5, 20] if args.quick else [int(x) for x in args.ns.split(",") if x.strip()]
    scenarios = [(n, 1) for n in ns]
    if args.two_wave_n >= 2 and not args.quick:
        scenarios.append((args.two_wave_n, 2))
    settle_ms = Settings.from_env().notice_settle_ms

    def reps_for(n: int) -> int:
        return 1 if args.quick else args.reps or (3 if n >= 50 else 5)

    def measure(server: Server, llm: ScriptedLLMServer, n: int, waves: int, tag: str) -> RepResult:
        lead_s = 1.0 + 0.02 * n  # time for the first turn to start the commands and end
        for attempt in range(3):
            result = run_rep(server, llm, n, waves, f"{tag}n{attempt}", lead_s)
            if result.slack_ms > 0:
                result.retried = attempt
                return result
            print(f"  ({server.mode} N={n}: the first turn ended {-result.slack_ms:.0f} ms after the first "
                  "completion; repeated with a longer lead time)", flush=True)
            lead_s *= 2
        raise ScenarioError(f"{server.mode} N={n}: the first turn never ended before the completions")

    tmp = Path(tempfile.mkdtemp(prefix="bench-notifications-"))
    llms: list[ScriptedLLMServer] = []
    servers: list[Server] = []
    started = time.monotonic()
    try:
        for mode in ("product", "naive"):
            llm = ScriptedLLMServer().start()
            llms.append(llm)
            launcher = ["run.py"] if mode == "product" else ["-c", NAIVE_BOOT]
            env = {} if mode == "product" else {"NOTICE_SETTLE_MS": "0"}
            servers.append(Server(mode, tmp / mode, llm.base_url, launcher, env).start())
        print(f"bench/notifications: {len(scenarios)} scenarios, product (run.py, settle {settle_ms:g} ms) "
              f"and naive (one notice per task, settle 0), each a real eventlet server with SQLite in {tmp}",
              flush=True)
        load_before = os.getloadavg()[0]
        print(f"{os.cpu_count()} CPUs, load average {load_before:.2f} at start\n", flush=True)
        rows = {(n, w, s.mode): Row(n, w, s.mode) for n, w in scenarios for s in servers}
        seq = 0
        for n, waves in scenarios:
            for rep in range(reps_for(n)):
                order = list(zip(servers, llms, strict=True))
                for server, llm in order if rep % 2 == 0 else order[::-1]:  # alternate who goes first
                    seq += 1
                    result = measure(server, llm, n, waves, f"r{seq}")
                    rows[(n, waves, server.mode)].reps.append(result)
                    if args.verbose:
                        lat = ", ".join(f"{w.latency_ms:.1f}" for w in result.waves)
                        spread = ", ".join(f"{w.spread_ms:.1f}" for w in result.waves)
                        gap = ", ".join(f"{w.max_gap_ms:.1f}" for w in result.waves)
                        print(f"  N={n} waves={waves} {server.mode:<7} rep {rep + 1}: turns {result.turns}, "
                              f"latency ms [{lat}], spread ms [{spread}], max recorded finish gap ms [{gap}], "
                              f"slack {result.slack_ms:.0f} ms", flush=True)
            print(f"  done N={n} waves={waves} ({time.monotonic() - started:.0f} s)", flush=True)
        print()
        print_table(list(rows.values()))
        met = print_comparison_and_goals(list(rows.values()), settle_ms)
        load_after = os.getloadavg()[0]
        print(f"\nall goals met: {'yes' if met else 'NO'}; total {time.monotonic() - started:.0f} s; "
              f"load average {load_before:.2f} at start, {load_after:.2f} at end")
        cpus = os.cpu_count() or 1
        if load_before > 0.5 * cpus or load_after > cpus:  # the end figure includes this run
            print("warning: the machine was busy with other work; latencies are inflated and noisy")
        return 0
    except ScenarioError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in servers:
            server.stop()
        for llm in llms:
            llm.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
