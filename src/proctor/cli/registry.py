"""``proctor registry``: run a registry, publish to one, search it, install from it, trust it.

Client commands name the registry with ``--registry URL`` or ``PROCTOR_REGISTRY_URL``; a
publisher's bearer token is read from ``PROCTOR_REGISTRY_TOKEN`` only (never a flag, so it
stays out of shell history). ``--json`` documents carry a ``schema`` id:
``proctor.registry_search.v1`` (``results``: name, description, tier, latest_version),
``proctor.registry_info.v1`` (``name``, ``versions``, ``manifest``),
``proctor.registry_install.v1`` (name, version, tier, content_digest, folder, status; also
what ``verify`` prints, status ``verified``) and
``proctor.registry_published.v1`` (``status``, ``manifest``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from proctor.cli.paint import inert

if TYPE_CHECKING:
    from proctor.registry.client import RegistryClient

_REGISTRY = click.option("--registry", "registry", default=None, help="The registry's URL.")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
_DIR = click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("registry-data"),
    show_default=True,
    help="The registry's folder (database, blobs, key, audit log).",
)


def _client(registry: str | None, *, token: bool = False) -> RegistryClient:
    from proctor.registry.client import RegistryClient, registry_url

    url = registry_url(registry, os.environ)
    return RegistryClient(url, token=os.environ.get("PROCTOR_REGISTRY_TOKEN") if token else None)


def _root() -> Path:
    from proctor.runtime.boundary.workspace import Workspace

    return Workspace.discover(Path.cwd()).root


@click.group("registry")
def registry() -> None:
    """Run a registry of signed skill packages, or publish, search and install from one.

    \b
    Example:
      proctor registry search summar
    """


@registry.command("serve")
@_DIR
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8470,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on.",
)
def serve(folder: Path, host: str, port: int) -> None:
    """Serve the registry in --dir over HTTP (SQLite index, or PostgreSQL with
    PROCTOR_DATABASE_URL; content-addressed files).

    Example: proctor registry serve --dir ./registry-data --port 8470
    """
    from proctor.cli.extras import require_extra

    require_extra("registry", "proctor registry serve")
    import uvicorn

    from proctor.errors import UsageError
    from proctor.registry.server import create_app
    from proctor.registry.store import RegistryStore
    from proctor.runtime.listen import listen_tcp

    store = RegistryStore(folder, os.environ.get("PROCTOR_DATABASE_URL"))
    click.echo(f"registry key {store.signer.public_key.raw.hex()}", err=True)
    # bound here, so the address printed is the one served (--port 0: a free port)
    try:
        sock = listen_tcp(host, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}",
                         code="registry_bind_failed") from exc  # fmt: skip
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    click.echo(f"registry: http://{shown}:{sock.getsockname()[1]}  (Ctrl-C stops)", err=True)
    # no forwarding headers believed (they are the client's word) and no server banner, as
    # the console and the MCP server serve
    config = uvicorn.Config(
        create_app(store), log_level="warning", proxy_headers=False, server_header=False
    )
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


@registry.command("key")
@_DIR
@_JSON
def key(folder: Path, as_json: bool) -> None:
    """Print the registry's public key (give it to users for `proctor registry trust`).

    Example: proctor registry key --dir ./registry-data
    """
    from proctor.cli.render import dump_json
    from proctor.registry.store import RegistryStore

    public = RegistryStore(folder, os.environ.get("PROCTOR_DATABASE_URL")).signer.public_key
    if as_json:
        dump_json(
            {
                "schema": "proctor.registry.v1",
                "key_id": public.key_id,
                "public_key_hex": public.raw.hex(),
            }
        )
    else:
        click.echo(public.raw.hex())


@registry.command("add-publisher")
@click.argument("namespace")
@click.option(
    "--key", "key_text", required=True, help="The publisher's public key (hex, PEM or file)."
)
@click.option(
    "--tier",
    type=click.Choice(["community", "verified", "first_party"]),
    default="community",
    show_default=True,
    help="The tier the publisher's packages get.",
)
@_DIR
def add_publisher(namespace: str, key_text: str, tier: str, folder: Path) -> None:
    """Let a key publish under NAMESPACE/*; prints the publisher's bearer token once.

    Example: proctor registry add-publisher acme --key acme.pub --tier verified
    """
    from proctor.receipts.signing import parse_public_key
    from proctor.registry.store import RegistryStore

    public = parse_public_key(_key_bytes(key_text))
    store = RegistryStore(folder, os.environ.get("PROCTOR_DATABASE_URL"))
    click.echo(store.add_publisher(namespace, public, tier))


def _key_bytes(text: str) -> bytes:
    path = Path(text)
    if len(text) < 4096 and path.is_file():
        return path.read_bytes()
    return text.encode("utf-8")


@registry.command("trust")
@click.argument("key_text", metavar="KEY")
def trust(key_text: str) -> None:
    """Trust a registry's signing key (hex, PEM or a file holding one).

    Example: proctor registry trust 3b6a27bc...
    """
    from proctor.receipts.signing import parse_public_key
    from proctor.registry.install import trust_registry_key

    public = parse_public_key(_key_bytes(key_text))
    trust_registry_key(public, os.environ)
    click.echo(f"trusted registry key {public.key_id}")


@registry.command("require-tier")
@click.argument("tier", type=click.Choice(["community", "verified", "first_party"]))
def require_tier(tier: str) -> None:
    """Refuse installs into this workspace below TIER.

    Example: proctor registry require-tier verified
    """
    from proctor.registry.install import set_required_tier

    set_required_tier(_root(), tier)
    click.echo(f"this workspace installs {tier} packages or above")


@registry.command("publish")
@click.argument("skill_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--namespace", required=True, help="The namespace to publish under (acme).")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key to sign with (default: the home's signing key).",
)
@_REGISTRY
@_JSON
def publish(
    skill_dir: Path, namespace: str, key_file: Path | None, registry: str | None, as_json: bool
) -> None:
    """Sign SKILL_DIR's package and publish it as NAMESPACE/<name> (token from
    PROCTOR_REGISTRY_TOKEN).

    Example: proctor registry publish skills/summarise --namespace acme --registry URL
    """
    from proctor.cli.render import dump_json
    from proctor.receipts.signing import parse_private_key_pem
    from proctor.runtime.home.keys import load_signer
    from proctor.runtime.packages.manifest import check_name, sign_statement
    from proctor.runtime.packages.package import package_folder

    built = package_folder(skill_dir)
    name = f"{namespace}/{built.name}"
    check_name(name)
    signer = parse_private_key_pem(key_file.read_bytes()) if key_file else load_signer().signer
    with _client(registry, token=True) as client:
        answer = client.publish(
            sign_statement(signer, name, built.version, built.content_digest, built.kind), built
        )
    manifest = answer.get("manifest", {})
    if (
        manifest.get("content_digest") != built.content_digest
        or manifest.get("name") != name
        or manifest.get("kind", "skill") != built.kind
    ):
        from proctor.runtime.packages.manifest import RegistryRefused

        raise RegistryRefused(
            "the registry recorded another name or digest than the package sent",
            code="publish_mismatch",
        )
    if as_json:
        dump_json(answer)
    else:
        click.echo(f"{answer.get('status')} {name}@{built.version} ({manifest.get('tier')})")


@registry.command("search")
@click.argument("term")
@_REGISTRY
@_JSON
def search(term: str, registry: str | None, as_json: bool) -> None:
    """Search packages by name or description; shows each one's tier.

    Example: proctor registry search summar
    """
    from proctor.cli.render import dump_json

    with _client(registry) as client:
        results = client.search(term)
    if as_json:
        dump_json({"schema": "proctor.registry_search.v1", "results": results})
        return
    for row in results:
        click.echo(
            inert(f"{row['name']}@{row['latest_version']}  [{row['tier']}]  {row['description']}")
        )
    if not results:
        click.echo("no packages match")


@registry.command("info")
@click.argument("ref")
@_REGISTRY
@_JSON
def info(ref: str, registry: str | None, as_json: bool) -> None:
    """Show a package's versions and one version's signed manifest (newest by default).

    Example: proctor registry info acme/summarise@1.2.0
    """
    from proctor.cli.render import dump_json
    from proctor.registry.install import parse_ref

    name, version = parse_ref(ref)
    with _client(registry) as client:
        versions = client.versions(name).get("versions", [])
        manifest = client.version(name, version).get("manifest", {})
    if as_json:
        dump_json(
            {
                "schema": "proctor.registry_info.v1",
                "name": name,
                "versions": versions,
                "manifest": manifest,
            }
        )
        return
    click.echo(inert(f"{name}  [{manifest.get('tier')}]"))
    for row in versions:
        click.echo(inert(f"  {row['version']}  {row['content_digest']}"))


@registry.command("install")
@click.argument("ref")
@click.option("--digest", "pinned", default=None, help="Refuse unless the content digest is this.")
@_REGISTRY
@_JSON
def install(ref: str, pinned: str | None, registry: str | None, as_json: bool) -> None:
    """Verify and install NAME[@VERSION] into .proctor/added-skills/ (a connector package into
    .proctor/added-connectors/).

    Example: proctor registry install acme/summarise@1.2.0 --digest sha256:...
    """
    from proctor.cli.render import dump_json
    from proctor.registry.install import install as run_install
    from proctor.registry.install import trusted_registry_keys

    root = _root()
    with _client(registry) as client:
        done = run_install(
            client,
            ref,
            workspace_root=root,
            trusted=trusted_registry_keys(os.environ),
            pinned_digest=pinned,
        )
    if as_json:
        dump_json({"schema": "proctor.registry_install.v1", **done.to_dict(root)})
    else:
        click.echo(
            f"{done.status} {done.name}@{done.version} [{done.tier}] into "
            f"{done.to_dict(root)['folder']}"
        )


@registry.command("verify")
@click.argument("ref", required=False)
@_JSON
def verify(ref: str | None, as_json: bool) -> None:
    """Check an installed NAME[@VERSION] still matches its signature, byte for byte, and the
    workspace's required tier (offline); without NAME, every installed package, exiting 1 when
    any no longer qualifies.

    Example: proctor registry verify acme/summarise@1.2.0
    """
    from proctor.cli.render import dump_json
    from proctor.errors import ProctorError
    from proctor.registry.install import resolve_installed, trusted_registry_keys
    from proctor.runtime.packages.installed import installed_refs

    root = _root()
    trusted = trusted_registry_keys(os.environ)
    if ref is not None:
        try:
            found = resolve_installed(ref, workspace_root=root, trusted=trusted)
        except ProctorError as exc:
            if exc.code != "package_not_installed":
                raise
            found = resolve_installed(ref, workspace_root=root, trusted=trusted, kind="connector")
        if as_json:
            dump_json({"schema": "proctor.registry_install.v1", **found.to_dict(root)})
        else:
            click.echo(
                f"verified {found.name}@{found.version} [{found.tier}] {found.content_digest}"
            )
        return
    results: list[dict[str, object]] = []
    for kind in ("skill", "connector"):
        for each in installed_refs(root, kind):
            try:
                held = resolve_installed(each, workspace_root=root, trusted=trusted, kind=kind)
            except ProctorError as exc:
                results.append({"ref": each, "kind": kind, "status": "refused",
                                "code": exc.code, "message": exc.message})  # fmt: skip
            else:
                results.append({"ref": each, "kind": kind, "status": "verified",
                                "tier": held.tier,
                                "content_digest": held.content_digest})  # fmt: skip
    failed = [r for r in results if r["status"] != "verified"]
    if as_json:
        dump_json({"schema": "proctor.registry_verify.v1", "packages": results,
                   "passed": not failed})  # fmt: skip
    else:
        from proctor.cli.paint import inert

        for r in results:
            if r["status"] == "verified":
                click.echo(f"verified {r['ref']} [{r['tier']}]")
            else:
                click.echo(inert(f"REFUSED  {r['ref']}: [{r['code']}] {r['message']}"))
        if not results:
            click.echo("no package is installed in this workspace")
    if failed:
        sys.exit(1)
