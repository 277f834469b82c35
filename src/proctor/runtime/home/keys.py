"""The local Ed25519 signing key: where it lives, creating it once, refusing an exposed one.

The key file is ``<home>/signing_key.pem`` (home = ``PROCTOR_HOME``, else ``~/.proctor``), an
unencrypted PKCS#8 PEM private key, created on first use with mode 0600 inside a home created
with mode 0700. ``PROCTOR_SIGNING_KEY`` names another key file instead; that file must
already exist (proctor only ever creates the key in the home).

A key file that is readable or writable by group or others, or owned by another user, is
refused: a signing key anyone on the machine can read signs for anyone.

Paths are shown as ``~/.proctor/signing_key.pem``, ``$PROCTOR_HOME/...`` or
``$PROCTOR_SIGNING_KEY``, never as absolute host paths.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from proctor.errors import ConfigError
from proctor.receipts.signing import PublicKey, Signer, parse_private_key_pem, parse_public_key
from proctor.runtime.home.files import home_dir

__all__ = [
    "KEY_FILE_NAME",
    "LocalKey",
    "home_dir",
    "load_public_key_file",
    "load_signer",
    "trusted_local_key",
]

KEY_FILE_NAME = "signing_key.pem"
_MAX_KEY_FILE = 64 * 1024


@dataclass(frozen=True, slots=True)
class LocalKey:
    """The signer, the key file's path, how to show that path, and whether it was just made."""

    signer: Signer
    path: Path
    shown_path: str
    created: bool


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _key_location(environ: Mapping[str, str] | None) -> tuple[Path, str, bool]:
    env = _env(environ)
    named = env.get("PROCTOR_SIGNING_KEY")
    if named:
        return Path(named), "$PROCTOR_SIGNING_KEY", False
    home, shown = home_dir(environ)
    return home / KEY_FILE_NAME, f"{shown}/{KEY_FILE_NAME}", True


def _read_key_file(path: Path, shown: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(
            f"the signing key {shown} could not be opened: {exc.strerror}",
            code="signing_key_unreadable",
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"the signing key {shown} is not a regular file", code="signing_key_invalid"
            )
        if os.name == "posix":
            if info.st_mode & 0o077:
                raise ConfigError(
                    f"the signing key {shown} is readable or writable by group or others "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {shown}",
                    code="signing_key_exposed",
                )
            if info.st_uid != os.getuid():
                raise ConfigError(
                    f"the signing key {shown} belongs to another user; use a key file you own",
                    code="signing_key_exposed",
                )
        data = os.read(fd, _MAX_KEY_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_KEY_FILE:
        raise ConfigError(f"the signing key {shown} is too large", code="signing_key_invalid")
    return data


def _create_key(path: Path) -> bool:
    """Create a new key at ``path`` (mode 0600); False when another process made it first."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    signer = Signer(Ed25519PrivateKey.generate())
    # Unique per attempt, so two sessions of one process (threads) never share a temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.write(fd, signer.private_pem())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def load_signer(environ: Mapping[str, str] | None = None, *, create: bool = True) -> LocalKey:
    """The local signing key, created in the home on first use when ``create``.

    Raises:
        ConfigError: ``signing_key_exposed`` (group/other permissions or another owner:
            the message says ``chmod 600``), ``signing_key_invalid`` (not a PEM Ed25519 key),
            ``signing_key_missing`` (``PROCTOR_SIGNING_KEY`` names no file, or ``create`` is
            False and there is no key), ``signing_key_unreadable``.
    """
    path, shown, in_home = _key_location(environ)
    created = False
    try:
        data = _read_key_file(path, shown)
    except FileNotFoundError:
        if not in_home:
            raise ConfigError(
                "PROCTOR_SIGNING_KEY names a file that does not exist", code="signing_key_missing"
            ) from None
        if not create:
            raise ConfigError(
                f"there is no signing key at {shown} yet; `proctor key show` creates one",
                code="signing_key_missing",
            ) from None
        try:
            created = _create_key(path)
        except OSError as exc:
            raise ConfigError(
                f"the signing key {shown} could not be created: {exc.strerror}",
                code="signing_key_unreadable",
            ) from exc
        data = _read_key_file(path, shown)
    return LocalKey(parse_private_key_pem(data), path, shown, created)


def trusted_local_key(environ: Mapping[str, str] | None = None) -> PublicKey | None:
    """The public half of the local signing key, or ``None`` when none exists (never creates).

    Raises:
        ConfigError: the key file exists but is exposed or invalid (see :func:`load_signer`).
    """
    path, _, in_home = _key_location(environ)
    if in_home and not path.exists():
        return None
    return load_signer(environ, create=False).signer.public_key


def load_public_key_file(path: Path) -> PublicKey:
    """A public key from a file: PEM, the ``proctor key show --json`` document, or hex.

    Raises:
        ConfigError: (``public_key_invalid`` / ``public_key_unreadable``) unreadable or not an
            Ed25519 public key in one of those forms.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise ConfigError(
            f"the public key file {path.name!r} could not be read: {exc.strerror}",
            code="public_key_unreadable",
        ) from exc
    if len(data) > _MAX_KEY_FILE:
        raise ConfigError("the public key file is too large", code="public_key_invalid")
    return parse_public_key(data)
