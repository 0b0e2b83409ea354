"""Benchmark: many connected clients and many live streams on one server process (issue 10).

It starts the real server (`run.py`, eventlet; SQLite in a temp dir, or PostgreSQL with
`--database postgresql`) and the scripted model server (test/scripted_llm.py), which streams
every agent reply like a real model: a role delta at once, then `--chunks` text chunks
`--chunk-ms` apart, then the stop. A Node driver (bench/load_driver.cjs, with the UI's own
socket.io-client: Python cannot hold thousands of sockets from one process) then

1. connects K idle Socket.IO clients (`--idle`), and keeps them connected;
2. prepares S streaming clients (`--streams`): each creates a conversation, connects and
   joins it; then all send a message at once (`send_message`) and read the stream up to
   the reply task's `task_complete`;
3. reads every streamed task's durable log (`GET /api/tasks/<id>?from=0`) and compares it
   with what the socket delivered: an event of the log (up to `task_complete`) that the
   client did not get, or got with another type, is lost; so is one it got that the log lacks.

Printed: connected, completed, events lost, first-chunk and completion p50/p99 (from the
send), the server's added latency over the model's own streaming time, events/s, log rows
per streamed reply, server RSS and memory per idle connection, and the goals met/missed.

Each run first drives the bare relay (bench/streaming/relay.py: Flask-SocketIO, eventlet and the official openai
client streaming the same model, with no database, routing or history), then the relay making the product's
three model requests a reply (`--stages`: a routing request before it, a suggestion request after it), then the
product, with the same clients, and prints them side by side with the ratios: how far the product is from what
the stack allows (issue 26), and how much of that distance the model traffic alone accounts for.

`--processes N` drives the product on PostgreSQL behind nginx (deploy/run_cluster.py: sticky sessions, the
Redis message queue) with 1, then N processes, and prints the streams completed per second of each.

`--soak-s 600` repeats waves of S streams for that long (fresh clients each wave) and prints
the server's RSS after each; the goal is no growth beyond the warm-up (the first quarter of the waves).

Run: `.venv/bin/python bench/load.py` (5,000 idle, 500 streams; a few minutes on 2 cores);
`--quick` for a smoke run; `--profile` to print where the product's CPU went (bench/streaming/profile.py);
`--processes 2` for the cluster; `--soak-s 600 --idle 0 --streams 200` for the soak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/load.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from bench.streaming import cpu  # noqa: E402
from bench.streaming import targets as load_targets  # noqa: E402
from bench.streaming.profile import Sampler  # noqa: E402
from bench.streaming.report import compare_processes, compare_with_relay, pct, report, report_soak, summary  # noqa: E402
from test.scripted_llm import STAGE_MARKERS, ScriptedLLMServer, is_stage_request  # noqa: E402
from test.scripted_llm import text as text_step  # noqa: E402

DRIVER = ROOT / "bench" / "load_driver.cjs"
SUGGESTION_MARKER = STAGE_MARKERS[3]  # the suggestion request's system prompt: after the reply, not before it


def drive(args: argparse.Namespace, target: load_targets.Target, llm: ScriptedLLMServer,
          sampler: Sampler | None = None) -> dict | None:
    """One driver run against `target`: its result, or None (the logs printed) when the driver failed.
    `sampler` profiles the wave alone: from the send to the end of the streams (not the connecting and
    the verification around it); the CPU of every component is read over the same window (`result["cpu"]`)."""
    config = dict(url=target.url, serverPids=target.pids, idle=args.idle, streams=args.streams,
                  batch=args.batch, connectTimeoutMs=60_000, ackTimeoutMs=60_000,
                  streamTimeoutMs=int(args.stream_timeout_s * 1000), soakS=args.soak_s,
                  message="Tell me something long.")
    print(f"\n== {target.label}", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(["node", str(DRIVER), json.dumps(config)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    meter = cpu.CpuMeter(lambda: {**target.components(), "driver (node)": [proc.pid],
                                  "model server (bench process)": [os.getpid()]}, target.counters)
    window = [w for w in (meter, sampler) if w is not None]
    timer = threading.Timer(args.soak_s + args.stream_timeout_s + 900, proc.kill)
    timer.start()
    stdout = threading.Thread(target=lambda: setattr(proc, "out", proc.stdout.read()), daemon=True)
    stdout.start()
    try:
        for progress in proc.stderr:
            sys.stderr.write(progress)
            if "sending" in progress:
                for w in window:
                    w.start()
            elif "streams ended" in progress:
                for w in window:
                    w.stop()
        proc.wait()
        stdout.join()
    finally:
        timer.cancel()
        for w in window:
            w.stop()
    line = next((ln for ln in proc.out.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        print(f"the driver failed (exit {proc.returncode}); server log tail:\n{target.log_text()}")
        return None
    print(f"driver wall time {time.monotonic() - started:.1f} s")
    result = json.loads(line[len("RESULT "):])
    if "run" in result:
        result["cpu"] = meter.use(result["run"]["completed"], result["run"]["events"])
    return result


def model_timings(llm: ScriptedLLMServer, result: dict) -> list[float]:
    """Send -> the reply's model request reached the model, per stream; prints the routing stage's too."""
    start = result["run"]["sendWallMs"] / 1000
    to_model = [r.received_wall - start for r in llm.agent_requests if r.received_wall >= start]
    stages = [r for r in llm.requests if r.received_wall >= start and is_stage_request(r.body)]
    suggesting = [r.received_wall - start for r in stages if SUGGESTION_MARKER in json.dumps(r.body["messages"][:1])]
    to_stage = [r.received_wall - start for r in stages if SUGGESTION_MARKER not in json.dumps(r.body["messages"][:1])]
    print(f"model connections  {llm.connections} opened for {len(llm.requests)} requests (each kept alive for "
          "the next: one per stream at most)")
    if to_stage:
        print(f"to routing stage   p50 {pct(to_stage, 50):.3f} s  p99 {pct(to_stage, 99):.3f} s  "
              f"({len(to_stage)} stage requests: send -> the routing model call reached the model)")
    if suggesting:
        print(f"to suggestions     p50 {pct(suggesting, 50):.3f} s  p99 {pct(suggesting, 99):.3f} s  "
              f"({len(suggesting)} requests: send -> the suggestion request after the reply reached the model)")
    return to_model


def run(args: argparse.Namespace) -> int:
    reply = " ".join(f"w{i:02d}" for i in range(args.chunks))[: args.chunks * 4].ljust(args.chunks * 4, ".")
    model_stream_s = (args.chunks + 1) * args.chunk_ms / 1000  # role delta at once, chunks and stop each a gap later
    model_first_s = args.chunk_ms / 1000
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    # One local user drives every client: its per-user limits would be the bench's ceiling. Each streaming
    # client holds a keep-alive HTTP connection (its conversation's POST) beside its socket.
    env = {"LOG_LEVEL": "WARNING", "CLIENT_MAX_CONNECTIONS": str(args.idle + 2 * args.streams + 100),
           **{f"RATE_LIMIT_{kind}_PER_MIN": "100000000" for kind in ("SENDS", "CONVERSATIONS", "SOCKET_EVENTS")},
           **dict(pair.partition("=")[::2] for pair in args.env)}
    database = "postgresql" if args.processes else args.database
    print(f"bench/load: {database}, {args.idle} idle + {args.streams} streaming clients; model: "
          f"{args.chunks} chunks {args.chunk_ms} ms apart = {model_stream_s:.2f} s per reply"
          + (f"; soak {args.soak_s:g} s" if args.soak_s else ""), flush=True)

    step = text_step(reply, chunk_size=4, delay_s=args.chunk_ms / 1000)

    def one(target_cm, *, goals: bool, profile: bool = False) -> tuple[str, dict] | None:
        llm.reset()  # each target's timings from its own requests
        llm.set_default(step)
        with target_cm as target:
            sampler = Sampler(target.pids[0], tmp / f"profile-{len(target.pids)}.txt") if profile else None
            result = drive(args, target, llm, sampler)
            if sampler is not None:
                print(sampler.report())
            if result is None:
                return None
            if not args.soak_s:
                report(args, result, model_stream_s, model_first_s, model_timings(llm, result), goals=goals)
            return target.label, result

    try:
        with ScriptedLLMServer() as llm:
            if args.soak_s:
                done = one(load_targets.product(llm.base_url, tmp / "product", database, env), goals=False)
                return report_soak(done[1]) if done else 1
            if args.processes:
                rounds = []
                for r in range(1, args.rounds + 1):  # 1 then N, again: the machine's other work drifts meanwhile
                    runs, uses = [], []
                    scaling = cpu.machine_scaling(args.processes)
                    print(f"\nthe machine now: {args.processes} CPU-bound Python processes at once do "
                          f"{scaling.work:.2f}x the work of one (the cores' own ceiling), each unit of it at "
                          f"{scaling.cpu_per_work:.2f}x the CPU seconds")
                    for n in sorted({1, args.processes}):
                        done = one(load_targets.behind_nginx(llm.base_url, tmp / f"cluster-{n}-{r}", n, env),
                                   goals=False, profile=args.profile)
                        if done is None:
                            return 1
                        runs.append(summary(done[0], args, done[1]))
                        uses.append((done[0], done[1]["cpu"]))
                    print(cpu.report([(label, use) for label, use in uses if use is not None]))
                    rounds.append(runs)
                compare_processes(rounds)
                return 0
            relay = one(load_targets.relay(llm.base_url, tmp / "relay"), goals=False)
            staged = one(load_targets.relay(llm.base_url, tmp / "relay-staged", stages=True), goals=False)
            product = one(load_targets.product(llm.base_url, tmp / "product", database, env), goals=True,
                          profile=args.profile)
            if relay is None or staged is None or product is None:
                return 1
            compare_with_relay(summary("bare relay", args, relay[1]), summary(product[0], args, product[1]),
                               summary(staged[0], args, staged[1]))
            print(cpu.report([(label, result["cpu"]) for label, result in (relay, staged, product)
                              if result.get("cpu")]))
            return 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _interrupted(_signum, _frame) -> None:
    """A soak is often ended by a kill: unwind as on Ctrl-C, so the driver and the server go with the bench
    (left behind, they kept streaming at a server whose model was gone)."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=5000, help="idle connected clients (5000)")
    parser.add_argument("--streams", type=int, default=500, help="clients streaming at once (500)")
    parser.add_argument("--chunks", type=int, default=28, help="text chunks per reply (28)")
    parser.add_argument("--chunk-ms", type=int, default=100, help="gap between chunks, 20-100 (100)")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--batch", type=int, default=250, help="clients connecting at once (250)")
    parser.add_argument("--stream-timeout-s", type=float, default=180)
    parser.add_argument("--soak-s", type=float, default=0, help="repeat waves of streams for this long (0: once)")
    parser.add_argument("--processes", type=int, default=0,
                        help="N: the product on PostgreSQL behind nginx with 1, then N processes (deploy/)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --processes: measure 1 then N processes this many times, interleaved (1)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    parser.add_argument("--quick", action="store_true", help="200 idle, 20 streams")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--profile", action="store_true",
                        help="sample the product (its first process) with py-spy while driven; print its top functions")
    args = parser.parse_args(argv)
    if args.quick:
        args.idle, args.streams = min(args.idle, 200), min(args.streams, 20)
    if args.processes and args.soak_s:
        parser.error("--processes compares cluster sizes on one wave; a soak runs one process")
    if shutil.which("node") is None:
        print("bench/load needs Node (the driver is bench/load_driver.cjs)")
        return 1
    if not (ROOT / "frontend" / "node_modules" / "socket.io-client").exists():
        print("bench/load needs the UI's dependencies: `npm ci` in frontend/")
        return 1
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
