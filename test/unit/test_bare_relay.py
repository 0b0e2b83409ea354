"""The bare relay (bench/streaming/relay.py) runs on the same footing as the product, so bench/load.py's ratio
measures the product, not a handicap of the relay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modules.llm.client_pools import POOL_SIZE

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]

RELAY_MAIN = """
import json
import flask_socketio
from bench.streaming import relay
flask_socketio.SocketIO.run = lambda *args, **kwargs: None  # main's set-up only, no serving
made, make = [], relay.Relay
relay.Relay = lambda *args, **kwargs: made.append(make(*args, **kwargs)) or made[-1]
relay.main(["--port", "1"])
import eventlet, httpcore2._utils
pools = [c._client._transport._pool._max_connections for c in made[0].pools.clients]
print(json.dumps({"real_select": httpcore2._utils.select is eventlet.patcher.original("select"), "pools": pools,
                  "max_streams": relay.MAX_STREAMS}))
"""


def _relay_set_up() -> dict:
    """What the relay's `main` set up (its serving patched out), as RELAY_MAIN prints it."""
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", RELAY_MAIN], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_relay_keeps_httpcores_pool_probes_off_the_hub_as_the_product_does():
    """run.py's `keep_pool_probes_off_the_hub`: without it each model request of the relay waited a turn of the
    event loop per idle pooled connection, and the product/relay ratio flattered the product."""
    assert _relay_set_up()["real_select"] is True


def test_the_relays_model_connections_are_split_in_the_products_small_pools():
    """modules/llm/client_pools.py: one pool of hundreds of connections made each request walk them all, a cost of
    the relay's, not the stack's, that flattered the product/relay ratio."""
    seen = _relay_set_up()
    assert sum(seen["pools"]) == seen["max_streams"] and max(seen["pools"]) <= POOL_SIZE, seen
