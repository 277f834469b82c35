"""Registry figures: install time of a 1 MiB package from a loopback registry, what a run pays
to load it by name (signature and bytes re-verified) and to load a core skill, and search
latency over HTTP with 10,000 packages in the index.

Run: ``.venv/bin/python bench/registry.py [--rounds N]``. The install is the whole client path
(fetch and verify the manifest, download, check the content digest, stage, re-read, rename)
into a fresh workspace each round. The 10,000 search rows are written straight into the
registry's index (publishing each through HTTP would only time the setup); search reads that
index exactly as it reads published rows.
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

from _timing import measure
from proctor.receipts.signing import signer_from_seed
from proctor.registry.client import RegistryClient
from proctor.registry.install import install, trust_registry_key
from proctor.registry.server import create_app
from proctor.registry.store import RegistryStore
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import package_folder
from proctor.runtime.packages.resolve import resolve_skill


def _serve(store: RegistryStore) -> tuple[str, uvicorn.Server, threading.Thread, socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # uvicorn's own sockets answer without Nagle's delay; one handed to it must be told to
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread, sock


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="proctor-bench-registry-"))
    try:
        store = RegistryStore(base / "registry")
        publisher = signer_from_seed(b"b" * 32)
        token = store.add_publisher("bench", publisher.public_key, "verified")
        skill = base / "big"
        skill.mkdir()
        (skill / "SKILL.md").write_text("---\nname: big\ndescription: A 1 MiB package.\n---\nx\n")
        (skill / "data.bin").write_bytes(random.Random(7).randbytes(1024 * 1024))
        built = package_folder(skill)
        url, server, thread, sock = _serve(store)
        with RegistryClient(url, token=token) as client:
            said = sign_statement(publisher, "bench/big", built.version, built.content_digest)
            client.publish(said, built)
            trusted = [store.signer.public_key]
            count = iter(range(10**9))

            def one_install() -> None:
                root = base / f"ws{next(count)}"
                (root / ".proctor").mkdir(parents=True)
                install(client, "bench/big", workspace_root=root, trusted=trusted)
                shutil.rmtree(root)

            print(f"package: {built.size} bytes, {len(built.files)} files")
            measure("install 1 MiB package (loopback)", one_install, args.rounds, warm=2)

            # What a run pays to name it: the signature and every byte verified on each load
            held = base / "held"
            (held / ".proctor").mkdir(parents=True)
            install(client, "bench/big", workspace_root=held, trusted=trusted)
            home = base / "home"
            trust_registry_key(store.signer.public_key, {"PROCTOR_HOME": str(home)})
            env = {"PROCTOR_HOME": str(home)}
            ref = f"bench/big@{built.version}"
            measure(
                "resolve installed 1 MiB package for a run",
                lambda: resolve_skill(ref, cwd=held, workspace_root=held, environ=env),
                args.rounds * 5,
                warm=2,
            )
            measure(
                "resolve core skill proctor/receipt-audit",
                lambda: resolve_skill(
                    "proctor/receipt-audit", cwd=held, workspace_root=held, environ=env
                ),
                args.rounds * 5,
                warm=2,
            )

            db = sqlite3.connect(base / "registry" / "registry.db")
            now = time.time()
            with db:
                db.executemany(
                    "INSERT INTO registry_packages VALUES (?, ?, ?, ?, ?)",
                    (
                        (
                            f"pub{i % 97}/skill-{i}",
                            f"Skill number {i} for topic {i % 313}",
                            "community",
                            "1.0.0",
                            now,
                        )
                        for i in range(10_000)
                    ),
                )
            db.close()
            measure(
                "search 10,000 packages: rare term",
                lambda: client.search("skill-9876"),
                args.rounds * 10,
                warm=5,
            )
            measure(
                "search 10,000 packages: 50 of many",
                lambda: client.search("topic 12"),
                args.rounds * 10,
                warm=5,
            )
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
