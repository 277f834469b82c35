"""The registry's HTTP API (starlette): public reads, bearer-token publishes.

Routes (the OpenAPI document at ``/v1/openapi.json`` describes each):

* ``GET /v1/registry`` the registry's public key (hex) and key id
* ``GET /v1/search?q=TERM`` packages by name or description, with tier and latest version
* ``GET /v1/packages/{publisher}/{name}`` every version
* ``GET /v1/packages/{publisher}/{name}/{version}`` (``latest`` for the newest) the signed
  manifest and each file's digest
* ``GET /v1/packages/{publisher}/{name}/{version}/archive`` the files, base64 in JSON
* ``POST /v1/packages`` (``Authorization: Bearer <token>``) publish a signed package

A publish is refused, with nothing stored, unless the token is known, the statement is signed
by a key registered for the name's namespace under that token, and the statement names
exactly the uploaded package (name, version, content digest). Bodies over the size limit are
refused before they are read whole. Every publish and refused publish is audited.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from proctor.contracts import json_strict
from proctor.errors import ParseError, ProctorError
from proctor.receipts.canonical import canonical
from proctor.receipts.signing import PublicKey
from proctor.registry.store import RegistryStore
from proctor.runtime.packages.manifest import RegistryRefused, check_name, countersign, statement
from proctor.runtime.packages.package import MAX_TRANSFER_BYTES, parse_files

__all__ = ["MAX_BODY_BYTES", "create_app", "openapi_document"]

MAX_BODY_BYTES = MAX_TRANSFER_BYTES


def _error(status: int, exc: ProctorError) -> JSONResponse:
    return JSONResponse({"schema": "proctor.error.v1", "error": exc.to_dict()}, status_code=status)


def _status(exc: ProctorError) -> int:
    return {
        "unauthorized": 401,
        "namespace_forbidden": 403,
        "version_exists": 409,
        "kind_mismatch": 409,
        "body_too_large": 413,
        "not_found": 404,
    }.get(exc.code, 400)


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise RegistryRefused(
            f"the request body is over {MAX_BODY_BYTES} bytes", code="body_too_large"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RegistryRefused(
                f"the request body is over {MAX_BODY_BYTES} bytes", code="body_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _decode_files(raw: Any) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        raise RegistryRefused("files must be an object of name -> base64", code="request_invalid")
    files: dict[str, bytes] = {}
    for rel, text in raw.items():
        if not isinstance(text, str):
            raise RegistryRefused(f"file {str(rel)[:80]!r} is not base64", code="request_invalid")
        try:
            files[rel] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RegistryRefused(
                f"file {str(rel)[:80]!r} is not base64", code="request_invalid"
            ) from exc
    return files


def _publish(store: RegistryStore, token: str | None, body: bytes) -> tuple[int, dict[str, Any]]:
    if not token:
        raise RegistryRefused("publishing needs a bearer token", code="unauthorized")
    publishers = store.publishers_for_token(token)
    if not publishers:
        raise RegistryRefused("the bearer token is not a publisher's", code="unauthorized")
    try:
        # strict: a key given twice would be read one way here and perhaps another elsewhere
        doc = json_strict.loads(body, source="the body")
    except ParseError as exc:
        raise RegistryRefused(exc.message, code="request_invalid") from exc
    if not isinstance(doc, dict) or set(doc) != {"statement", "files"}:
        raise RegistryRefused(
            "the body is an object with exactly statement and files", code="request_invalid"
        )
    said = doc["statement"]
    fields = {"schema", "name", "version", "content_digest", "publisher_key", "signature"}
    if not isinstance(said, dict) or set(said) - {"kind"} != fields:
        raise RegistryRefused(
            f"the statement has exactly the fields {', '.join(sorted(fields))}",
            code="request_invalid",
        )
    if not all(isinstance(value, str) for value in said.values()):
        raise RegistryRefused("every statement field is text", code="request_invalid")
    namespace, _ = check_name(said["name"])
    owner = next(
        (p for p in publishers if p.namespace == namespace and p.key_hex == said["publisher_key"]),
        None,
    )
    if owner is None:
        raise RegistryRefused(
            f"the statement's key is not a key of the namespace {namespace!r} under this token",
            code="namespace_forbidden",
        )
    kind = said.get("kind", "skill")
    package = parse_files(_decode_files(doc["files"]), label=said["name"])
    if (said["name"].split("/")[1], said["version"], said["content_digest"], kind) != (
        package.name,
        package.version,
        package.content_digest,
        package.kind,
    ):
        raise RegistryRefused(
            "the statement does not name the uploaded package (it is the "
            f"{package.kind} {namespace}/{package.name}, {package.version}, "
            f"{package.content_digest})",
            code="statement_mismatch",
        )
    key = PublicKey.from_raw(bytes.fromhex(owner.key_hex))
    body_said = statement(
        said["name"], said["version"], said["content_digest"], owner.key_hex, kind
    )
    try:
        signature = base64.b64decode(said["signature"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RegistryRefused(
            "the statement's signature is not base64", code="request_invalid"
        ) from exc
    if said["schema"] != body_said["schema"] or not key.verify(signature, canonical(body_said)):
        raise RegistryRefused(
            "the statement's signature does not verify under its publisher key",
            code="signature_invalid",
        )
    manifest = countersign(store.signer, said, namespace=namespace, tier=owner.tier)
    created = store.put_version(said["name"], package, manifest, actor=key.key_id)
    return (201 if created else 200), {
        "schema": "proctor.registry_published.v1",
        "status": "published" if created else "unchanged",
        "manifest": manifest,
    }


def create_app(store: RegistryStore) -> Starlette:
    """The registry's ASGI application over ``store``."""

    async def registry_info(request: Request) -> Response:
        key = store.signer.public_key
        return JSONResponse(
            {"schema": "proctor.registry.v1", "key_id": key.key_id, "public_key_hex": key.raw.hex()}
        )

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def search(request: Request) -> Response:
        term = request.query_params.get("q", "")[:200]
        return JSONResponse({"schema": "proctor.registry_search.v1", "results": store.search(term)})

    def _name(request: Request) -> str:
        name = f"{request.path_params['publisher']}/{request.path_params['name']}"
        check_name(name)
        return name

    async def versions(request: Request) -> Response:
        try:
            name = _name(request)
        except ProctorError as exc:
            return _error(400, exc)
        found = store.versions(name)
        if not found:
            return _error(404, RegistryRefused(f"no package {name}", code="not_found"))
        return JSONResponse(
            {"schema": "proctor.registry_versions.v1", "name": name, "versions": found}
        )

    def _version(request: Request) -> tuple[str, dict[str, Any]]:
        name = _name(request)
        wanted = request.path_params["version"]
        found = store.version(name, None if wanted == "latest" else wanted)
        if found is None:
            raise RegistryRefused(f"no version {wanted[:64]!r} of {name}", code="not_found")
        return name, found

    async def version(request: Request) -> Response:
        try:
            name, found = _version(request)
        except ProctorError as exc:
            return _error(_status(exc), exc)
        return JSONResponse({"schema": "proctor.registry_version.v1", "name": name, **found})

    async def archive(request: Request) -> Response:
        try:
            name, found = _version(request)
        except ProctorError as exc:
            return _error(_status(exc), exc)
        files: dict[str, str] = {}
        for rel, file_digest in found["files"].items():
            data = store.blob(file_digest)
            if data is None:
                err = RegistryRefused(f"{name}: a file's bytes are missing", code="blob_missing")
                return _error(500, err)
            files[rel] = base64.b64encode(data).decode("ascii")
        return JSONResponse({"schema": "proctor.registry_archive.v1", "files": files})

    async def publish(request: Request) -> Response:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        try:
            body = await _read_body(request)
            status, doc = await run_in_threadpool(_publish, store, token, body)
        except ProctorError as exc:
            await run_in_threadpool(store.audit, "publish_refused", None, {"code": exc.code})
            return _error(_status(exc), exc)
        return JSONResponse(doc, status_code=status)

    return Starlette(
        routes=[
            Route("/v1/registry", registry_info),
            Route("/v1/openapi.json", openapi),
            Route("/v1/search", search),
            Route("/v1/packages", publish, methods=["POST"]),
            Route("/v1/packages/{publisher}/{name}", versions),
            Route("/v1/packages/{publisher}/{name}/{version}", version),
            Route("/v1/packages/{publisher}/{name}/{version}/archive", archive),
        ]
    )


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API (shipped as ``resources/registry/openapi.json``; a test
    holds ``docs/registry-openapi.json`` equal to it)."""
    from importlib.resources import files

    text = files("proctor").joinpath("resources", "registry", "openapi.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
