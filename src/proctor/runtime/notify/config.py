"""``[notify]`` in ``proctor.toml``: the channels people are told on when a request opens.

```toml
[notify]
console_url = "https://proctor.example.com"   # where the console is served (links)

[notify.team]
webhook = "https://hooks.example.com/proctor"  # a signed JSON body (format = "json")
secret = "notify-team"                         # the credential profile holding the HMAC key

[notify.chat]
webhook_profile = "team-slack"                 # the URL is a secret: kept in a profile
format = "slack"

[notify.pager]
command = ["notify-send", "proctor"]           # the notification on stdin, as JSON
after = 600                                    # escalation: only once open 10 minutes
kinds = ["approval"]
```

```toml
[approvals]
expires_in = 86400      # a request no step gives a deadline is declined after a day
```

Parsed strictly: an unknown key, a wrong type, a channel with not exactly one of
``webhook``, ``webhook_profile`` and ``command``, a ``format`` other than ``json``/``slack``,
a ``json`` webhook without a ``secret`` profile, a URL that is not ``http``/``https`` or
carries a user name or password, an empty command, a profile name that is not one: each is
refused ``notify_config_invalid`` with the key named. The webhook URL is never echoed in a
message (a Slack URL is itself a secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from proctor.contracts.values import dataclass, field
from proctor.errors import ConfigError

__all__ = ["FORMATS", "KINDS", "Channel", "NotifyConfig", "load_notify", "parse_notify"]

FORMATS = ("json", "slack")
KINDS = ("approval", "question", "retry")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_PROFILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_CHANNEL_KEYS = frozenset(
    {"webhook", "webhook_profile", "format", "secret", "command", "after", "kinds", "payload"}
)
_TOP_KEYS = frozenset({"console_url"})
MAX_AFTER = 30 * 86400
MAX_ARGV = 64


@dataclass(frozen=True)
class Channel:
    """One ``[notify.<name>]`` channel, valid by construction (see :func:`parse_notify`).

    Attributes:
        name: the table's name.
        webhook: the URL a webhook channel posts to (``None`` for a command, or when the URL
            is kept in a credential profile).
        webhook_profile: the credential profile whose material is the URL (a Slack
            incoming-webhook URL is itself a secret: it stays out of ``proctor.toml``).
        format: ``json`` (signed with ``secret``) or ``slack`` (Slack's incoming-webhook body).
        secret: the credential profile whose material signs a ``json`` body.
        command: the argv of a command channel (the notification on its stdin).
        after: seconds a request must stay open before this channel is told (0: when it
            opens; more: an escalation).
        kinds: the kinds of request it is told of.
        payload: whether the body carries the request's (sanitized) payload.
    """

    name: str
    webhook: str | None = None
    format: str = "json"
    webhook_profile: str | None = None
    secret: str | None = None
    command: tuple[str, ...] = ()
    after: int = 0
    kinds: tuple[str, ...] = KINDS
    payload: bool = False

    @property
    def is_webhook(self) -> bool:
        """Whether the channel posts to a URL (given, or kept in a profile)."""
        return self.webhook is not None or self.webhook_profile is not None

    @property
    def stage(self) -> str:
        """``opened`` for a channel told at once, ``escalated`` for one told later."""
        return "escalated" if self.after else "opened"

    def describe(self) -> dict[str, Any]:
        """The channel as ``proctor notify list`` shows it: never the webhook URL (a Slack
        URL is a secret), only its scheme and host."""
        target = f"(credential profile {self.webhook_profile})" if self.webhook_profile else None
        if self.webhook:
            parts = urlsplit(self.webhook)
            target = f"{parts.scheme}://{parts.hostname}"
        return {
            "name": self.name,
            "type": "webhook" if self.is_webhook else "command",
            "format": self.format if self.is_webhook else None,
            "target": target,
            "command": list(self.command[:1]) if self.command else None,
            "signed_with": self.secret,
            "after_seconds": self.after,
            "kinds": list(self.kinds),
            "payload": self.payload,
        }


@dataclass(frozen=True)
class NotifyConfig:
    """Every channel of a workspace, and where its console is served."""

    channels: tuple[Channel, ...] = ()
    console_url: str | None = None
    by_name: dict[str, Channel] = field(default_factory=dict)
    expires_in: int | None = None
    """``[approvals] expires_in``: the deadline of a request whose step sets none (it is
    then declined; only a step may say ``on_expiry: approve``)."""

    def channel(self, name: str) -> Channel | None:
        """The channel called ``name``, if declared."""
        return self.by_name.get(name)


def _refuse(message: str) -> ConfigError:
    return ConfigError(f"proctor.toml: {message}", code="notify_config_invalid")


def _url(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 2048:
        raise _refuse(f"{where} must be an http(s) URL")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise _refuse(f"{where} must be an http(s) URL without spaces or control characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError:
        raise _refuse(f"{where} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(f"{where} must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _refuse(f"{where} must not carry a user name or password")
    return value


def _channel(name: str, table: Any) -> Channel:
    where = f"[notify.{name}]"
    if not _NAME.match(name):
        raise _refuse(f"{where}: a channel name is lower-case letters, digits, - and _")
    if not isinstance(table, Mapping):
        raise _refuse(f"notify.{name} must be a table")
    unknown = sorted(set(table) - _CHANNEL_KEYS)
    if unknown:
        raise _refuse(f"{where}: unknown key {unknown[0]!r}")
    webhook, command = table.get("webhook"), table.get("command")
    profile = table.get("webhook_profile")
    if sum(v is not None for v in (webhook, command, profile)) != 1:
        raise _refuse(f"{where}: give exactly one of webhook, webhook_profile or command")
    if profile is not None and (not isinstance(profile, str) or not _PROFILE.match(profile)):
        raise _refuse(f"{where}: webhook_profile names a credential profile")
    fmt = table.get("format", "json")
    if fmt not in FORMATS:
        raise _refuse(f"{where}: format is one of {', '.join(FORMATS)}")
    secret = table.get("secret")
    if secret is not None and (not isinstance(secret, str) or not _PROFILE.match(secret)):
        raise _refuse(f"{where}: secret names a credential profile")
    after = table.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_AFTER:
        raise _refuse(f"{where}: after is whole seconds from 0 to {MAX_AFTER}")
    kinds = table.get("kinds", list(KINDS))
    if (
        not isinstance(kinds, list)
        or not kinds
        or any(k not in KINDS for k in kinds)
        or len(set(kinds)) != len(kinds)
    ):
        raise _refuse(f"{where}: kinds is a list of {', '.join(KINDS)}")
    payload = table.get("payload", False)
    if not isinstance(payload, bool):
        raise _refuse(f"{where}: payload is true or false")
    if webhook is not None or profile is not None:
        url = _url(f"{where} webhook", webhook) if webhook is not None else None
        if fmt == "json" and secret is None:
            raise _refuse(f"{where}: a json webhook is signed: name the profile in secret")
        return Channel(name, url, fmt, profile, secret, (), after, tuple(kinds), payload)
    if "format" in table or secret is not None:
        raise _refuse(f"{where}: format and secret are for webhooks")
    if (
        not isinstance(command, list)
        or not command
        or len(command) > MAX_ARGV
        or any(not isinstance(a, str) or not a or "\x00" in a for a in command)
    ):
        raise _refuse(f"{where}: command is a non-empty list of non-empty strings")
    return Channel(name, None, "json", None, None, tuple(command), after, tuple(kinds), payload)


def parse_notify(document: Mapping[str, Any]) -> NotifyConfig:
    """The ``[notify]`` table of a parsed ``proctor.toml`` (empty when absent).

    Raises:
        ConfigError: ``notify_config_invalid`` (see the module's docstring).
    """
    expires_in = _approvals(document.get("approvals"))
    section = document.get("notify")
    if section is None:
        return NotifyConfig(expires_in=expires_in)
    if not isinstance(section, Mapping):
        raise _refuse("[notify] must be a table")
    console_url = section.get("console_url")
    if console_url is not None:
        console_url = _url("notify.console_url", console_url).rstrip("/")
    channels = []
    for key, value in section.items():
        if key in _TOP_KEYS:
            continue
        if not isinstance(value, Mapping):
            raise _refuse(f"[notify]: unknown key {key!r}")
        channels.append(_channel(key, value))
    by_name = {c.name: c for c in channels}
    return NotifyConfig(tuple(channels), console_url, by_name, expires_in)


def _approvals(section: Any) -> int | None:
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise _refuse("[approvals] must be a table")
    unknown = sorted(set(section) - {"expires_in"})
    if unknown:
        hint = " (on_expiry: approve is only allowed on a step)" if "on_expiry" in unknown else ""
        raise _refuse(f"[approvals]: unknown key {unknown[0]!r}{hint}")
    value = section.get("expires_in")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_AFTER:
        raise _refuse(f"[approvals] expires_in is whole seconds from 1 to {MAX_AFTER}")
    return value


def load_notify(workspace_root: Path) -> NotifyConfig:
    """Read ``[notify]`` from ``<workspace>/proctor.toml``; empty when either is absent.

    Raises:
        ConfigError: ``bad_config`` (not TOML), ``notify_config_invalid``.
    """
    path = workspace_root / "proctor.toml"
    if not path.is_file():
        return NotifyConfig()
    import tomllib  # read only when the workspace has a proctor.toml

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"proctor.toml is not valid TOML: {exc}", code="bad_config") from exc
    return parse_notify(document)
