"""The home's ``config.json``: the ``agent`` section a managed agent run reads.

``proctor config set agent.KEY VALUE`` writes one key of ``{"agent": {...}}`` and keeps every
other key of the file (the credential profiles live in the same file) as it is. Keys:

| key                  | meaning                                                                |
| -------------------- | ---------------------------------------------------------------------- |
| `agent.provider`     | `openai`, `anthropic`, or any other name (then `dialect` and           |
|                      | `endpoint_url` are required)                                           |
| `agent.model`        | the model name sent to the provider; there is no default               |
| `agent.dialect`      | `chat_completions`, `anthropic_messages` or `openai_responses`         |
| `agent.endpoint_url` | the API base, e.g. `http://127.0.0.1:8080/v1`; the only destination    |
|                      | model traffic may reach                                                |
| `agent.secret`       | the NAME of a credential profile (``proctor credential set``) holding  |
|                      | the API key; never the key itself                                      |
| `agent.timeout_s`    | per-request timeout in seconds (default 60)                            |
| `agent.max_retries`  | retries after a 429 or 5xx answer (default 2)                          |
| `agent.max_tokens`   | the answer limit sent with each request (the provider's default else)  |
| `agent.context_chars`| a managed turn's context budget in characters (default 400000, about   |
|                      | 100k tokens): older tool results are summarised to stay under it       |
| `agent.cost`         | the provider's price as JSON: `{"usd_micro": N, "per": "call"}`, or a  |
|                      | list pricing `1k_tokens_in` and `1k_tokens_out`; a managed turn under  |
|                      | a spend limit needs it                                                 |

A value that looks like a key (a credential shape) is refused for every field: keys reach
proctor only through the credentials path, never argv.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, ParseError, ProctorError
from proctor.runtime.boundary.plain_file import regular_file

if TYPE_CHECKING:
    from proctor.core.spend import Price

__all__ = [
    "AGENT_KEYS",
    "DIALECTS",
    "AgentConfig",
    "Dialect",
    "agent_config",
    "load_config",
    "set_agent_value",
    "unset_agent_value",
]

Dialect = Literal["chat_completions", "anthropic_messages", "openai_responses"]
DIALECTS: tuple[Dialect, ...] = ("chat_completions", "anthropic_messages", "openai_responses")
AGENT_KEYS: tuple[str, ...] = (
    "provider",
    "model",
    "dialect",
    "endpoint_url",
    "secret",
    "timeout_s",
    "max_retries",
    "max_tokens",
    "cost",
    "context_chars",
)
# The two providers proctor knows by name: their dialect and public API base.
_KNOWN: dict[str, tuple[Dialect, str]] = {
    "openai": ("openai_responses", "https://api.openai.com/v1"),
    "anthropic": ("anthropic_messages", "https://api.anthropic.com/v1"),
}
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


@dataclass(frozen=True)
class AgentConfig:
    """A complete managed-agent configuration; valid by construction (see :func:`agent_config`).

    Attributes:
        provider: the provider name.
        model: the model name (never defaulted).
        dialect: the wire format spoken to the endpoint.
        endpoint_url: the API base, without a trailing slash.
        secret: the credential profile holding the key, or ``None`` (a keyless local server).
        timeout_s: per-request timeout.
        max_retries: retries after 429/5xx.
        max_tokens: the answer limit sent with each request, or ``None`` (the provider's).
        prices: the provider's declared ``cost`` (empty: undeclared, so a managed turn under
            a spend limit is refused ``price_unknown``).
        context_chars: a managed turn's context budget in characters, or ``None`` (the
            default, :data:`proctor.runtime.agents.context.DEFAULT_CONTEXT_CHARS`).
    """

    provider: str
    model: str
    dialect: Dialect
    endpoint_url: str
    secret: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    max_tokens: int | None = None
    prices: tuple[Price, ...] = ()
    context_chars: int | None = None

    def describe(self) -> dict[str, Any]:
        """The configuration as JSON (the secret's profile name only)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "dialect": self.dialect,
            "endpoint_url": self.endpoint_url,
            "secret": self.secret,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "max_tokens": self.max_tokens,
            "cost": [p.to_json() for p in self.prices] or None,
            "context_chars": self.context_chars,
        }


def _home(home: Path | None) -> Path:
    if home is not None:
        return home
    named = os.environ.get("PROCTOR_HOME")
    return Path(named) if named else Path.home() / ".proctor"


_CONFIG_PATHS: dict[Path, str] = {}


def _config_path(home: Path) -> str:
    """The text of ``home/config.json``, joined once per home (a path is a value: the file
    itself is looked at on every read)."""
    path = _CONFIG_PATHS.get(home)
    if path is None:
        if len(_CONFIG_PATHS) >= 64:
            _CONFIG_PATHS.clear()
        path = _CONFIG_PATHS[home] = os.path.join(home, "config.json")
    return path


def load_config(home: Path | None = None) -> dict[str, Any]:
    """The whole ``config.json`` of the home (``{}`` when there is none).

    Raises:
        ConfigError: (``config_invalid``) the file is not a JSON object.
    """
    # by the path's text (a seal asks for its witnesses every run), not a Path built for it
    path = _config_path(_home(home))
    if not regular_file(path):
        return {}
    from proctor.contracts import json_strict

    try:
        with open(path, "rb") as handle:
            document = json_strict.loads(handle.read(), source="config.json")
    except ParseError as exc:
        # strict: a key given twice (a witness, a signing setting) would read one way here
        # and another to any other reader of the file
        raise ConfigError(
            f"the home's config.json is not valid JSON ({exc.code}: {exc})", code="config_invalid"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError("the home's config.json is not an object", code="config_invalid")
    return document


def _save(home: Path, document: dict[str, Any]) -> None:
    from proctor.runtime.home.files import write_private

    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")
    write_private(home / "config.json", data)


def _section(document: dict[str, Any]) -> dict[str, Any]:
    section = document.setdefault("agent", {})
    if not isinstance(section, dict):
        raise ConfigError("config.json: agent must be an object", code="config_invalid")
    return section


def _key_of(dotted: str) -> str:
    prefix, _, key = dotted.partition(".")
    if prefix != "agent" or key not in AGENT_KEYS:
        known = ", ".join(f"agent.{k}" for k in AGENT_KEYS)
        raise ConfigError(f"unknown setting {dotted!r}; known: {known}", code="config_key_unknown")
    return key


def _looks_like_secret(value: str) -> bool:
    from proctor.runtime.boundary.sanitize import scrub_text

    return scrub_text(value) != value


def _typed(key: str, value: str) -> Any:
    if _looks_like_secret(value):
        raise ConfigError(
            f"the value for agent.{key} looks like a credential; store keys with"
            " `proctor credential set` and name the profile in agent.secret",
            code="config_value_secret",
        )
    if key == "dialect" and value not in DIALECTS:
        raise ConfigError(
            f"unknown dialect {value!r}; expected one of {', '.join(DIALECTS)}",
            code="agent_dialect_unknown",
        )
    if key == "endpoint_url":
        _check_endpoint(value, has_secret=False)
        return value.rstrip("/")
    if key == "secret":
        from proctor.runtime.home.credentials.store import validate_name

        try:
            validate_name("profile", value)
        except Exception as exc:
            raise ConfigError(
                "agent.secret must name a credential profile (letters, digits, '.', '_', '-')",
                code="config_value_invalid",
            ) from exc
    if key == "timeout_s":
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 < number <= 3600:
            raise ConfigError(
                "agent.timeout_s must be a number of seconds in (0, 3600]",
                code="config_value_invalid",
            )
        return number
    if key == "cost":
        from proctor.contracts import json_strict

        try:
            document = json_strict.loads(value, source="agent.cost")
        except ParseError as exc:
            raise ConfigError(
                'agent.cost is JSON: {"usd_micro": N, "per": "call"} or a list of such'
                f" ({exc.message})",
                code="cost_invalid",
            ) from None
        return [p.to_json() for p in _prices(document)]
    if key == "max_tokens":
        if not value.isdigit() or not 1 <= int(value) <= 1_000_000:
            raise ConfigError(
                "agent.max_tokens must be an integer 1-1000000", code="config_value_invalid"
            )
        return int(value)
    if key == "context_chars":
        if not value.isdigit() or not 1_000 <= int(value) <= 100_000_000:
            raise ConfigError(
                "agent.context_chars must be an integer 1000-100000000",
                code="config_value_invalid",
            )
        return int(value)
    if key == "max_retries":
        if not value.isdigit() or int(value) > 10:
            raise ConfigError(
                "agent.max_retries must be an integer 0-10", code="config_value_invalid"
            )
        return int(value)
    if not value.strip() or len(value) > 256:
        raise ConfigError(
            f"agent.{key} must be a non-empty text of at most 256 characters",
            code="config_value_invalid",
        )
    return value


def _prices(document: Any) -> tuple[Price, ...]:
    from proctor.core.spend import parse_prices

    try:
        return parse_prices(document, "agent.cost")
    except ProctorError as exc:
        raise ConfigError(exc.message, code="cost_invalid") from exc


def _check_endpoint(url: str, *, has_secret: bool) -> None:
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ConfigError(
            "agent.endpoint_url is not a valid URL", code="agent_endpoint_invalid"
        ) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(
            "agent.endpoint_url must be an http(s) URL with a host", code="agent_endpoint_invalid"
        )
    if parsed.userinfo or parsed.query or parsed.fragment:
        raise ConfigError(
            "agent.endpoint_url must carry no credentials, query or fragment",
            code="agent_endpoint_invalid",
        )
    if parsed.scheme == "http" and has_secret and not _is_loopback(parsed.host):
        raise ConfigError(
            "agent.endpoint_url is plain http to a host that is not loopback, and a key is"
            " configured: the key would cross the network unencrypted; use https",
            code="agent_endpoint_insecure",
        )


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def set_agent_value(dotted: str, value: str, *, home: Path | None = None) -> dict[str, Any]:
    """Set ``agent.KEY`` to ``value`` in the home's ``config.json``; returns the agent section.

    Raises:
        ConfigError: an unknown key (``config_key_unknown``), a value that looks like a
            credential (``config_value_secret``), an invalid value, or an unreadable file.
    """
    key = _key_of(dotted)
    typed = _typed(key, value)
    where = _home(home)
    document = load_config(where)
    section = _section(document)
    section[key] = typed
    _save(where, document)
    return dict(section)


def unset_agent_value(dotted: str, *, home: Path | None = None) -> dict[str, Any]:
    """Remove ``agent.KEY`` from the home's ``config.json``; returns the agent section.

    Raises:
        ConfigError: an unknown key or an unreadable file.
    """
    key = _key_of(dotted)
    where = _home(home)
    document = load_config(where)
    section = _section(document)
    section.pop(key, None)
    _save(where, document)
    return dict(section)


def agent_config(home: Path | None = None, *, section: dict[str, Any] | None = None) -> AgentConfig:
    """The managed-agent configuration, complete, or a refusal naming what is missing.

    Args:
        home: the home (default ``PROCTOR_HOME`` or ``~/.proctor``).
        section: an ``agent`` mapping to use instead of the file's (tests, programs).

    Raises:
        ConfigError: ``agent_provider_missing``, ``agent_model_missing`` (there is no default
            model), ``agent_dialect_missing``/``agent_dialect_unknown``,
            ``agent_endpoint_missing``/``agent_endpoint_invalid``/``agent_endpoint_insecure``,
            or ``config_invalid``.
    """
    raw = dict(section) if section is not None else dict(_section(load_config(home)))
    provider = raw.get("provider")
    if not isinstance(provider, str) or not provider:
        raise ConfigError(
            "no agent provider is configured; run `proctor config set agent.provider NAME`",
            code="agent_provider_missing",
        )
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(
            "no agent model is configured and proctor has no default model; run"
            " `proctor config set agent.model NAME`",
            code="agent_model_missing",
        )
    known = _KNOWN.get(provider)
    dialect = raw.get("dialect") or (known[0] if known else None)
    if dialect is None:
        raise ConfigError(
            f"provider {provider!r} is not one proctor knows by name; set agent.dialect"
            f" ({', '.join(DIALECTS)}) and agent.endpoint_url",
            code="agent_dialect_missing",
        )
    if dialect not in DIALECTS:
        raise ConfigError(f"unknown dialect {dialect!r}", code="agent_dialect_unknown")
    endpoint = raw.get("endpoint_url") or (known[1] if known else None)
    if not isinstance(endpoint, str) or not endpoint:
        raise ConfigError(
            f"provider {provider!r} needs agent.endpoint_url (the API base URL)",
            code="agent_endpoint_missing",
        )
    secret = raw.get("secret")
    if secret is not None and not isinstance(secret, str):
        raise ConfigError("agent.secret must name a credential profile", code="config_invalid")
    if known is not None and not secret:
        raise ConfigError(
            f"provider {provider!r} needs a key: store it with `proctor credential set` and"
            " name the profile with `proctor config set agent.secret PROFILE`",
            code="agent_secret_missing",
        )
    _check_endpoint(endpoint, has_secret=bool(secret))
    timeout = raw.get("timeout_s", 60.0)
    retries = raw.get("max_retries", 2)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError("agent.timeout_s must be a positive number", code="config_invalid")
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
        raise ConfigError("agent.max_retries must be an integer 0-10", code="config_invalid")
    max_tokens = raw.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise ConfigError("agent.max_tokens must be a positive integer", code="config_invalid")
    cost = raw.get("cost")
    context_chars = raw.get("context_chars")
    if context_chars is not None and (
        not isinstance(context_chars, int)
        or isinstance(context_chars, bool)
        or not 1_000 <= context_chars <= 100_000_000
    ):
        raise ConfigError(
            "agent.context_chars must be an integer 1000-100000000", code="config_invalid"
        )
    return AgentConfig(
        provider=provider,
        model=model,
        dialect=dialect,
        endpoint_url=endpoint.rstrip("/"),
        secret=secret or None,
        timeout_s=float(timeout),
        max_retries=retries,
        max_tokens=max_tokens,
        prices=() if cost is None else _prices(cost),
        context_chars=context_chars,
    )
