"""Read a trusted public key from a file (``proctor verify --key``).

Kept apart from :mod:`proctor.runtime.home.keys` (which re-exports it): verifying with a
named key then loads not the signing-key machinery. A file larger than
:data:`MAX_KEY_FILE` is refused unread past that size.
"""

from __future__ import annotations

import os

from proctor.errors import ConfigError
from proctor.receipts.signing import PublicKey, parse_public_key

__all__ = ["MAX_KEY_FILE", "load_public_key_file"]

MAX_KEY_FILE = 64 * 1024


def load_public_key_file(path: str | os.PathLike[str]) -> PublicKey:
    """A public key from a file: PEM, the ``proctor key show --json`` document, or hex.

    Raises:
        ConfigError: (``public_key_invalid`` / ``public_key_unreadable``) unreadable or not an
            Ed25519 public key in one of those forms.
    """
    try:
        with open(path, "rb") as handle:  # open, not Path.open: verify loads no pathlib
            data = handle.read(MAX_KEY_FILE + 1)
    except OSError as exc:
        name = os.path.basename(os.fspath(path))
        raise ConfigError(
            f"the public key file {name!r} could not be read: {exc.strerror}",
            code="public_key_unreadable",
        ) from exc
    if len(data) > MAX_KEY_FILE:
        raise ConfigError("the public key file is too large", code="public_key_invalid")
    return parse_public_key(data)
