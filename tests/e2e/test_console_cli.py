"""``proctor console user ...`` and ``proctor serve`` as an operator uses them."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx

from tests.e2e.conftest import Ws


def test_users_are_added_once_listed_and_removed(ws: Ws) -> None:
    added = ws.proctor("console", "user", "add", "bob")
    assert added.code == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("pct_") and "shown this once" in added.stderr
    assert token not in (ws.home / "console_users.json").read_text()
    again = ws.proctor("console", "user", "add", "bob")
    assert again.code == 2 and "error[user_exists]" in again.stderr
    bad = ws.proctor("console", "user", "add", "../etc")
    assert bad.code == 2 and "error[user_name_invalid]" in bad.stderr
    assert "bob" in ws.proctor("console", "user", "list").stdout
    assert ws.proctor("console", "user", "remove", "bob").code == 0
    gone = ws.proctor("console", "user", "remove", "bob")
    assert gone.code == 2 and "error[user_not_found]" in gone.stderr


def test_serve_refuses_to_leave_loopback_without_https_and_tls(ws: Ws) -> None:
    out = ws.proctor("serve", "--host", "0.0.0.0", "--port", "0")
    assert out.code == 2 and "error[console_public_refused]" in out.stderr
    assert "Traceback" not in out.stderr
    http = ws.proctor("serve", "--host", "0.0.0.0", "--public-url", "http://x.example")
    assert http.code == 2 and "error[public_url_invalid]" in http.stderr


def test_serve_starts_on_a_free_loopback_port(ws: Ws) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "serve", "--port", "0"],
        cwd=ws.root, env=ws.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"console: (http://127\.0\.0\.1:\d+)/pending", line)
        assert found is not None, line + proc.stderr.read()
        page = httpx.get(found.group(1) + "/login", timeout=30)
        assert page.status_code == 200 and "Sign in" in page.text
        assert httpx.get(found.group(1) + "/pending", timeout=30).status_code == 303
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
