"""Large receipt batches: a whole run's tree is written in one batch, within any fd limit.

A batch must never hold more files open than a common descriptor limit allows (a
30,000-call run's seal used to fail with "Too many open files" when every file of the batch
was held open until all were fsynced). The child process lowers its own limit, so the test
process keeps its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proctor.runtime.records.receipts import INDEX_NAME, ReceiptStore

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import hashlib, resource, sys
from pathlib import Path
from proctor.runtime.records.receipts import ReceiptStore

resource.setrlimit(resource.RLIMIT_NOFILE, (400, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
items = []
for i in range(1500):
    data = b'{"n":%d}\\n' % i
    items.append(("sha256:" + hashlib.sha256(data).hexdigest(), data, "call", "completed"))
ReceiptStore(Path(sys.argv[1])).put_many(items)
"""


def test_a_batch_larger_than_the_fd_limit_is_written_whole(tmp_path: Path) -> None:
    folder = tmp_path / "receipts"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)],
        env={"PYTHONPATH": str(REPO / "src")},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = ReceiptStore(folder)
    lines = list(store.index())
    assert len(lines) == 1500
    for line in lines[::149]:
        data = store.get(line["receipt_id"])
        assert data is not None and json.loads(data)["n"] >= 0
    # one pack for the batch, whatever its size; no temporary file left behind
    assert sorted(p.name for p in folder.iterdir()) == [INDEX_NAME, "packs"]
    assert len(list((folder / "packs").iterdir())) == 1
