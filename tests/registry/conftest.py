"""A real registry on a loopback port (uvicorn in a thread) and a skill folder to publish."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from proctor.receipts.signing import Signer, signer_from_seed
from proctor.registry.client import RegistryClient
from proctor.registry.server import create_app
from proctor.registry.store import RegistryStore


@dataclass
class Registry:
    """A running registry: its folder, store, URL and one publisher per tier."""

    folder: Path
    store: RegistryStore
    url: str
    acme: Signer
    acme_token: str
    hobby: Signer
    hobby_token: str

    def client(self, token: str | None = None) -> RegistryClient:
        return RegistryClient(self.url, token=token)


def write_skill(folder: Path, name: str = "summarise", version: str | None = "1.0.0") -> Path:
    """A small skill package folder."""
    folder.mkdir(parents=True, exist_ok=True)
    front = f"name: {name}\ndescription: Summarise a text file in three lines.\n"
    if version is not None:
        front += f"version: {version}\n"
    (folder / "SKILL.md").write_text(f"---\n{front}---\nRead the file and summarise it.\n")
    (folder / "prompts").mkdir(exist_ok=True)
    (folder / "prompts" / "style.txt").write_text("plain words\n")
    return folder


@contextmanager
def serve(store: RegistryStore) -> Iterator[str]:
    """Serve ``store`` on a loopback port; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # uvicorn's own sockets answer without Nagle's delay; one handed to it must be told to
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # listening before the server starts: early requests wait in the backlog
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def make_registry(folder: Path, url: str, store: RegistryStore) -> Registry:
    """Two publishers: acme (verified) and hobby (community)."""
    acme = signer_from_seed(b"a" * 32)
    hobby = signer_from_seed(b"h" * 32)
    acme_token = store.add_publisher("acme", acme.public_key, "verified")
    hobby_token = store.add_publisher("hobby", hobby.public_key, "community")
    return Registry(folder, store, url, acme, acme_token, hobby, hobby_token)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    folder = tmp_path / "registry-data"
    store = RegistryStore(folder)
    try:
        with serve(store) as url:
            yield make_registry(folder, url, store)
    finally:
        store.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("PROCTOR_HOME", str(folder))
    return folder
