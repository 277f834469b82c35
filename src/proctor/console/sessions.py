"""Signed-in sessions: a random id in an HttpOnly cookie, a CSRF token, an expiry.

Sessions live in the server's memory: a restart signs everyone out. A session ends at its
expiry whatever its use (no sliding renewal), when its person signs out, or when the person
is removed from the home's users.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable

from proctor.contracts.values import dataclass

__all__ = ["DEFAULT_SESSION_SECONDS", "SessionBook", "SignedIn"]

DEFAULT_SESSION_SECONDS = 8 * 3600.0


@dataclass(frozen=True)
class SignedIn:
    """One signed-in person: who, the CSRF token their forms carry, and when it ends."""

    sid: str
    user: str
    csrf: str
    expires_at: float

    def csrf_ok(self, given: str | None) -> bool:
        """Whether a form's token is this session's (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


class SessionBook:
    """The console's live sessions.

    Args:
        seconds: how long a session lasts from sign-in.
        clock: seconds now (monotonic by default; tests pass their own).
    """

    def __init__(
        self, seconds: float = DEFAULT_SESSION_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self._live: dict[str, SignedIn] = {}
        self._lock = threading.Lock()

    def open(self, user: str) -> SignedIn:
        """A new session for ``user``."""
        session = SignedIn(
            sid=secrets.token_urlsafe(32),
            user=user,
            csrf=secrets.token_urlsafe(32),
            expires_at=self.clock() + self.seconds,
        )
        with self._lock:
            self._drop_expired()
            self._live[session.sid] = session
        return session

    def get(self, sid: str | None) -> SignedIn | None:
        """The live session ``sid``, or ``None`` (unknown, or expired: then it is dropped)."""
        if not sid:
            return None
        with self._lock:
            session = self._live.get(sid)
            if session is not None and session.expires_at <= self.clock():
                del self._live[sid]
                return None
            return session

    def close(self, sid: str) -> None:
        """End a session (sign out)."""
        with self._lock:
            self._live.pop(sid, None)

    def _drop_expired(self) -> None:
        now = self.clock()
        for sid in [s for s, v in self._live.items() if v.expires_at <= now]:
            del self._live[sid]
