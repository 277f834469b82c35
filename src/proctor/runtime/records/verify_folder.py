"""Verify a receipt and its tree from a folder of receipt files: :func:`verify_receipt`, the
Python API behind ``proctor verify``.

Kept apart from :mod:`.receipts` (the store that writes receipts) so that verifying loads
neither the store's machinery nor ``pathlib`` (with ``urllib.parse`` and ``ipaddress`` behind
it, a tenth of ``proctor verify``'s start-up): a folder is read by the name it is given (see
:class:`~.folder_reader.FolderReader`). Only a verification that falls back to the workspace
store loads :mod:`.receipts`, to find that store and refuse one that is not ours.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from proctor.errors import UsageError
from proctor.receipts.parts import RECEIPT_ID

if TYPE_CHECKING:
    from pathlib import Path

    from proctor.receipts.signing import PublicKey
    from proctor.receipts.verify import VerifyResult

__all__ = ["MAX_TARGET_BYTES", "verify_receipt"]

MAX_TARGET_BYTES = 64 * 1024 * 1024
"""The most a receipt file named as the target is read (a step of 10,000 calls commits some
2 MB of children)."""


def _trusted(
    public_key: PublicKey | bytes | str | os.PathLike[str] | None,
    environ: Mapping[str, str] | None = None,
) -> list[PublicKey]:
    from proctor.receipts.signing import PublicKey, parse_public_key
    from proctor.runtime.home.public_key_file import load_public_key_file

    if public_key is None:  # the local key and the keys rotation kept trusted
        from proctor.runtime.home.keys import trusted_local_keys

        return trusted_local_keys(environ)
    if isinstance(public_key, PublicKey):
        return [public_key]
    if isinstance(public_key, bytes):
        return [parse_public_key(public_key)]
    return [load_public_key_file(public_key)]


def verify_receipt(
    target: str | os.PathLike[str],
    *,
    receipts_dir: str | os.PathLike[str] | None = None,
    public_key: PublicKey | bytes | str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> VerifyResult:
    """Verify a receipt and its whole tree; usable on any folder, without a workspace.

    ``target`` is a receipt id (``sha256:<hex>`` or bare hex) or the path of a receipt file.
    Children are read from ``receipts_dir`` when given (a plain folder of ``<hex>.json`` files,
    e.g. an auditor's copy: no index needed), else from the target file's folder, else from
    the workspace store (``PROCTOR_RECEIPT_DIR`` or ``.proctor/receipts``, which must be ours).
    ``public_key`` is the trusted key: a :class:`~proctor.receipts.signing.PublicKey`, key
    bytes (PEM, the ``proctor key show --json`` document, or hex), or a path to such a file;
    by default the local signing key's public half, if one exists (none is created), and the
    keys kept trusted in ``<home>/trusted_keys/`` (``proctor key rotate`` keeps the old key
    there; ``environ`` says where the home is, default the process's). A receipt signed by
    any other key is ``unverified``.

    Returns a :class:`~proctor.receipts.verify.VerifyResult` (tampering is a result).

    Raises:
        UsageError: ``target`` is neither a receipt id nor a readable file, or the file is
            past :data:`MAX_TARGET_BYTES` (``receipt_target_invalid``).
        ConfigError: the public key cannot be read.
        ReceiptInvalid: (``receipt_store_foreign``) the workspace store is not ours.
    """
    from proctor.receipts.verify import verify_tree
    from proctor.runtime.records.folder_reader import FolderReader
    from proctor.runtime.records.signature_processes import SignatureProcesses

    keys = _trusted(public_key, environ)
    text = os.fspath(target)
    root_bytes: bytes | None = None
    root_id: str | None = None
    folder: str | Path | None = os.fspath(receipts_dir) if receipts_dir is not None else None
    match = None if isinstance(target, os.PathLike) else RECEIPT_ID.match(text.strip().lower())
    if match is not None:
        root_id = "sha256:" + match.group(1)
    else:
        from pathlib import Path  # a file named as the target: read as before

        path = Path(text)
        try:
            with open(path, "rb") as handle:  # a device or a pipe may never end: read a cap
                root_bytes = handle.read(MAX_TARGET_BYTES + 1)
        except OSError as exc:
            raise UsageError(
                f"{path.name or text!r} is neither a receipt id nor a readable receipt file",
                code="receipt_target_invalid",
            ) from exc
        if len(root_bytes) > MAX_TARGET_BYTES:
            raise UsageError(
                f"{path.name or text!r} is larger than {MAX_TARGET_BYTES >> 20} MiB; no receipt"
                " is that large",
                code="receipt_target_invalid",
            )
        named = re.fullmatch(r"([0-9a-f]{64})\.json", path.name)
        root_id = f"sha256:{named.group(1)}" if named else None
        if folder is None:
            folder = path.parent
    if folder is None:
        from proctor.runtime.records.receipts import ReceiptStore, default_receipt_dir

        store = ReceiptStore(default_receipt_dir())
        # refuses a store that is not ours before reading; a missing store holds nothing
        folder = store.directory if store._check(create=False) else None

    if folder is None:
        return verify_tree(root_id, lambda receipt_id: None, keys, root_bytes=root_bytes)
    load = FolderReader(folder)
    try:
        with SignatureProcesses() as pool:
            return verify_tree(
                root_id,
                load.read,
                keys,
                root_bytes=root_bytes,
                submit_batch=pool.submit,
                reload=load.again,  # a pack's receipt is read where the index says: unchecked
            )
    finally:
        load.close()
