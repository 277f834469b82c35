"""What a resolved credential is, and the names of the places it can come from."""

from __future__ import annotations

import base64
from typing import Literal

from proctor.contracts.values import dataclass, field
from proctor.core.package_identity import is_identity
from proctor.errors import CredentialError

__all__ = ["SOURCES", "ResolvedCredential", "Secret", "Source", "check_identity"]

Source = Literal["profile", "binding", "default", "host", "env", "dotenv"]
"""Where a credential was found, in resolution order."""

SOURCES: tuple[Source, ...] = ("profile", "binding", "default", "host", "env", "dotenv")


def check_identity(identity: str) -> None:
    """A package identity as :attr:`proctor.runtime.skills.LoadedSkill.identity` spells it.

    Raises:
        CredentialError: ``credential_identity_invalid``: not ``core:<name>``,
            ``registry:<publisher>/<name>`` or ``local:<path>``, printable, 1,024 characters
            at most.
    """
    if not is_identity(identity):
        raise CredentialError(
            "a package identity is core:<name>, registry:<publisher>/<name> or local:<path in"
            " the workspace> (proctor history and a refusal name it)",
            code="credential_identity_invalid",
        )


class Secret:
    """Secret material. Its ``repr`` and ``str`` never show it; :meth:`reveal` is explicit."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The material itself; call only at the adapter boundary."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


@dataclass(frozen=True)
class ResolvedCredential:
    """A credential requirement resolved for one command.

    Attributes:
        name: the requirement's name in ``run.yaml`` (``credentials.<name>``).
        provider: the provider it is for.
        mode: the selected auth mode (a key of the requirement's ``auth``).
        env: the delivery environment name the skill declared for that mode.
        source: where it was found.
        profile: the profile name, when it came from a stored profile.
        audience: the canonical ``https://host`` it is bound to, if any.
        secret: the material (hidden from ``repr``).
    """

    name: str
    provider: str
    mode: str
    env: str
    source: Source
    profile: str | None
    audience: str | None
    secret: Secret = field(repr=False, compare=False)

    def authorization(self) -> str:
        """The ``Authorization`` header value: ``Basic`` for mode ``basic``, else ``Bearer``."""
        value = self.secret.reveal()
        if self.mode == "basic":
            return "Basic " + base64.b64encode(value.encode("utf-8")).decode("ascii")
        return "Bearer " + value

    def describe(self) -> dict[str, str | None]:
        """Non-secret facts about this credential, for records and readiness output."""
        return {
            "name": self.name,
            "provider": self.provider,
            "mode": self.mode,
            "env": self.env,
            "source": self.source,
            "profile": self.profile,
            "audience": self.audience,
        }
