"""Shared by the canary tests: the six ways a credential reaches a run, and where a leak shows."""

from __future__ import annotations

from tests.e2e.conftest import Result, Ws

PATHS = ["profile", "binding", "default", "host", "env", "dotenv"]
"""Every source a run resolves a credential from (``host`` is the Python API's handles)."""


def store_profile(ws: Ws, name: str, material: str, skill: str | None = None) -> None:
    """``proctor credential set canary --profile NAME --from-stdin`` with ``material``, bound
    to the package ``skills/<skill>`` when one is named (a profile without an audience goes to
    no other)."""
    stored = ws.proctor("credential", "set", "canary", "--profile", name, "--from-stdin",
                        stdin=material)  # fmt: skip
    assert stored.code == 0, stored.stderr
    if skill is not None:
        bound = ws.proctor("credential", "bind", name, f"local:skills/{skill}", "--yes")
        assert bound.code == 0, bound.stderr


def arrange(
    ws: Ws, path: str, skill: str, secret: str, decoy: str, env: dict[str, str]
) -> list[str]:
    """Make ``secret`` reachable through ``path`` only (a ``decoy`` where another source could
    win); returns the extra ``proctor run`` arguments and fills ``env`` for the env path.
    ``host`` needs nothing here: the test hands the secret to the Python API itself."""
    if path == "profile":
        store_profile(ws, "chosen", secret, skill)
        store_profile(ws, "other", decoy, skill)  # now the provider's default
        return ["--profile", "chosen"]
    if path == "binding":
        store_profile(ws, "bound", secret, skill)
        store_profile(ws, "other", decoy, skill)
        bound = ws.proctor("credential", "bind", "bound", "--skill", skill, "--credential", "api")
        assert bound.code == 0, bound.stderr
    elif path == "default":
        store_profile(ws, "only", secret, skill)
    elif path == "env":
        env["CANARY_TOKEN"] = secret
    elif path == "dotenv":
        (ws.root / ".env").write_text(f"CANARY_TOKEN={secret}\n")
    return []


def leaks(ws: Ws, result: Result, secret: str) -> list[str]:
    """Every output place that carries ``secret``: stdout, stderr and each file under .proctor
    (run store with its WAL, audit log, receipts)."""
    places = {"stdout": result.stdout.encode(), "stderr": result.stderr.encode()}
    for path in sorted((ws.root / ".proctor").rglob("*")):
        if path.is_file():
            places[path.relative_to(ws.root).as_posix()] = path.read_bytes()
    return [where for where, data in places.items() if secret.encode() in data]
