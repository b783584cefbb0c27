"""GET /api/comments/feed/: a list's newest 50 comments as Atom, the same entries the JSON
list gives on page 1 with page_size=50, on both databases; every feed fetched is checked
against RFC 4287's schema (atom_validator)."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import sqlalchemy as sa
from lxml import etree

from atom_validator import validate
from commentsvc.rules import atom, comment_lists
from commentsvc.storage import engine, store
from commentsvc.web import feed as feed_module
from conftest import Community, insert_records
from helpers import assert_error

FEED = "/api/comments/feed/"
LIST = "/api/comments/"
PAGE = {"content_type": "comics.comicpage", "object_id": 10}
PAGE_QUERY = "?content_type=comics.comicpage&object_id=10"
NS = {"a": "http://www.w3.org/2005/Atom"}
A = "{http://www.w3.org/2005/Atom}"
READ_ONLY = "GET, HEAD"


def fetch(client, url: str = FEED + PAGE_QUERY, **kwargs):
    """The feed at ``url``: a 200 of valid Atom, with the feed's headers."""
    response = client.get(url, **kwargs)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/atom+xml; charset=utf-8"
    assert response.headers["Allow"] == READ_ONLY
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    validate(response.data)
    return response


def entries(response) -> list[dict]:
    """Each entry of a fetched feed as plain data."""
    root = validate(response.data)
    found = []
    for entry in root.iterfind(f"{A}entry"):
        link = entry.find(f"{A}link")
        content = entry.find(f"{A}content")
        found.append({
            "id": entry.findtext(f"{A}id"), "title": entry.findtext(f"{A}title"),
            "author": entry.findtext(f"{A}author/{A}name"),
            "body": content.text or "", "content_type": content.get("type"),
            "link": (link.get("rel"), link.get("type"), link.get("href")),
            "published": entry.findtext(f"{A}published"),
            "updated": entry.findtext(f"{A}updated"),
        })
    return found


def feed_links(response) -> dict[str, tuple[str | None, str]]:
    """The feed's own links by rel: (type, href)."""
    root = validate(response.data)
    return {link.get("rel"): (link.get("type"), link.get("href"))
            for link in root.iterfind(f"{A}link")}


def json_page(client, query: str = PAGE_QUERY) -> list[dict]:
    """What the JSON list shows on page 1 with page_size=50."""
    response = client.get(f"{LIST}{query}&page_size=50" if query else f"{LIST}?page_size=50")
    assert response.status_code == 200
    return response.get_json()["results"]


def as_feed_entries(results: list[dict], base: str = "http://localhost") -> list[dict]:
    """What the feed must show of each JSON entry (the date is checked apart)."""
    return [{"id": f"{base}/api/comments/{c['id']}/",
             "title": f"{c['author']} {'replied' if c['replies'] is None else 'commented'}",
             "author": c["author"], "body": atom.xml_text(c["body"]), "content_type": "html",
             "link": ("alternate", "application/json", f"{base}/api/comments/{c['id']}/")}
            for c in results]


def without_dates(found: list[dict]) -> list[dict]:
    return [{k: v for k, v in entry.items() if k not in ("published", "updated")}
            for entry in found]


def stored_dates(app, ids: list[int]) -> dict[int, datetime]:
    """Each comment's date as stored, read apart from the service."""
    with app.app_context(), engine.get_engine().connect() as conn:
        rows = conn.execute(sa.text("SELECT id, date_added FROM commentsvc_comment")
                            .columns(date_added=sa.DateTime())).all()
    return {row.id: row.date_added.replace(tzinfo=UTC) for row in rows if row.id in ids}


@pytest.fixture
def busy(app_factory):
    """The community, posting without a rate limit."""
    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="")
    return app, app.test_client(), Community(app)


def post(client, community, name="ann", **fields) -> dict:
    response = client.post(LIST, json={**PAGE, "body": "Hello", **fields},
                           headers=community.auth(name))
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()


def test_an_empty_list_is_a_valid_feed_with_a_fixed_date(client):
    response = fetch(client, FEED + "?content_type=users.user&object_id=5")
    root = validate(response.data)
    assert root.findall(f"{A}entry") == []
    assert root.findtext(f"{A}updated") == "1970-01-01T00:00:00+00:00"
    assert root.findtext(f"{A}title") == "Comments on users.user 5"
    url = "http://localhost/api/comments/feed/?content_type=users.user&object_id=5"
    assert root.findtext(f"{A}id") == url
    assert feed_links(response) == {
        "self": ("application/atom+xml", url),
        "alternate": ("application/json",
                      "http://localhost/api/comments/?content_type=users.user&object_id=5")}


@pytest.mark.parametrize("query, title", [
    ("", "Comments"),
    ("?content_type=comics.comicpage", "Comments on comics.comicpage"),
    ("?content_type=users.user&object_id=99999999999999999999", "Comments on users.user 0"),
])
def test_every_list_the_json_list_serves_has_a_feed(client, community, query, title):
    response = fetch(client, FEED + query)
    assert validate(response.data).findtext(f"{A}title") == title
    assert without_dates(entries(response)) == as_feed_entries(json_page(client, query))


def test_the_newest_50_in_the_lists_order_as_the_json_page_shows_them(busy):
    app, client, community = busy
    # Posts (whose renders are stored) and rows written straight to the table (rendered
    # on the spot), some at one date so that ids break the ties, replies among them.
    for n in range(30):
        post(client, community, name=("ann", "bob")[n % 2], body=f"post {n}",
             **({"parent": 100} if n % 5 == 0 else {}))
    when = datetime(2030, 1, 1)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        for n in range(35):
            store.add_comment(conn, store.NewComment(
                content_type="comics.comicpage", object_id=10, author_id=1 + n % 3,
                body=f"row {n}", date_added=when - timedelta(seconds=n // 3)))
    response = fetch(client)
    found = entries(response)
    listed = json_page(client)
    assert len(listed) == 50 and len(found) == 50
    assert without_dates(found) == as_feed_entries(listed)
    ids = [c["id"] for c in listed]
    dates = stored_dates(app, ids)
    assert [e["published"] for e in found] == [dates[i].isoformat() for i in ids]
    assert [e["updated"] for e in found] == [e["published"] for e in found]
    root = validate(response.data)
    assert root.findtext(f"{A}updated") == found[0]["published"]
    # The 51st and later are the JSON list's page 2.
    second = client.get(f"{LIST}{PAGE_QUERY}&page_size=50&page=2").get_json()["results"]
    assert second and not {c["id"] for c in second} & set(ids)


BODIES = [
    "<b>bold</b> & <i>italic</i> <script>alert('x')</script>",
    "CDATA ends ]]> here, and ]]&gt; there",
    "Tom & Jerry &amp; friends &lt;3",
    "\"double\" and 'single' quotes",
    "emoji \U0001f600\U0001f44d and accents \u00e9\u00e8 \u4e2d\u6587",
    "line one\nline two\r\nline three\rend",
    "see https://example.com/a?b=1&c=2 and www.example.org. Or javascript:alert(1)",
    "controls \x01\x08\x0b\x0c\x1b and DEL \x7f",
]


@pytest.mark.parametrize("body", BODIES)
def test_a_body_reads_in_the_feed_as_the_site_shows_it(busy, body):
    _app, client, community = busy
    shown = post(client, community, body=body)["body"]
    found = entries(fetch(client))[0]
    assert found["body"] == atom.xml_text(shown)  # the JSON's HTML, as the feed's text
    assert found["content_type"] == "html"


def test_a_body_of_html_is_escaped_once_more_in_the_xml(busy):
    _app, client, community = busy
    post(client, community, body='<a href="x">&</a>\nhttps://e.example/?a=1&b=2')
    raw = fetch(client).get_data(as_text=True)
    assert ('<content type="html">&amp;lt;a href=&amp;quot;x&amp;quot;&amp;gt;&amp;amp;'
            '&amp;lt;/a&amp;gt;&lt;br /&gt;&lt;a href="https://e.example/?a=1&amp;amp;b=2" '
            'rel="nofollow"&gt;https://e.example/?a=1&amp;amp;b=2&lt;/a&gt;</content>') in raw


def test_anonymous_and_deleted_comments_show_what_the_list_shows(busy):
    app, client, community = busy
    secret = post(client, community, name="bob", body="from a secret author",
                  is_anonymous=True)
    doomed = post(client, community, name="carol", body="soon gone")
    assert client.delete(f"{LIST}{doomed['id']}/", headers=community.auth("carol")).status_code \
        == 204
    response = fetch(client)
    found = {e["id"]: e for e in entries(response)}
    base = "http://localhost/api/comments"
    assert found[f"{base}/{secret['id']}/"]["author"] == "Anonymous"
    assert found[f"{base}/{secret['id']}/"]["title"] == "Anonymous commented"
    assert found[f"{base}/{doomed['id']}/"]["body"] == ""
    assert found[f"{base}/{doomed['id']}/"]["author"] == "carol"
    assert found[f"{base}/103/"]["body"] == ""  # deleted before the feed was asked for
    assert b"soon gone" not in response.data and b"gone" not in response.data
    # Bob's other comments name him, so his name appears; but never with this entry.
    entry = next(e for e in validate(response.data).iterfind(f"{A}entry")
                 if e.findtext(f"{A}id") == f"{base}/{secret['id']}/")
    assert b"bob" not in etree.tostring(entry)
    assert without_dates(entries(response)) == as_feed_entries(json_page(client))


def test_replies_are_entries_of_their_own_in_list_order(busy):
    _app, client, community = busy
    root = post(client, community, body="root")
    reply = post(client, community, name="bob", body="reply", parent=root["id"])
    found = entries(fetch(client))
    assert [e["title"] for e in found[:2]] == ["bob replied", "ann commented"]
    assert [e["id"] for e in found[:2]] == [f"http://localhost/api/comments/{reply['id']}/",
                                            f"http://localhost/api/comments/{root['id']}/"]


def test_an_author_without_a_name_is_still_an_author(app, client):
    insert_records(app, [
        {"type": "user", "id": 1, "username": "", "avatar": None},
        {"type": "user", "id": 2, "username": "Odd\x0bName", "avatar": None},
        {"type": "comment", "id": 5, "content_type": "users.user", "object_id": 1,
         "parent_id": None, "author_id": 1, "body": "hi", "date_added": "2024-01-01T00:00:00Z",
         "is_deleted": False, "is_anonymous": False, "is_read": False},
        {"type": "comment", "id": 6, "content_type": "users.user", "object_id": 1,
         "parent_id": None, "author_id": 2, "body": "yo", "date_added": "2024-01-02T00:00:00Z",
         "is_deleted": False, "is_anonymous": False, "is_read": False},
    ])
    found = entries(fetch(client, FEED + "?content_type=users.user&object_id=1"))
    assert [e["author"] for e in found] == ["Odd\ufffdName", atom.NAMELESS]


def test_the_etag_gives_304_and_a_new_comment_changes_it(busy):
    _app, client, community = busy
    first = fetch(client)
    tag = first.headers["ETag"]
    assert tag.startswith('"') and not tag.startswith("W/")
    assert first.headers["Cache-Control"] == "max-age=0, must-revalidate"
    assert fetch(client).headers["ETag"] == tag
    for header in (tag, f'"other", {tag}', f"W/{tag}", "*"):
        held = client.get(FEED + PAGE_QUERY, headers={"If-None-Match": header})
        assert held.status_code == 304, header
        assert held.data == b""
        assert held.headers["ETag"] == tag
        assert held.headers["Cache-Control"] == "max-age=0, must-revalidate"
        assert held.headers["Allow"] == READ_ONLY
    post(client, community, body="news")
    fresh = fetch(client, headers={"If-None-Match": tag})
    assert fresh.headers["ETag"] != tag
    assert entries(fresh)[0]["body"] == "news"
    # A list's JSON and its feed are different responses with different tags.
    assert client.get(LIST + PAGE_QUERY).headers["ETag"] != fresh.headers["ETag"]


def test_a_signed_in_reader_gets_the_same_public_feed(client, community):
    anonymous = fetch(client)
    signed_in = fetch(client, headers=community.auth("carol"))
    assert signed_in.data == anonymous.data
    assert signed_in.headers["ETag"] == anonymous.headers["ETag"]
    assert signed_in.headers["Cache-Control"] == "max-age=0, must-revalidate"


def test_the_feed_is_built_once_then_served_from_the_page_cache(client, community,
                                                                monkeypatch):
    built = fetch(client)

    def must_not_run(*_args, **_kwargs):
        raise AssertionError("the feed was built again")

    monkeypatch.setattr(atom, "render", must_not_run)
    again = fetch(client)
    assert again.data == built.data and again.headers["ETag"] == built.headers["ETag"]


def test_the_display_and_cache_settings_count(app_factory, sample_records):
    plain = app_factory()
    insert_records(plain, sample_records)
    paris = app_factory(COMMENTSVC_TIME_ZONE="Europe/Paris", COMMENTSVC_CACHE_MAX_AGE=60)
    insert_records(paris, sample_records)
    first, second = fetch(plain.test_client(), FEED), fetch(paris.test_client(), FEED)
    assert first.headers["ETag"] != second.headers["ETag"]
    assert second.headers["Cache-Control"] == "max-age=60, must-revalidate"
    # Dates are UTC in a feed, whatever zone the list shows them in.
    assert first.data == second.data


@pytest.mark.parametrize("query", [
    "?object_id=1",
    "?content_type=nope.nope",
    "?content_type=users.user&object_id=1.5",
    "?content_type=users.user&object_id=abc",
    "?content_type=&object_id=1",
    "?content_type=users.user&object_id=",
])
def test_bad_parameters_get_the_lists_json_errors(client, query):
    listed = client.get(LIST + query)
    assert listed.status_code == 400
    assert_error(client.get(FEED + query), 400, listed.get_json(), allow=READ_ONLY)


def test_what_the_feed_does_not_read_is_ignored(client, community):
    plain = fetch(client)
    extra = fetch(client, FEED + PAGE_QUERY + "&page=7&page_size=abc&format=xml")
    assert extra.data == plain.data


def test_other_methods_and_a_bad_token(client):
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        response = client.open(FEED, method=method)
        assert_error(response, 405, f'Method "{method}" not allowed.', allow=READ_ONLY)
    assert_error(client.get(FEED, headers={"Authorization": "Token nope"}), 401,
                 "Invalid token.", allow=READ_ONLY)


def test_head_is_the_gets_headers_without_a_body(client, community):
    got = fetch(client)
    head = client.head(FEED + PAGE_QUERY)
    assert head.status_code == 200 and head.data == b""
    for name in ("Content-Type", "ETag", "Cache-Control", "Allow", "Content-Length"):
        assert head.headers[name] == got.headers[name], name
    held = client.head(FEED + PAGE_QUERY, headers={"If-None-Match": got.headers["ETag"]})
    assert held.status_code == 304


def test_the_browsable_list_links_its_feed(client, community):
    for query, feed_query in ((PAGE_QUERY, "?content_type=comics.comicpage&amp;object_id=10"),
                              ("?content_type=users.user", "?content_type=users.user"),
                              ("", "")):
        page = client.get(LIST + (query + "&" if query else "?") + "format=api")
        html = page.get_data(as_text=True)
        assert (f'<link rel="alternate" type="application/atom+xml" '
                f'title="Atom feed of this list" href="/api/comments/feed/{feed_query}">') in html
        assert f'<a class="feed" href="/api/comments/feed/{feed_query}">Atom feed</a>' in html
        href = feed_query.replace("&amp;", "&")
        fetch(client, FEED + href)


def test_under_a_mount_prefix_the_links_carry_it(host_factory, sample_records):
    host = host_factory()
    insert_records(host, sample_records)
    client = host.test_client()
    url = "/community/api/comments/feed/?content_type=comics.comicpage"
    response = fetch(client, url)
    base = "http://localhost/community/api/comments"
    assert feed_links(response) == {
        "self": ("application/atom+xml", f"{base}/feed/?content_type=comics.comicpage"),
        "alternate": ("application/json", f"{base}/?content_type=comics.comicpage")}
    assert all(e["id"].startswith(f"{base}/") for e in entries(response))
    behind = fetch(client, url, base_url="https://public.example/site/")
    assert feed_links(behind)["self"][1] == (
        "https://public.example/site/community/api/comments/feed/?content_type=comics.comicpage")
    assert behind.headers["ETag"] != response.headers["ETag"]
    html = client.get("/community/api/comments/?format=api").get_data(as_text=True)
    assert 'href="/community/api/comments/feed/"' in html


def test_forwarded_headers_count_only_from_a_trusted_proxy(app_factory):
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "public.example"}
    plain = fetch(app_factory().test_client(), FEED, headers=headers)
    assert feed_links(plain)["self"][1] == "http://localhost/api/comments/feed/"
    trusting = fetch(app_factory(COMMENTSVC_TRUSTED_PROXIES=1).test_client(), FEED,
                     headers=headers)
    assert feed_links(trusting)["self"][1] == "https://public.example/api/comments/feed/"


def test_the_date_never_depends_on_the_display_zone(app_factory):
    app = app_factory(COMMENTSVC_TIME_ZONE="Asia/Kathmandu")
    insert_records(app, [
        {"type": "user", "id": 1, "username": "ann", "avatar": None},
        {"type": "comment", "id": 5, "content_type": "users.user", "object_id": 1,
         "parent_id": None, "author_id": 1, "body": "hi",
         "date_added": "2024-02-29T23:59:58.250000Z",
         "is_deleted": False, "is_anonymous": False, "is_read": False}])
    found = entries(fetch(app.test_client(), FEED))
    assert found[0]["published"] == "2024-02-29T23:59:58.250000+00:00"
    parsed = datetime.fromisoformat(found[0]["published"])
    assert format_datetime(parsed, usegmt=True) == "Thu, 29 Feb 2024 23:59:58 GMT"


def test_the_modules_examples_hold():
    for module in (feed_module, comment_lists):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__


def test_nodes_sharing_a_redis_cache_share_feeds(app_factory, redis_url, monkeypatch):
    node_a = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=redis_url)
    node_b = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=redis_url)
    Community(node_a)
    built = fetch(node_a.test_client())
    monkeypatch.setattr(atom, "render", lambda *_args: pytest.fail("built again"))
    shared = fetch(node_b.test_client())
    assert shared.data == built.data and shared.headers["ETag"] == built.headers["ETag"]
