"""Every page of the sample, whole, against an oracle built without the service's code.

Bodies come from a hand-written table, dates from strftime in the C locale, paths from
urllib's quote: none of it shares code with commentsvc.rules.formatting.
"""

from __future__ import annotations

import locale
from datetime import datetime
from urllib.parse import quote

import pytest

from helpers import newest_first, walk

LINK = '<a href="{0}" rel="nofollow">{0}</a>'
BODY_HTML = {
    "Nice page!": "Nice page!",
    "x": "x",
    "(http://example.com/x)": "(" + LINK.format("http://example.com/x") + ")",
    "javascript:alert(1) and data:text/html;base64,AAAA":
        "javascript:alert(1) and data:text/html;base64,AAAA",
    "http://ex.com/ünï and https://ex.com/%20x":
        LINK.format("http://ex.com/ünï") + " and " + LINK.format("https://ex.com/%20x"),
    "See https://example.com/a?b=1&c=2.":
        "See " + LINK.format("https://example.com/a?b=1&amp;c=2") + ".",
    "trailing link http://ex.com/path!": "trailing link " + LINK.format("http://ex.com/path") + "!",
    "<script>alert('x')</script>": "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;",
    "a" * 300: "a" * 300,
    '<a href="http://evil" onclick="x()">click</a>':
        "&lt;a href=&quot;" + LINK.format("http://evil")
        + "&quot; onclick=&quot;x()&quot;&gt;click&lt;/a&gt;",
    "&amp; already &lt;escaped&gt;": "&amp;amp; already &amp;lt;escaped&amp;gt;",
    "I can't wait for the next one…": "I can&#x27;t wait for the next one…",
    "ftp://old.example.com": "ftp://old.example.com",
    "emoji 🎉 and ümlaut": "emoji 🎉 and ümlaut",
    "multi\n\n\nbreaks": "multi<br /><br /><br />breaks",
    "Line one\nLine two\r\nLine three\rfour": "Line one<br />Line two<br />Line three<br />four",
    'He said "hello" & left': "He said &quot;hello&quot; &amp; left",
    "visit www.example.org, ok?":
        'visit <a href="http://www.example.org" rel="nofollow">www.example.org</a>, ok?',
}
DEFAULT_AVATAR = "/static/img/default-avatar.png"


def expected_entry(comment: dict, users: dict, with_replies: list | None) -> dict:
    user = users[comment["author_id"]]
    anonymous, deleted = comment["is_anonymous"], comment["is_deleted"]
    when = datetime.fromisoformat(comment["date_added"].replace("Z", "+00:00"))
    name = quote(user["username"], safe="")
    entry = {
        "id": comment["id"],
        "author": "Anonymous" if anonymous else user["username"],
        "body": "" if deleted else BODY_HTML[comment["body"]],
        "date_added": when.strftime("%d %b, %Y, %I:%M %p"),
        "is_deleted": deleted,
        "is_anonymous": anonymous,
        "is_read": comment["is_read"],
        "author_url": "" if anonymous else f"/user/{name}/",
        "author_avatar": DEFAULT_AVATAR if anonymous or not user["avatar"]
        else f"/media/users/{name}/thumb/{user['avatar']}",
        "can_delete": False,
        "can_reply": False,
    }
    if with_replies is not None:
        entry["replies"] = with_replies
    return entry


@pytest.fixture(autouse=True)
def c_time_locale():
    saved = locale.setlocale(locale.LC_TIME)
    locale.setlocale(locale.LC_TIME, "C")
    yield
    locale.setlocale(locale.LC_TIME, saved)


def test_the_body_table_covers_the_sample(sample_records):
    bodies = {r["body"] for r in sample_records if r["type"] == "comment"}
    assert bodies <= set(BODY_HTML)


@pytest.mark.parametrize("page_size", [10, 4])
def test_every_page_of_the_whole_site_list(client, sample, page_size):
    users = {r["id"]: r for r in sample if r["type"] == "user"}
    comments = {r["id"]: r for r in sample if r["type"] == "comment"}
    expected = []
    for comment_id in newest_first(sample):
        comment = comments[comment_id]
        if comment["parent_id"] is not None:
            expected.append(expected_entry(comment, users, None) | {"replies": None})
            continue
        replies = [expected_entry(comments[i], users, None)
                   for i in newest_first([c for c in comments.values()
                                          if c["parent_id"] == comment_id])]
        expected.append(expected_entry(comment, users, replies))
    pages = walk(client, f"/api/comments/?page_size={page_size}")
    got = [entry for page in pages for entry in page["results"]]
    assert got == expected
    assert [list(entry) for entry in got] == [list(entry) for entry in expected]
