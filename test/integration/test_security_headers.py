"""Every response carries the security headers (docs/API.md, "Security headers"): the page, the API, its
errors, the guards' refusals and the Socket.IO transport."""

from __future__ import annotations

import requests

EXPECTED = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _check(res: requests.Response, what: str) -> None:
    for name, value in EXPECTED.items():
        assert res.headers.get(name) == value, (what, name, res.headers)
    csp = res.headers.get("Content-Security-Policy", "")
    for directive in ("frame-ancestors 'none'", "script-src 'self'", "object-src 'none'", "default-src 'self'"):
        assert directive in csp, (what, csp)


def test_every_kind_of_response_has_the_security_headers(server):
    url = server.url
    cid = server.post("/api/conversations", {"title": "h"}).json()["conversation_id"]
    server.request("POST", f"/api/conversations/{cid}/files", files={"file": ("page.html", b"<script>1</script>")})
    answers = {
        "page": requests.get(url + "/", timeout=10),
        "healthz": requests.get(url + "/healthz", timeout=10),
        "api": requests.get(url + "/api/conversations", timeout=10),
        "download": requests.get(url + f"/api/conversations/{cid}/files/page.html", timeout=10),
        "404": requests.get(url + "/api/nothing-here", timeout=10),
        "405": requests.delete(url + "/healthz", timeout=10),
        "400": requests.post(url + "/api/tasks", data="{", headers={"Content-Type": "application/json"},
                             timeout=10),
        "forbidden host": requests.get(url + "/healthz", headers={"Host": "evil.example"}, timeout=10),
        "socket.io": requests.get(url + "/socket.io/?EIO=4&transport=polling", timeout=10),
        "openapi": requests.get(url + "/openapi.json", timeout=10),
    }
    assert answers["forbidden host"].status_code == 403
    assert answers["socket.io"].status_code == 200
    assert answers["download"].status_code == 200
    for what, res in answers.items():
        _check(res, what)
