"""The HTTP client of a registry (httpx): what ``proctor registry`` and install send.

The registry is named by ``--registry URL`` or ``PROCTOR_REGISTRY_URL``; there is no default
registry, so nothing is ever sent to a host the user did not name. Responses are read up to a
size limit; an error response becomes a :class:`RegistryRefused` with the registry's code.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from proctor.contracts import json_strict
from proctor.errors import ParseError, UsageError
from proctor.runtime.packages.manifest import RegistryRefused, check_name
from proctor.runtime.packages.package import MAX_TRANSFER_BYTES, Package, check_version

__all__ = ["RegistryClient", "registry_url"]


def registry_url(option: str | None, environ: Mapping[str, str]) -> str:
    """The registry's base URL from the option, else ``PROCTOR_REGISTRY_URL``.

    Raises:
        UsageError: (code ``registry_url_missing``) neither names one, or it is not http(s).
    """
    url = option or environ.get("PROCTOR_REGISTRY_URL") or ""
    if not url.startswith(("http://", "https://")):
        raise UsageError(
            "name the registry with --registry URL or PROCTOR_REGISTRY_URL (an http:// or "
            "https:// address)",
            code="registry_url_missing",
        )
    return url.rstrip("/")


class RegistryClient:
    """Calls one registry; ``token`` is the publisher's bearer token (publishing only)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url, transport=transport, timeout=timeout, follow_redirects=False
        )
        self._token = token

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            with self._http.stream(method, path, **kwargs) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_TRANSFER_BYTES:
                        raise RegistryRefused(
                            "the registry's answer is over the size limit", code="answer_too_large"
                        )
                    chunks.append(chunk)
                status = response.status_code
        except httpx.HTTPError as exc:
            raise RegistryRefused(
                f"the registry could not be reached ({type(exc).__name__})",
                code="registry_unreachable",
            ) from exc
        try:
            # strict: an answer that repeats a key is refused, never taken one way
            doc = json_strict.loads(b"".join(chunks), source="the registry's answer")
        except ParseError as exc:
            raise RegistryRefused(
                f"the registry answered {status} with a body that is not strict JSON ({exc.code})",
                code="registry_answer_invalid",
            ) from exc
        if not isinstance(doc, dict):
            raise RegistryRefused(
                "the registry's answer is not an object", code="registry_answer_invalid"
            )
        if status >= 400:
            err = doc.get("error")
            if isinstance(err, dict) and isinstance(err.get("code"), str):
                raise RegistryRefused(
                    f"the registry refused: {str(err.get('message'))[:500]}", code=err["code"]
                )
            raise RegistryRefused(f"the registry answered {status}", code="registry_error")
        return doc

    def registry_key(self) -> dict[str, Any]:
        """The registry's ``proctor.registry.v1`` document (its public key)."""
        return self._call("GET", "/v1/registry")

    def search(self, term: str) -> list[dict[str, Any]]:
        """Search results: name, description, tier, latest version."""
        results = self._call("GET", "/v1/search", params={"q": term}).get("results")
        if not isinstance(results, list):
            raise RegistryRefused(
                "the search answer has no results", code="registry_answer_invalid"
            )
        return results

    @staticmethod
    def _path(name: str, version: str | None = None) -> str:
        publisher, skill = check_name(name)
        path = f"/v1/packages/{publisher}/{skill}"
        if version is not None:
            path += "/" + quote(check_version(version) if version != "latest" else version, safe="")
        return path

    def versions(self, name: str) -> dict[str, Any]:
        """Every version of ``name``."""
        return self._call("GET", self._path(name))

    def version(self, name: str, version: str | None) -> dict[str, Any]:
        """The manifest and file digests of ``name@version`` (latest when ``None``)."""
        return self._call("GET", self._path(name, version or "latest"))

    def archive(self, name: str, version: str) -> dict[str, bytes]:
        """The files of ``name@version``, decoded (not yet checked).

        Raises:
            RegistryRefused: (code ``registry_answer_invalid``) the answer is malformed.
        """
        files = self._call("GET", self._path(name, version) + "/archive").get("files")
        if not isinstance(files, dict):
            raise RegistryRefused("the archive has no files", code="registry_answer_invalid")
        out: dict[str, bytes] = {}
        for rel, text in files.items():
            try:
                out[rel] = base64.b64decode(text, validate=True)
            except (ValueError, TypeError) as exc:
                raise RegistryRefused(
                    "an archive file is not base64", code="registry_answer_invalid"
                ) from exc
        return out

    def publish(self, signed_statement: Mapping[str, str], package: Package) -> dict[str, Any]:
        """Send a signed package; the registry's ``proctor.registry_published.v1`` answer.

        Raises:
            UsageError: (code ``registry_token_missing``) no bearer token.
            RegistryRefused: the registry refused it (its code).
        """
        if not self._token:
            raise UsageError(
                "publishing needs the publisher's token in PROCTOR_REGISTRY_TOKEN",
                code="registry_token_missing",
            )
        body = {
            "statement": dict(signed_statement),
            "files": {
                rel: base64.b64encode(data).decode("ascii") for rel, data in package.files.items()
            },
        }
        return self._call(
            "POST",
            "/v1/packages",
            content=json.dumps(body).encode("utf-8"),
            headers={"authorization": f"Bearer {self._token}", "content-type": "application/json"},
        )
