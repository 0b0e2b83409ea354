"""The bare relay (bench/streaming/relay.py) runs on the same footing as the product, so bench/load.py's ratio
measures the product, not a handicap of the relay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]

RELAY_MAIN = """
import json
import flask_socketio
from bench.streaming import relay
flask_socketio.SocketIO.run = lambda *args, **kwargs: None  # main's set-up only, no serving
relay.main(["--port", "1"])
import eventlet, httpcore2._utils
print(json.dumps({"real_select": httpcore2._utils.select is eventlet.patcher.original("select")}))
"""


def test_the_relay_keeps_httpcores_pool_probes_off_the_hub_as_the_product_does():
    """run.py's `keep_pool_probes_off_the_hub`: without it each model request of the relay waited a turn of the
    event loop per idle pooled connection, and the product/relay ratio flattered the product."""
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", RELAY_MAIN], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env=env)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"real_select": True}
