"""Assertions and oracles shared by the API tests, computed independently of the service."""

from __future__ import annotations

from datetime import datetime

ALLOW = "GET, POST, HEAD, OPTIONS"


def assert_error(response, status: int, detail) -> None:
    """The response is a JSON error of this status with exactly this body."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Allow"] == ALLOW
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
