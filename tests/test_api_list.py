"""GET /api/comments/ on the sample fixture: whole bodies, order, filters and paging."""

from __future__ import annotations

import json

import pytest

from helpers import children, newest_first, walk

BASE = "http://localhost/api/comments/"
DEFAULT_AVATAR = "/static/img/default-avatar.png"


def entry(id, author, body, date_added, *, is_deleted=False, is_anonymous=False,
          is_read=False, author_url, author_avatar, **extra):
    """A Comment or Reply as the interface orders its fields."""
    return {"id": id, "author": author, "body": body, "date_added": date_added,
            "is_deleted": is_deleted, "is_anonymous": is_anonymous, "is_read": is_read,
            "author_url": author_url, "author_avatar": author_avatar,
            "can_delete": False, "can_reply": False, **extra}


def compact(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def test_one_target_whole_body(client, sample):
    reply = entry(1031, "Tab\tName", "Line one<br />Line two<br />Line three<br />four",
                  "07 Jan, 2023, 01:32 AM", author_url="/user/Tab%09Name/",
                  author_avatar=DEFAULT_AVATAR)
    expected = {
        "results": [
            {**reply, "replies": None},
            entry(1030, "bob", "&amp;amp; already &amp;lt;escaped&amp;gt;",
                  "06 Jan, 2023, 01:31 AM", is_read=True, author_url="/user/bob/",
                  author_avatar="/media/users/bob/thumb/av1.png", replies=[reply]),
            entry(1298, "li wei", "x", "03 Jan, 2023, 04:15 PM", is_read=True,
                  author_url="/user/li%20wei/", author_avatar=DEFAULT_AVATAR, replies=[]),
        ],
        "p8n": {
            "previous_url": None,
            "next_url": None,
            "page_links": [{"url": BASE + "?content_type=users.user&object_id=17",
                            "number": 1, "is_active": True, "is_break": False}],
            "num_pages": 1,
        },
    }
    response = client.get("/api/comments/?content_type=users.user&object_id=17")
    assert response.status_code == 200
    assert response.data == compact(expected)


def test_anonymous_comment_hides_its_author_everywhere(client, sample):
    anonymous = entry(1286, "Anonymous", "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;",
                      "09 Jan, 2023, 08:43 PM", is_anonymous=True, author_url="",
                      author_avatar=DEFAULT_AVATAR)
    expected_results = [
        {**anonymous, "replies": None},
        entry(1222, "Émile Zola", "&amp;amp; already &amp;lt;escaped&amp;gt;",
              "04 Jan, 2023, 04:23 AM", author_url="/user/%C3%89mile%20Zola/",
              author_avatar="/media/users/%C3%89mile%20Zola/thumb/av7.png",
              replies=[anonymous]),
    ]
    response = client.get("/api/comments/?content_type=users.user&object_id=10")
    assert response.get_json()["results"] == expected_results
    assert "Émile Zola".encode() in response.data  # UTF-8 as itself, not \u escapes
    assert b"bob" not in response.data


def test_deleted_comments_keep_their_place_and_send_no_text(client, sample):
    url = "/api/comments/?content_type=comics.comicpage&object_id=103&page_size=100"
    results = client.get(url).get_json()["results"]
    deleted = {r["id"]: r for r in sample if r["type"] == "comment" and r["is_deleted"]
               and r["object_id"] == 103 and r["content_type"] == "comics.comicpage"}
    assert deleted, "the sample has deleted comments on this page"
    listed = {e["id"]: e for e in results}
    for comment_id, record in deleted.items():
        assert listed[comment_id]["is_deleted"] is True
        assert listed[comment_id]["body"] == ""
        assert listed[comment_id]["author"] != "Anonymous" or record["is_anonymous"]
        parent = listed[record["parent_id"]]
        (as_reply,) = [r for r in parent["replies"] if r["id"] == comment_id]
        assert as_reply["body"] == ""


LISTS = [
    (None, None),
    ("comics.comicpage", None),
    ("users.user", None),
    ("comics.comicpage", 100),
    ("comics.comicpage", 103),
    ("comics.comicpage", 106),
    ("comics.comicpage", 109),
    ("users.user", 17),
    ("users.user", 10),
]


@pytest.mark.parametrize("page_size", [1, 3, 7, 10])
@pytest.mark.parametrize(("content_type", "object_id"), LISTS)
def test_walking_every_page_gives_each_comment_once_newest_first(
        client, sample, content_type, object_id, page_size):
    query = [("page_size", page_size)]
    if content_type:
        query.append(("content_type", content_type))
    if object_id is not None:
        query.append(("object_id", object_id))
    start = "/api/comments/?" + "&".join(f"{k}={v}" for k, v in query)
    pages = walk(client, start)
    expected = newest_first(sample, content_type, object_id)
    listed = [e["id"] for page in pages for e in page["results"]]
    assert listed == expected
    assert len(pages) == max(1, -(-len(expected) // page_size))
    for number, page in enumerate(pages, start=1):
        assert page["p8n"]["num_pages"] == len(pages)
        active = [link for link in page["p8n"]["page_links"] if link["is_active"]]
        assert [link["number"] for link in active] == [number]
        for e in page["results"]:
            record = next(r for r in sample if r["type"] == "comment" and r["id"] == e["id"])
            if record["parent_id"] is None:
                assert [r["id"] for r in e["replies"]] == children(sample, e["id"])
                assert all("replies" not in r for r in e["replies"])
            else:
                assert e["replies"] is None


def test_unfiltered_list_breaks_time_ties_by_id_descending(client, sample):
    ids = [e["id"] for p in walk(client, "/api/comments/") for e in p["results"]]
    # three comments share 2023-01-03T16:08:00Z and three 2023-01-07T01:32:00Z
    assert ids.index(1187) < ids.index(1048)
    assert ids.index(1114) < ids.index(1063) < ids.index(1031)


def test_content_type_alone_lists_every_target_of_that_kind(client, sample):
    results = client.get("/api/comments/?content_type=users.user&page_size=100").get_json()
    assert [e["id"] for e in results["results"]] == newest_first(sample, "users.user")


def test_target_without_comments_is_an_empty_first_page(client, sample):
    response = client.get("/api/comments/?content_type=comics.comicpage&object_id=999")
    assert response.status_code == 200
    assert response.get_json() == {
        "results": [],
        "p8n": {"previous_url": None, "next_url": None, "num_pages": 1, "page_links": [
            {"url": BASE + "?content_type=comics.comicpage&object_id=999", "number": 1,
             "is_active": True, "is_break": False}]},
    }


def test_empty_database_serves_page_one(client):
    body = client.get("/api/comments/").get_json()
    assert body["results"] == [] and body["p8n"]["num_pages"] == 1
