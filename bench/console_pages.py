"""The console's list pages at scale: ``GET /pending`` with 10 and with 10,000 open requests
(and ``GET /runs`` beside it), each served by the real console under uvicorn on loopback.

    .venv/bin/python bench/console_pages.py [--rounds 60] [--open 10000]

Each workspace holds one real run paused on the approval of an ``fs.write`` (driven by the
engine), and copies of it made through the run store's own methods (``create_run``,
``put_request``, ``update_run``), so every open request renders as the real one does. A
signed-in keep-alive httpx client times each page. Prints median/p95 per page and the ratio
of the large workspace to the small one (the yardstick: within 1.5x).
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import uvicorn

from proctor.console.app import ConsoleConfig, build_app
from proctor.console.serve import bind_socket
from proctor.console.users import UserBook
from proctor.core.authority import parse_authority

SKILL = "---\nname: pages\ndescription: Write a page once a person approves.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  write:
    description: Write the page.
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: page.txt}
      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: $input.text, expected_digest: $steps.read.content_digest}
"""


def workspace(folder: Path, open_requests: int, environ: dict[str, str]) -> Path:
    """A workspace with ``open_requests`` runs paused on an approval."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.runs import RequestRecord, RunRecord

    root = folder / f"ws-{open_requests}"
    (root / ".proctor").mkdir(parents=True)
    pkg = root / "skills" / "pages"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SKILL)
    (pkg / "run.yaml").write_text(RUN_YAML)
    (root / "page.txt").write_text("old line\n" * 20)
    session = Session(Workspace.discover(root), environ=environ)
    try:
        env = session.run(
            f"{pkg}#write",
            inputs={"text": "new line\n" * 20},
            authority=parse_authority({"effects": "ask"}),
        )
        assert env.to_json()["status"] == "needs_approval"
        store = session.store
        [run] = store.list_runs(limit=1)
        [request] = store.requests(run.run_id)
        with store.transaction():
            for n in range(open_requests - 1):
                copy = f"{run.run_id[:-8]}{n:08d}"
                store.create_run(RunRecord(run_id=copy, skill=run.skill, method=run.method))
                store.put_request(
                    RequestRecord(
                        copy, request.address, request.kind, request.request_digest, request.body
                    )
                )
                store.update_run(copy, status=run.status, data=run.data)
    finally:
        session.close()
    return root


@contextmanager
def console(root: Path, home: Path, environ: dict[str, str]) -> Iterator[str]:
    config = ConsoleConfig(root=root, home=home, environ=environ)
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(build_app(config), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the console did not start")
        thread.join(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def signed_in(client: httpx.Client, token: str) -> None:
    form = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None
    client.post("/login", data={"csrf": csrf.group(1), "token": token})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--open", type=int, default=10_000)
    args = parser.parse_args()
    sizes = (10, args.open)
    with tempfile.TemporaryDirectory(prefix="proctor-bench-console-") as tmp, ExitStack() as up:
        folder = Path(tmp)
        home = folder / "home"
        environ = {"PROCTOR_HOME": str(home)}
        token = UserBook(home).add("alice")
        clients = {}
        for count in sizes:
            url = up.enter_context(console(workspace(folder, count, environ), home, environ))
            clients[count] = up.enter_context(httpx.Client(base_url=url))
            signed_in(clients[count], token)
        for path in ("/pending", "/runs"):
            times: dict[int, list[float]] = {count: [] for count in sizes}
            for n in range(args.rounds + 5):  # the two consoles in turn: load drifts alike
                for count in sizes:
                    start = time.perf_counter()
                    response = clients[count].get(path)
                    spent = (time.perf_counter() - start) * 1000
                    assert response.status_code == 200
                    if n >= 5:
                        times[count].append(spent)
            medians = {}
            for count in sizes:
                ordered = sorted(times[count])
                medians[count] = statistics.median(ordered)
                p95 = ordered[int(len(ordered) * 0.95)]
                shown = clients[count].get(path).text.count('<section class="request"')
                print(
                    f"GET {path:<9} {count:>6,} open ({shown} requests on the page)"
                    f"  median {medians[count]:7.2f} ms  p95 {p95:7.2f} ms"
                )
            ratio = medians[args.open] / medians[10]
            print(f"GET {path}: {args.open:,} open / 10 open = {ratio:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
