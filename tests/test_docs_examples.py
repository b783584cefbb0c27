"""Every shell example of the README runs as written on a fresh clone after `make run`.

The README's ```sh blocks run in order in one bash (so a variable set in one block serves
the next, as in a reader's terminal), with `set -e`: every command must succeed. A
command whose comment starts with a status (`# 401 {"detail": ...}`) must get that status
and, when the comment shows a JSON body, exactly that body. Blocks that must not run
(servers, installs, the suite itself) carry `<!-- docs-test: skip (why) -->` on the line
before. The server is `make run` itself, in a folder laid out as a fresh clone (the
checkout's files, its own `instance/`), on a free port, given to the examples as `PORT`
(as a reader who chose one sets it) and in place of any 8000 they spell out.
A command written anywhere else in the docs (an indented block, another fence) fails the
test, so no example escapes it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!-- docs-test: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.M | re.S)
COMMANDS = {"curl", "make", "pip", "flask", "commentsvc", "gunicorn", "export", "python",
            "python3", ".venv/bin/flask", ".venv/bin/python", ".venv/bin/pip"}
EXPECTED = re.compile(r"#\s*(\d{3})\b:?\s*(.*)$")


@dataclass
class Command:
    text: str
    status: int | None = None
    body: object = None


def sh_blocks(text: str) -> list[tuple[str, str | None]]:
    """(code, reason to skip or None) of each ```sh block, in order."""
    found = []
    for match in FENCE.finditer(text):
        if match[1] != "sh":
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.fullmatch(before.strip())
        found.append((match[2], skip[1] if skip else None))
    return found


def commands(code: str) -> list[Command]:
    """The block's commands, continuation lines joined, each with the answer its comment
    shows (a comment alone on the next line belongs to the command above it)."""
    found: list[Command] = []
    pending = ""
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#") and not pending:
            if found and (m := EXPECTED.match(stripped)):
                found[-1].status, found[-1].body = expectation(m)
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = pending + line
        pending = ""
        command = Command(full)
        code_part, hash_, comment = full.partition("  #")
        if hash_ and (m := EXPECTED.match("#" + comment.strip())):
            command.status, command.body = expectation(m)
        found.append(command)
    return found


def expectation(match: re.Match) -> tuple[int, object]:
    rest = match[2].strip()
    body = None
    if rest.startswith("{"):
        body = json.loads(rest[:rest.rindex("}") + 1])
    return int(match[1]), body


def command_word(line: str) -> str:
    """The program a shell line runs, past VAR=value assignments and a `$ ` prompt."""
    words = line.strip().removeprefix("$ ").split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
        words.pop(0)
    return words[0] if words else ""


def test_no_command_outside_a_sh_block():
    """Indented blocks and other fences hold no commands: each example is a ```sh block."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        fenced = FENCE.sub(lambda m: "" if m[1] == "sh" else m[0], text)
        for line in fenced.splitlines():
            inside = line.startswith("    ") or not line.startswith(("```", "|", "-", "#"))
            if inside and line.startswith("    ") and command_word(line) in COMMANDS:
                pytest.fail(f"{path.name}: a command outside a ```sh block: {line.strip()}")
        for match in FENCE.finditer(text):
            if match[1] != "sh":
                for line in match[2].splitlines():
                    assert command_word(line) not in COMMANDS, (path.name, line)


def test_the_skipped_blocks_are_few_and_say_why():
    skipped = [reason for code, reason in sh_blocks((ROOT / "README.md").read_text()) if reason]
    run = [code for code, reason in sh_blocks((ROOT / "README.md").read_text()) if not reason]
    assert len(run) >= 6
    assert len(skipped) <= 12 and all(reason.strip() for reason in skipped)


def test_the_parser_reads_expected_answers():
    parsed = commands('curl -i -H "$A" \\\n     -d x $B/\n'
                      '                 # 400 {"body": ["No."]}\n'
                      "curl -i $B/          # 401 no credentials\n"
                      "echo hi   # the id\n")
    assert [(c.status, c.body) for c in parsed] == [(400, {"body": ["No."]}), (401, None),
                                                     (None, None)]
    assert parsed[0].text == 'curl -i -H "$A"       -d x $B/'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def fresh_clone(tmp_path) -> Path:
    """A folder laid out as a clone after `make install`: the checkout's tracked files
    (linked), the environment running this test as `.venv`, and no instance folder."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    top = {Path(name).parts[0] for name in listed.stdout.splitlines()}
    for name in top:
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    return tmp_path


@pytest.fixture
def make_run(fresh_clone):
    """`make run` on a free port (installing nothing: the environment is this one)."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("COMMENTSVC_", "FLASK_")) and k != "DATABASE_URL"}
    log = fresh_clone / "make-run.log"
    with log.open("wb") as out:
        server = subprocess.Popen(["make", "--no-print-directory", "-o", ".venv/bin/.installed",
                                   "run", f"PORT={port}"], cwd=fresh_clone, env=environ,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("make run did not serve:\n" + log.read_text())
                time.sleep(0.3)
        yield fresh_clone, port, environ, log
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def script(blocks: list[str], port: int) -> tuple[str, list[Command]]:
    """One bash script of every runnable block, each command between markers."""
    lines = ["set -eo pipefail"]
    every: list[Command] = []
    for code in blocks:
        for command in commands(code):
            lines.append(f"printf '\\n@@ {len(every)}\\n'")
            lines.append(command.text.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
            every.append(command)
    lines.append(f"printf '\\n@@ {len(every)}\\n'")
    return "\n".join(lines) + "\n", every


def http_answer(output: str) -> tuple[int, str]:
    """The last status line of a `curl -i` output (after any 100 Continue) and its body."""
    head, _, body = output.replace("\r\n", "\n").rpartition("\n\n")
    statuses = re.findall(r"^HTTP/[\d.]+ (\d{3})", output, re.M)
    assert statuses, output  # every command with an expected status is a `curl -i`
    return int(statuses[-1]), body if head else output


def test_the_readme_examples_run_as_written(make_run):
    clone, port, environ, log = make_run
    assert f"Serving comments at http://127.0.0.1:{port}/api/comments/" in log.read_text()
    blocks = [code for code, reason in sh_blocks((ROOT / "README.md").read_text()) if not reason]
    text, every = script(blocks, port)
    done = subprocess.run(["bash", "-c", text], cwd=clone, env={**environ, "PORT": str(port)},
                          capture_output=True, text=True, timeout=300)
    outputs = re.split(r"^@@ \d+\n", done.stdout, flags=re.M)[1:]
    reached = len(outputs) - 1  # the command after the last marker failed, if any
    assert done.returncode == 0, (
        f"README command failed (exit {done.returncode}): {every[reached].text}\n"
        f"{outputs[-1] if outputs else done.stdout}\n{done.stderr[-3000:]}")
    assert reached == len(every)
    checked = 0
    for command, output in zip(every, outputs, strict=False):
        if command.status is None:
            continue
        status, body = http_answer(output)
        assert status == command.status, (command.text, output)
        if command.body is not None:
            assert json.loads(body) == command.body, (command.text, output)
        checked += 1
    assert checked >= 12
