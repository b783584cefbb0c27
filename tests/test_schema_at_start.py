"""operations.schema_at_start: a database that takes the connection and then says
nothing must not keep `commentsvc serve` from starting."""

from __future__ import annotations

import os
import socket
import sqlite3

from commentsvc.operations import schema_at_start


def test_a_silent_database_is_given_up_on_after_its_time(capsys):
    with socket.socket() as silent:  # accepts connections (the kernel does), answers none
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        env = {**os.environ, "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/x",
               "COMMENTSVC_DB_CONNECT_TIMEOUT": "60"}
        assert schema_at_start.prepare(env, seconds=5) is False
    assert ("The service's tables could not be checked (init-db did not finish within 5 s); "
            "starting anyway") in capsys.readouterr().err


def test_a_database_that_answers_is_checked(tmp_path, capsys):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'new.sqlite3'}"}
    assert schema_at_start.prepare(env) is True
    assert "could not be checked" not in capsys.readouterr().err
    with sqlite3.connect(tmp_path / "new.sqlite3") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert {"commentsvc_comment", "commentsvc_list_count", "commentsvc_user"} <= tables
