"""Assertions and oracles shared by the API tests, computed independently of the service."""

from __future__ import annotations

from datetime import datetime

ALLOW = "GET, POST, HEAD, OPTIONS"


def assert_error(response, status: int, detail, allow: str | None = ALLOW) -> None:
    """The response is a JSON error of this status with exactly this body, naming the
    methods of the resource answering (``allow``; None: a path no route serves)."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers.get("Allow") == allow
    assert response.headers["Vary"] == "Accept"
    expected = detail if isinstance(detail, dict) else {"detail": detail}
    assert response.get_json() == expected


def newest_first(records: list[dict], content_type: str | None = None,
                 object_id: int | None = None) -> list[int]:
    """Ids of the comments of a list in the contract's order, by a plain Python sort."""
    chosen = [r for r in records if r["type"] == "comment"
              and (content_type is None or r["content_type"] == content_type)
              and (object_id is None or r["object_id"] == object_id)]
    chosen.sort(key=lambda r: (datetime.fromisoformat(r["date_added"].replace("Z", "+00:00")),
                               r["id"]), reverse=True)
    return [r["id"] for r in chosen]


def children(records: list[dict], parent_id: int) -> list[int]:
    """Ids of a root's replies, newest first."""
    replies = [r for r in records if r["type"] == "comment" and r["parent_id"] == parent_id]
    return newest_first(replies)


def walk(client, url: str) -> list[dict]:
    """Every page of a list, following next_url from ``url``; returns the page bodies."""
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, (url, response.get_data(as_text=True))
        body = response.get_json()
        pages.append(body)
        url = body["p8n"]["next_url"]
        assert len(pages) <= 1000, "next_url never ends"
    return pages


def assert_positions_exact(conn) -> None:
    """Every list's positions are 1..n in (date_added, id) order and its counter says n."""
    import sqlalchemy as sa

    from commentsvc.rules.comment_lists import list_key

    rows = conn.execute(sa.text(
        "SELECT id, content_type, object_id, date_added, site_pos, kind_pos, target_pos "
        "FROM commentsvc_comment").columns(date_added=sa.DateTime())).all()
    counters = dict(conn.execute(sa.text("SELECT list_key, n FROM commentsvc_list_count")).all())
    groups: dict[str, list] = {}
    for row in rows:
        for key, pos in ((list_key(None, None), row.site_pos),
                         (list_key(row.content_type, None), row.kind_pos),
                         (list_key(row.content_type, row.object_id), row.target_pos)):
            groups.setdefault(key, []).append(((row.date_added, row.id), pos))
    assert set(counters) == set(groups), "a list without a counter, or a counter without a list"
    for key, members in groups.items():
        members.sort()
        assert [pos for _, pos in members] == list(range(1, len(members) + 1)), key
        assert counters[key] == len(members), key


def slow_page_reads(monkeypatch, seconds: float) -> None:
    """Every page read (PostgreSQL) runs a statement that outlasts any small timeout first,
    on the connection it reads on."""
    from commentsvc.storage import counters

    original = counters.ListStateReader._fetch_page

    def slowed(self, cursor, read):
        cursor.execute("SELECT pg_sleep(%s)", (seconds,))
        return original(self, cursor, read)

    monkeypatch.setattr(counters.ListStateReader, "_fetch_page", slowed)


def calls_of(monkeypatch, owner, name: str) -> list:
    """The first argument (after self) of each call of ``owner.name`` from now on; the
    method still does what it does."""
    calls: list = []
    real = getattr(owner, name)

    def counting(self, first, *args, **kwargs):
        calls.append(first)
        return real(self, first, *args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls
