"""Start the chat server: `python run.py [--host H] [--port P] [--database-url URL]`.

eventlet must patch the standard library before anything else imports it, and
psycopg must use its select()-based wait (which eventlet makes cooperative)
instead of its C wait, which would stall every green thread.
"""

import os

os.environ.setdefault("PSYCOPG_WAIT_FUNC", "wait_select")

import eventlet  # noqa: E402

eventlet.monkey_patch()

import argparse  # noqa: E402
import gc  # noqa: E402
import ipaddress  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

from modules.config import ConfigError, Settings  # noqa: E402

log = logging.getLogger("chat_server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
        except OSError:
            return False


def keep_pool_probes_off_the_hub() -> None:
    """Before each request, httpcore probes every idle pooled connection with `select(..., 0)`, holding the
    pool's lock. eventlet's green select switches to the hub even with a zero timeout, so on a busy server each
    model request waited one turn of the whole event loop per idle connection kept alive (50 requests beside
    200 idle connections and 100 busy green threads: 142 s at the median; with the real select, which never
    blocks at a zero timeout: 0.65 s)."""
    import httpcore2._utils

    setattr(httpcore2._utils, "select", eventlet.patcher.original("select"))  # noqa: B010 (not re-exported)


GC_GEN0_THRESHOLD = 50_000  # allocations between young collections (Python's default: 700)


def tune_gc() -> None:
    """Once started: move what start-up built (modules, app, settings) out of the collector's sight, and collect
    the young generation less often. A stream's allocations are nearly all freed by reference counting; with the
    defaults the collector took about 8 % of the CPU while 200 streams ran (bench/load.py, 1,000 idle + 200
    streams: 0.36-0.44 s of every 5 s), and none with these."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])


RESERVED_FILES = 256  # database pool, Redis, logs, command pipes: what connections must leave free


def connection_capacity() -> tuple[int, int]:
    """Raise this process's open-file limit to its hard limit and size the WSGI green-thread pool from it:
    eventlet's default pool of 1,024 would refuse clients long before the file limit does.
    Returns (pool size, file limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return max(soft - RESERVED_FILES, 64), soft


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Multi-agent chat server")
    parser.add_argument("--host", help="address to listen on (HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (PORT, default 5000)")
    parser.add_argument("--database-url", help="SQLAlchemy URL (DATABASE_URL, default sqlite:///data/app.db)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = Settings.from_env().with_overrides(host=args.host, port=args.port,
                                                      database_url=args.database_url)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if settings.workspace_quota != "poll":
        from modules.tools import mount_namespace

        mount_namespace.enter_private()  # before any thread; why it could not is in the start-up line
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not settings.auth_required and not is_loopback(settings.host):
        print(
            f"refusing to listen on {settings.host}: no AUTH_TOKENS are set, so anyone who can reach "
            "this address would own every conversation. Set AUTH_TOKENS=user:token,... or listen on "
            "127.0.0.1.",
            file=sys.stderr,
        )
        return 2

    import eventlet.wsgi

    keep_pool_probes_off_the_hub()

    from modules.agents.profiles import ProfileError
    from modules.multi_agent.fast_path import SignalsError
    from server.app import create_app
    from server.client_guard import ClientLimits, listen, server_options

    try:
        server = create_app(settings, async_mode="eventlet")
    except (ProfileError, SignalsError, ConfigError) as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    app = server.app
    server.start()
    if settings.uses_demo_model:
        log.warning("no OPENAI_API_KEY set: the offline demo model answers")
    tune_gc()
    pool_size, file_limit = connection_capacity()
    limits = ClientLimits.of(settings)
    log.info("listening on http://%s:%d (database %s); capacity %d concurrent connections (open-file limit %d), "
             "at most %d per client address; timeouts: headers %g s, idle %g s, body %g s",
             settings.host, settings.port, server.runtime.db.label, pool_size, file_limit,
             limits.max_connections, limits.header_timeout_s, limits.idle_timeout_s, limits.body_timeout_s)
    # debug=False: an error past the app's own handling (a streamed body that fails before its first write) is
    # answered 500 without the stack trace eventlet otherwise sends to the client.
    eventlet.wsgi.server(listen(settings.host, settings.port), app, log_output=False, max_size=pool_size,
                         debug=False, **server_options(limits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
