"""Rows dated at the very ends of what a datetime holds never break a page, in any zone.

Import refuses such dates now, but an older database (or a host writing its own rows)
may hold them; every list and the comment's own page must still answer.
"""

from __future__ import annotations

import pytest

from conftest import insert_records

RECORDS = [
    {"type": "user", "id": 1, "username": "ann", "avatar": None},
    {"type": "comicpage", "id": 10, "title": "Page ten"},
    {"type": "comment", "id": 100, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": None, "author_id": 1, "body": "far future",
     "date_added": "9999-12-31T23:00:00Z", "is_deleted": False, "is_anonymous": False,
     "is_read": False},
    {"type": "comment", "id": 101, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": 100, "author_id": 1, "body": "reply from year 1",
     "date_added": "0001-01-01T01:00:00Z", "is_deleted": False, "is_anonymous": False,
     "is_read": False},
    {"type": "comment", "id": 102, "content_type": "users.user", "object_id": 1,
     "parent_id": None, "author_id": 1, "body": "year 1",
     "date_added": "0001-01-01T00:30:00Z", "is_deleted": False, "is_anonymous": False,
     "is_read": False},
]

PAGES = ["/api/comments/", "/api/comments/?content_type=comics.comicpage",
         "/api/comments/?content_type=comics.comicpage&object_id=10",
         "/api/comments/?content_type=users.user&object_id=1",
         "/api/comments/100/", "/api/comments/101/", "/api/comments/102/"]


@pytest.mark.parametrize(("zone", "shown_100", "shown_102"), [
    # East of UTC, year 9999 cannot be shown in the zone: UTC instead; west, year 1.
    ("Etc/GMT-14", "31 Dec, 9999, 11:00 PM", "01 Jan, 0001, 02:30 PM"),
    ("Etc/GMT+12", "31 Dec, 9999, 11:00 AM", "01 Jan, 0001, 12:30 AM"),
    # Before 1901 this zone keeps its local mean time, 10:29:20 west of UTC.
    ("Pacific/Kiritimati", "31 Dec, 9999, 11:00 PM", "01 Jan, 0001, 12:30 AM"),
    ("UTC", "31 Dec, 9999, 11:00 PM", "01 Jan, 0001, 12:30 AM"),
])
def test_extreme_dates_are_shown_in_every_list_and_zone(app_factory, zone, shown_100,
                                                        shown_102):
    app = app_factory(COMMENTSVC_TIME_ZONE=zone)
    insert_records(app, RECORDS)
    client = app.test_client()
    for url in PAGES:
        for accept in ("application/json", "text/html"):
            response = client.get(url, headers={"Accept": accept})
            assert response.status_code == 200, (url, accept, response.get_data(as_text=True))
    site = client.get("/api/comments/").get_json()["results"]
    shown = {entry["id"]: entry["date_added"] for entry in site}
    assert shown == {100: shown_100, 101: shown[101], 102: shown_102}
    assert [entry["id"] for entry in site] == [100, 101, 102]  # still newest first
