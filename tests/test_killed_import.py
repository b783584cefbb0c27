"""An import killed with SIGKILL leaves no process behind and the database as it was.

The import runs as `flask import --workers 2` in a process of its own; on PostgreSQL it
starts two worker processes and the multiprocessing resource tracker. Once they are all
there, the import is killed, and within a few seconds none of them may be left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import COMMUNITY, insert_records, table_rows

ROOT = Path(__file__).resolve().parents[1]
COMMENTS = 60_000  # six chunks of interchange.CHUNK_LINES: the workers are used


def live_processes() -> dict[int, int]:
    """pid -> parent pid of every process that is not a zombie, read from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]  # after the command's name
        if state not in "ZX":
            found[int(entry)] = int(ppid)
    return found


def descendants(pid: int) -> set[int]:
    processes = live_processes()
    below, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, ppid in processes.items():
            if ppid == parent and child not in below:
                below.add(child)
                todo.append(child)
    return below


def big_file(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "user", "id": 500, "username": "bulk", "avatar": None})
                  + "\n")
        for n in range(COMMENTS):
            out.write(json.dumps({
                "type": "comment", "id": 10_000 + n, "content_type": "comics.comicpage",
                "object_id": 10, "parent_id": None, "author_id": 500,
                "body": f"Comment number {n}", "date_added": "2024-02-01T10:00:00Z",
                "is_deleted": False, "is_anonymous": False, "is_read": False}) + "\n")
    return path


def test_a_killed_import_leaves_no_process_and_no_data(app, database_url, tmp_path):
    insert_records(app, COMMUNITY)
    before = table_rows(app)
    path = big_file(tmp_path / "big.ndjson")
    env = {**os.environ, "DATABASE_URL": database_url}
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr:
        importer = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "app", "import", "--workers", "2",
             str(path)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        # PostgreSQL: wait for both workers and the resource tracker. SQLite checks lines in
        # the importing process itself: give it a moment to be well into the file.
        expected = 3 if database_url.startswith("postgresql") else 0
        deadline = time.monotonic() + 60
        seen: set[int] = set()
        while time.monotonic() < deadline and importer.poll() is None:
            seen |= descendants(importer.pid)
            if len(seen) >= expected and (expected or time.monotonic() > deadline - 59):
                break
            time.sleep(0.05)
        assert importer.poll() is None, errors.read_text()
        assert len(seen) >= expected, seen
        importer.send_signal(signal.SIGKILL)
        importer.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and seen & set(live_processes()):
            time.sleep(0.05)
        assert not seen & set(live_processes()), "processes left behind"
    finally:
        if importer.poll() is None:
            importer.kill()
            importer.wait()
    # The server ends the killed import's transaction once it finds its client gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and table_rows(app) != before:
        time.sleep(0.1)
    assert table_rows(app) == before
