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

`--soak-s 600` repeats waves of S streams for that long (fresh clients each wave) and prints
the server's RSS after each; the goal is no growth beyond the warm-up (the first quarter of the waves).

Run: `.venv/bin/python bench/load.py` (5,000 idle, 500 streams; a few minutes on 2 cores);
`--quick` for a smoke run; `--soak-s 600 --idle 0 --streams 200` for the soak.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/load.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from test.conftest import ServerProcess  # noqa: E402
from test.scripted_llm import ScriptedLLMServer, is_stage_request  # noqa: E402
from test.scripted_llm import text as text_step  # noqa: E402

DRIVER = ROOT / "bench" / "load_driver.cjs"
PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
GOAL_COMPLETION_FACTOR = 1.5
GOAL_FIRST_CHUNK_OVER_S = 1.0
SOAK_WARMUP_SHARE = 0.25  # the first quarter of the waves warms up (caches, pools); the rest must stay flat
SOAK_GROWTH_LIMIT = 0.10  # RSS may wander this much above its warm-up level


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def fresh_pg_database() -> tuple[str, callable]:
    name = f"bench_load_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", drop


def run(args: argparse.Namespace) -> int:
    reply = " ".join(f"w{i:02d}" for i in range(args.chunks))[: args.chunks * 4].ljust(args.chunks * 4, ".")
    model_stream_s = (args.chunks + 1) * args.chunk_ms / 1000  # role delta at once, chunks and stop each a gap later
    model_first_s = args.chunk_ms / 1000
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    drop = None
    try:
        database_url = None
        if args.database == "postgresql":
            database_url, drop = fresh_pg_database()
        with ScriptedLLMServer() as llm:
            llm.set_default(text_step(reply, chunk_size=4, delay_s=args.chunk_ms / 1000))
            # One local user drives every client: its per-user limits would be the bench's ceiling.
            env = {"LOG_LEVEL": "WARNING", "CLIENT_MAX_CONNECTIONS": str(args.idle + args.streams + 100),
                   **{f"RATE_LIMIT_{kind}_PER_MIN": "100000000"
                      for kind in ("SENDS", "CONVERSATIONS", "SOCKET_EVENTS")}}
            for pair in args.env:
                key, _, value = pair.partition("=")
                env[key] = value
            server = ServerProcess(tmp / "data", llm.base_url, database_url=database_url, env=env).start(timeout=60)
            try:
                config = dict(url=server.url, serverPid=server.proc.pid, idle=args.idle, streams=args.streams,
                              batch=args.batch, connectTimeoutMs=60_000, ackTimeoutMs=60_000,
                              streamTimeoutMs=int(args.stream_timeout_s * 1000), soakS=args.soak_s,
                              message="Tell me something long.")
                print(f"bench/load: {args.database}, {args.idle} idle + {args.streams} streaming clients; model: "
                      f"{args.chunks} chunks {args.chunk_ms} ms apart = {model_stream_s:.2f} s per reply"
                      + (f"; soak {args.soak_s:g} s" if args.soak_s else ""), flush=True)
                started = time.monotonic()
                done = subprocess.run(["node", str(DRIVER), json.dumps(config)], cwd=ROOT, stdout=subprocess.PIPE,
                                      text=True, timeout=args.soak_s + args.stream_timeout_s + 900)
                line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
                if line is None:
                    print(f"the driver failed (exit {done.returncode}); server log tail:\n{server.log_text()}")
                    return 1
                result = json.loads(line[len("RESULT "):])
                print(f"driver wall time {time.monotonic() - started:.1f} s")
                if args.soak_s:
                    return report_soak(result)
                start = result["run"]["sendWallMs"] / 1000
                to_model = [r.received_wall - start for r in llm.agent_requests if r.received_wall >= start]
                to_stage = [r.received_wall - start for r in llm.requests
                            if r.received_wall >= start and is_stage_request(r.body)]
                print(f"to routing stage   p50 {pct(to_stage, 50):.3f} s  p99 {pct(to_stage, 99):.3f} s  "
                      f"({len(to_stage)} stage requests: send -> the routing model call reached the model)")
                return report(args, result, model_stream_s, model_first_s, to_model)
            finally:
                server.stop()
    finally:
        if drop is not None:
            drop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def report(args, result: dict, model_stream_s: float, model_first_s: float, to_model: list[float]) -> int:
    r = result["run"]
    first, complete = r["firstChunkS"], r["completionS"]
    connected = result["idleConnected"] + r["joined"]
    added = [c - model_stream_s for c in complete]
    mb = 1024
    per_conn = ((result["rssIdleKb"] - result["rssBaseKb"]) / result["idleConnected"]
                if result["idleConnected"] else float("nan"))
    print(f"connected          {connected} / {args.idle + args.streams} "
          f"(idle still connected at the end: {result['idleStillConnected']} / {args.idle})")
    print(f"completed          {r['completed']} / {args.streams}")
    print(f"events lost        {r['lost']} (of {r['logEvents']} logged; out-of-order streams {r['outOfOrder']}, "
          f"streams whose text differs from the log {r['textMismatch']})")
    print(f"first chunk        p50 {pct(first, 50):.3f} s  p99 {pct(first, 99):.3f} s  "
          f"(model's own {model_first_s:.3f} s)")
    print(f"completion         p50 {pct(complete, 50):.3f} s  p99 {pct(complete, 99):.3f} s  "
          f"(model's own {model_stream_s:.3f} s)")
    print(f"to model request   p50 {pct(to_model, 50):.3f} s  p99 {pct(to_model, 99):.3f} s  "
          f"(send -> the reply's model request reached the model: routing and the turn's start)")
    print(f"server added       p50 {pct(added, 50):.3f} s  p99 {pct(added, 99):.3f} s")
    print(f"send ack           p50 {pct(r['ackS'], 50):.3f} s  p99 {pct(r['ackS'], 99):.3f} s")
    print(f"events/s           {r['events'] / r['wallS']:.0f} delivered ({r['events']} in {r['wallS']:.1f} s); "
          f"log rows per reply {r['logEvents'] / max(1, r['completed']):.1f} "
          f"(text_chunk rows {r['chunkRows'] / max(1, r['completed']):.1f})")
    print(f"server RSS         base {result['rssBaseKb'] / mb:.1f} MB, with idle {result['rssIdleKb'] / mb:.1f} MB, "
          f"peak while streaming {r['peakRssKb'] / mb:.1f} MB, end {result['rssEndKb'] / mb:.1f} MB; "
          f"{per_conn:.1f} kB per idle connection")
    if r["errors"]:
        print(f"errors             {r['errors']}")
    goals = [
        ("all connect", connected == args.idle + args.streams and result["idleStillConnected"] == args.idle),
        ("all complete", r["completed"] == args.streams),
        ("0 events lost", r["lost"] == 0 and r["outOfOrder"] == 0 and r["textMismatch"] == 0),
        (f"completion p99 <= {GOAL_COMPLETION_FACTOR}x model ({GOAL_COMPLETION_FACTOR * model_stream_s:.2f} s)",
         bool(complete) and pct(complete, 99) <= GOAL_COMPLETION_FACTOR * model_stream_s),
        (f"first chunk p99 < model's + {GOAL_FIRST_CHUNK_OVER_S:g} s ({model_first_s + GOAL_FIRST_CHUNK_OVER_S:.2f} s)",
         bool(first) and pct(first, 99) < model_first_s + GOAL_FIRST_CHUNK_OVER_S),
    ]
    print("goals (issue 10: 5,000 idle + 500 streaming, one process, SQLite):")
    for name, met in goals:
        print(f"  {'met   ' if met else 'MISSED'} {name}")
    return 0


def report_soak(result: dict) -> int:
    waves = result["waves"]
    mb = 1024
    print(f"{'wave':>4} {'at s':>7} {'done':>9} {'lost':>5} {'p99 s':>6} {'RSS MB':>7}")
    for k, w in enumerate(waves, 1):
        print(f"{k:>4} {w['atS']:>7.0f} {w['completed']:>4}/{w['streams']:<4} {w['lost']:>5} "
              f"{pct(w['completionS'], 99):>6.2f} {w['rssAfterKb'] / mb:>7.1f}")
    warmup = max(2, round(len(waves) * SOAK_WARMUP_SHARE))
    if len(waves) <= warmup:
        print("too few waves for a verdict")
        return 0
    warm = max(w["rssAfterKb"] for w in waves[:warmup])
    end = waves[-1]["rssAfterKb"]
    lost = sum(w["lost"] for w in waves)
    flat = end <= warm * (1 + SOAK_GROWTH_LIMIT)
    print(f"RSS after warm-up (max of the first {warmup} waves) {warm / mb:.1f} MB, at the end "
          f"{end / mb:.1f} MB ({(end - warm) / warm * 100:+.1f} %); events lost {lost}")
    print(f"  {'met   ' if flat else 'MISSED'} RSS flat after warm-up (within {SOAK_GROWTH_LIMIT:.0%})")
    print(f"  {'met   ' if lost == 0 else 'MISSED'} 0 events lost")
    return 0


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
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    parser.add_argument("--quick", action="store_true", help="200 idle, 20 streams")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args(argv)
    if args.quick:
        args.idle, args.streams = min(args.idle, 200), min(args.streams, 20)
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
