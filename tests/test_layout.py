"""The package's layout rules that a reader relies on: all SQL lives in storage/queries.

Every string a module outside ``commentsvc/storage/queries`` holds is read from its
syntax tree (f-strings with their placeholders as ``x``, implicit concatenation joined)
and checked against the shapes of SQL statements. Docstrings are prose and skipped;
messages that merely name a keyword (``DELETE`` as an HTTP method, "refuses COPY") do not
have a statement's shape.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import commentsvc

PACKAGE = Path(commentsvc.__file__).resolve().parent
QUERIES = PACKAGE / "storage" / "queries"

# Statement shapes, upper-case as the service writes SQL (so English prose never matches).
SQL_SHAPES = re.compile(
    r"""
      ^\s*(?:SELECT|WITH|PREPARE|EXECUTE|DEALLOCATE|SET|SHOW|RESET
          |PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|ANALYZE|VACUUM|COPY|TRUNCATE|LOCK
          |LISTEN|NOTIFY|CREATE|ALTER|DROP|GRANT|REVOKE|COMMENT\s+ON)\b
    | \bSELECT\b[^;]*\bFROM\b
    | \bINSERT\s+INTO\b
    | \bUPDATE\s+\w+\s+SET\b
    | \bDELETE\s+FROM\b
    | \b(?:CREATE|ALTER|DROP)\s+(?:UNIQUE\s+|TEMPORARY\s+)?(?:TABLE|INDEX|CONSTRAINT|COLUMN
                                                          |VIEW|SCHEMA|SEQUENCE)\b
    | \bADD\s+(?:COLUMN|CONSTRAINT)\b
    | \b(?:NOT\s+NULL|PRIMARY\s+KEY|FOREIGN\s+KEY|REFERENCES)\b
    | \bpg_[a-z_]+\s*\(
    | \bSET\s+LOCAL\b
    | \bFROM\s+STDIN\b
    """,
    re.VERBOSE,
)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of the module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """Every string the module's code holds, with its line (f-strings whole, their
    placeholders as ``x``; the pieces inside an f-string are not listed again)."""
    skip = _docstrings(tree)
    strings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "x"
                           for part in node.values)
            strings.append((node.lineno, text))
            skip.update(id(part) for part in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in skip:
            strings.append((node.lineno, node.value))
    return sorted(strings)


def sql_outside_queries(root: Path, queries: Path) -> list[str]:
    """``path:line: string`` of each SQL-shaped string in a module of ``root`` outside
    ``queries``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(queries):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, text in _strings(tree):
            if SQL_SHAPES.search(text):
                found.append(f"{path.relative_to(root)}:{line}: {text.strip()[:80]!r}")
    return found


def test_no_sql_outside_storage_queries():
    found = sql_outside_queries(PACKAGE, QUERIES)
    assert not found, "SQL outside storage/queries:\n" + "\n".join(found)


PLANTED = '''\
"""Reads ``SELECT 1`` (a docstring, not code)."""
from sqlalchemy import text
ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
MESSAGE = "psycopg2 refuses COPY under a wait callback; SET the timeouts on the role"
PING = text("SELECT 1")  # planted
LAG = text("SELECT CASE WHEN pg_is_in_recovery() "  # planted
           "THEN 1 ELSE 0 END")
def f(cursor, name, table):
    """Select the rows; Delete from the cache, update the set."""
    cursor.execute("PRAGMA foreign_keys = ON")  # planted
    cursor.execute(f"DROP TABLE IF EXISTS {table}")  # planted
    cursor.execute("ALTER TABLE t "  # planted
                   f"ADD CONSTRAINT {name} CHECK (n > 0)")
    cursor.execute("DELETE FROM t WHERE id = %s", (1,))  # planted
    return f"PREPARE {name} (text) AS " + "x"  # planted
'''


def test_the_check_finds_planted_sql(tmp_path):
    """The check is not vacuous: each way of writing SQL in a module is found, and prose
    and messages that merely name a keyword are not."""
    queries = tmp_path / "storage" / "queries"
    queries.mkdir(parents=True)
    (queries / "fine.py").write_text('Q = "SELECT id FROM t WHERE id = :id"\n')
    (tmp_path / "planted.py").write_text(PLANTED)
    planted = [f"planted.py:{number}" for number, line in enumerate(PLANTED.splitlines(), 1)
               if line.endswith("# planted")]
    found = [":".join(entry.split(":")[:2]) for entry in sql_outside_queries(tmp_path, queries)]
    assert len(planted) == 7 and found == planted
