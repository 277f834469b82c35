"""``artifact.admit``, ``artifact.read`` and ``artifact.store``: large content behind a digest.

- ``artifact.admit {path, media_type?}`` snapshots one workspace file through the same
  containment as ``fs.read`` (a sensitive file, one outside the reach, a hard-linked file or
  one holding a private key block anywhere in it is refused) into the run's artifact store
  (:mod:`proctor.runtime.records.artifacts`) and returns its ``proctor.artifact.v1``
  descriptor: a reference, the digest and size of the bytes, never a host path;
- ``artifact.read {ref, offset?, length?, encoding?}`` returns one ``proctor.artifact_page.v1``
  page of at most 4 MiB (1 MiB by default): the bytes (``base64``, or ``utf-8`` text cut back
  to a character boundary), the page's ``range_digest``, the artifact's ``digest``,
  ``next_offset`` and ``eof``. A page whose stored blocks changed since admission is refused
  (``artifact_tampered``); a reference another run admitted is unknown here; a page holding
  what the sanitizer would remove (a credential's shape, or a value delivered to this run in any
  of its echo forms) is refused (``artifact_secret``), since base64 would carry it past the
  result's scrubbing. The check reads a margin beyond both edges of the page, at least the
  longest form the run's taint set searches (twice it, so a form spread by a separator between
  every character is still whole), so a value that straddles the page's edge is seen from
  either page and each half is refused;
- ``artifact.store {value, media_type?}`` keeps a JSON value's canonical bytes the same way;
- ``artifact.open {artifact, label?}`` takes a descriptor another run of the caller's tree
  admitted (a parent hands its child one as an input; a reference is scoped to the run that
  admitted it, so the child cannot read it as it is): the artifact must be claimed by a run of
  the caller's own tree (``artifact_unknown`` otherwise: a reference grants nothing), the
  descriptor's size and digest must be the stored bytes' (``artifact_size_mismatch``,
  ``artifact_ref_invalid``), every block and the whole digest are checked
  (``artifact_tampered``), and every page is checked for secrets as ``artifact.read`` checks
  one (``artifact_secret``), all before the caller gets a claim of its own; it returns the
  descriptor with the ``label`` it was opened as (default: its source).

The store lives in proctor's own state, which no tool path reaches, so admitting or storing
changes nothing a run can see: these tools are reads (effect ``read``), not changes.
"""

from __future__ import annotations

import base64
import functools
import os
from typing import TYPE_CHECKING, Any

from proctor.errors import RefusedCall
from proctor.runtime.records.artifacts import (
    ARTIFACT_SCHEMA,
    MAX_PAGE_BYTES,
    PAGE_SCHEMA,
    REF_PATTERN,
    ArtifactStore,
    Page,
)
from proctor.runtime.tools.base import TAINT_EXTRA, Tool, ToolContext
from proctor.runtime.tools.fs import PATH_SCHEMA, path_arg
from proctor.runtime.tools.fsutil import DIGEST_PATTERN, digest_of, open_regular, os_errors_refused

if TYPE_CHECKING:
    from proctor.runtime.boundary.sanitize import TaintSet

__all__ = [
    "ARTIFACT_ADMIT",
    "ARTIFACT_OPEN",
    "ARTIFACT_READ",
    "ARTIFACT_STORE",
    "artifact_store",
]

DEFAULT_PAGE_BYTES = 1024 * 1024
_MARGIN = 256
_MAX_MARGIN = 1024 * 1024

STORE_EXTRA = "artifacts"
"""The ``ToolContext.extras`` key of an :class:`ArtifactStore` (tests lower its ceiling)."""

_MEDIA_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9!#&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#&^_.+-]{0,63}$",
}
_DESCRIPTOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "ref", "digest", "size", "media_type", "source"],
    "properties": {
        "schema": {"const": ARTIFACT_SCHEMA},
        "ref": {"type": "string", "pattern": REF_PATTERN},
        "digest": {"type": "string", "pattern": DIGEST_PATTERN},
        "size": {"type": "integer", "minimum": 0},
        "media_type": {"type": "string"},
        "source": {"type": "string"},
    },
}


def artifact_store(ctx: ToolContext) -> ArtifactStore:
    """The artifact store of the call's workspace (``ctx.extras["artifacts"]`` when given).

    Raises:
        RefusedCall: ``state_dir_unsafe`` when ``.proctor/artifacts`` is not a real folder.
    """
    given = ctx.extras.get(STORE_EXTRA)
    if isinstance(given, ArtifactStore):
        return given
    return ArtifactStore(ctx.workspace.private_dir("artifacts"))


def _admit(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.workspace.resolve(args["path"], "read")
    fd = open_regular(target)
    try:
        return artifact_store(ctx).admit_fd(
            fd,
            run_id=ctx.run_id,
            media_type=args.get("media_type", "application/octet-stream"),
            source=target.rel,
            # NULs dropped here with translate (fast), as the key check would drop them anyway
            check=lambda data: ctx.workspace.check_content(
                target.rel, data.translate(None, b"\x00")
            ),
        )
    finally:
        os.close(fd)


ARTIFACT_ADMIT = Tool(
    name="artifact.admit",
    description="Snapshot one workspace file into the run's artifact store; returns a "
    "proctor.artifact.v1 descriptor (ref, digest, size) that artifact.read pages.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {"path": PATH_SCHEMA, "media_type": _MEDIA_SCHEMA},
    },
    effect="read",
    handler=os_errors_refused(_admit),
    paths=lambda args: path_arg(args, "read"),
    output_schema=_DESCRIPTOR_SCHEMA,
)


def _utf8_page(data: bytes, eof: bool, ref: str) -> bytes:
    """``data`` cut back to its last whole UTF-8 character (unless it ends the artifact).

    Raises:
        RefusedCall: ``artifact_not_text`` when the bytes are not UTF-8.
    """
    keep = data
    if not eof:
        for back in range(1, min(4, len(data)) + 1):
            lead = data[-back]
            if lead & 0xC0 != 0x80:  # the start of the last character
                width = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4
                if width > back:
                    keep = data[:-back]
                break
    try:
        keep.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RefusedCall(
            f"the page at byte {exc.start} is not UTF-8 text; read it with encoding: base64",
            code="artifact_not_text",
            details={"ref": ref},
        ) from exc
    return keep


@functools.cache
def _printable() -> Any:
    """Runs of printable ASCII, as a linear-time (re2) pattern: binary noise stays fast."""
    import re2

    return re2.compile(rb"[\t\n\r\x20-\x7e]{8,}")


def _margin(taint: TaintSet | None) -> int:
    """How far beyond each edge of a page its check reads: enough for the longest form the
    taint set searches to be whole in the window whichever page holds part of it (twice the
    form: one separator between each of its characters), capped at 1 MiB."""
    longest = taint.longest if taint is not None else 0
    return min(max(_MARGIN, 2 * longest * 4 + 16), _MAX_MARGIN)  # up to 4 UTF-8 bytes a char


def _refuse_secrets(window: bytes, ref: str, taint: TaintSet | None = None) -> None:
    """Refuse a page whose bytes (with a margin either side, so a value cut by the page's edge
    is still whole) hold what the sanitizer removes, or a value delivered to this run in any
    form its taint set knows: a base64 page would carry it past the result's scrubbing, and a
    scrubbed text page would no longer match its digest.

    Raises:
        RefusedCall: ``artifact_secret``.
    """
    from proctor.runtime.boundary.sanitize import scrub_text

    if taint:
        text = window.translate(None, b"\x00").decode("utf-8", "replace")
        if taint.scrub(text) != text:
            raise RefusedCall(
                "this part of the artifact (or the bytes just beyond its edges) holds a value"
                " delivered to this run; proctor never returns it, whole or in pieces",
                code="artifact_secret",
                details={"ref": ref},
            )

    # NUL bytes dropped first (no secret holds one, a sparse or UTF-16 file is mostly them, and
    # a UTF-16 encoded key is then seen too); then only the runs of printable ASCII are
    # scanned: every shape the sanitizer knows is ASCII, and binary noise would make its
    # detectors crawl
    runs = _printable().findall(window.translate(None, b"\x00"))
    text = "\n".join(run.decode("ascii") for run in runs)
    if scrub_text(text) != text:
        raise RefusedCall(
            "this part of the artifact holds what looks like a credential (a key's shape or a "
            "secret-named assignment); proctor never returns it",
            code="artifact_secret",
            details={"ref": ref},
        )


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ref = args["ref"]
    encoding = args.get("encoding", "base64")
    offset = int(args.get("offset", 0))
    length = int(args.get("length", DEFAULT_PAGE_BYTES))
    from proctor.runtime.boundary.sanitize import TaintSet

    found = ctx.extras.get(TAINT_EXTRA)
    taint = found if isinstance(found, TaintSet) else None
    margin = _margin(taint)
    start = max(0, offset - margin)
    window = artifact_store(ctx).read(
        ref,
        run_id=ctx.run_id,
        offset=start,
        length=offset - start + length + margin,
        ceiling=MAX_PAGE_BYTES + 2 * margin,
    )
    _refuse_secrets(window.data, ref, taint)
    cut = offset - start
    page = Page(window.data[cut : cut + length], offset, window.size, window.digest,
                window.media_type)  # fmt: skip
    data = page.data
    if encoding == "utf-8":
        data = _utf8_page(data, page.eof, ref)
        text = data.decode("utf-8")
    else:
        text = base64.b64encode(data).decode("ascii")
    next_offset = page.offset + len(data)
    return {
        "schema": PAGE_SCHEMA,
        "ref": ref,
        "digest": page.digest,
        "size": page.size,
        "media_type": page.media_type,
        "offset": page.offset,
        "length": len(data),
        "next_offset": next_offset,
        "eof": next_offset >= page.size,
        "encoding": encoding,
        "data": text,
        "range_digest": digest_of(data),
    }


ARTIFACT_READ = Tool(
    name="artifact.read",
    description="Read one page (at most 4 MiB) of an artifact this run admitted, with the "
    "page's range_digest, the artifact's digest and next_offset.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["ref"],
        "properties": {
            "ref": {"type": "string", "pattern": REF_PATTERN},
            "offset": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
            "length": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_BYTES},
            "encoding": {"enum": ["base64", "utf-8"]},
        },
    },
    effect="read",
    handler=os_errors_refused(_read),
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": [
            "schema",
            "ref",
            "digest",
            "size",
            "offset",
            "length",
            "next_offset",
            "eof",
            "encoding",
            "data",
            "range_digest",
        ],
        "properties": {
            "schema": {"const": PAGE_SCHEMA},
            "ref": {"type": "string"},
            "digest": {"type": "string", "pattern": DIGEST_PATTERN},
            "size": {"type": "integer", "minimum": 0},
            "media_type": {"type": "string"},
            "offset": {"type": "integer", "minimum": 0},
            "length": {"type": "integer", "minimum": 0},
            "next_offset": {"type": "integer", "minimum": 0},
            "eof": {"type": "boolean"},
            "encoding": {"enum": ["base64", "utf-8"]},
            "data": {"type": "string"},
            "range_digest": {"type": "string", "pattern": DIGEST_PATTERN},
        },
    },
)


def _store(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.receipts.canonical import canonical

    return artifact_store(ctx).put_bytes(
        canonical(args["value"]),
        run_id=ctx.run_id,
        media_type=args.get("media_type", "application/json"),
        source="json",
    )


ARTIFACT_STORE = Tool(
    name="artifact.store",
    description="Keep a JSON value's canonical JSON as an artifact of the run; returns its "
    "proctor.artifact.v1 descriptor.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["value"],
        "properties": {"value": {}, "media_type": _MEDIA_SCHEMA},
    },
    effect="read",
    handler=os_errors_refused(_store),
    output_schema=_DESCRIPTOR_SCHEMA,
)


_LABEL_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$",
}


def _open(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.tools.run_tools import tree_runs

    given = args["artifact"]
    ref = str(given["ref"])
    if given["digest"] != "sha256:" + ref.rsplit(":", 1)[-1]:
        raise RefusedCall(
            "the descriptor's digest is not its reference's", code="artifact_ref_invalid"
        )
    store = artifact_store(ctx)
    holders = [r.run_id for r in tree_runs(ctx.store, ctx.run_id)] or [ctx.run_id]
    holder, claim = store.held_claim(ref, holders=holders, size=int(given["size"]))
    found = ctx.extras.get(TAINT_EXTRA)
    taint = found if isinstance(found, TaintSet) else None
    margin = _margin(taint)
    offset, size = 0, int(claim["size"])
    while offset < size:  # every page artifact.read would return, checked before any is
        start = max(0, offset - margin)
        window = store.read(
            ref,
            run_id=holder,
            offset=start,
            length=offset - start + MAX_PAGE_BYTES + margin,
            ceiling=MAX_PAGE_BYTES + 2 * margin,
        )
        _refuse_secrets(window.data, ref, taint)
        offset += MAX_PAGE_BYTES
    descriptor = store.grant(ref, claim, run_id=ctx.run_id)
    descriptor["label"] = str(args.get("label") or descriptor["source"])
    return descriptor


ARTIFACT_OPEN = Tool(
    name="artifact.open",
    description="Open an artifact another run of this run's tree admitted, from its "
    "proctor.artifact.v1 descriptor: its size and digest are checked against the stored bytes, "
    "then artifact.read pages it here.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["artifact"],
        "properties": {
            "artifact": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ref", "digest", "size"],
                "properties": {
                    "schema": {"enum": [ARTIFACT_SCHEMA, "runx.artifact.v1"]},
                    "ref": {"type": "string", "pattern": REF_PATTERN},
                    "digest": {"type": "string", "pattern": DIGEST_PATTERN},
                    "size": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
                    # the rest of a descriptor as artifact.admit/store/open return it
                    "media_type": {"type": "string", "maxLength": 129},
                    "source": {"type": "string", "maxLength": 4096},
                    "label": {"type": "string", "maxLength": 128},
                },
            },
            "label": _LABEL_SCHEMA,
        },
    },
    effect="read",
    handler=os_errors_refused(_open),
    output_schema={
        **_DESCRIPTOR_SCHEMA,
        "required": [*_DESCRIPTOR_SCHEMA["required"], "label"],
        "properties": {**_DESCRIPTOR_SCHEMA["properties"], "label": {"type": "string"}},
    },
)
