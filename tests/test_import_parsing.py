"""The importer's quick path for comment lines agrees with its careful parser on every line.

The quick path (orjson, one check per field) must accept exactly the lines the careful
parser accepts, with the same row, and leave every other line to it, so that errors are
reported the same way whichever path saw the line first.
"""

from __future__ import annotations

import json

import pytest

from commentsvc.interchange.ndjson import ImportFailed, _Invalid, _RecordParser

CONTENT_TYPES = frozenset({"users.user", "comics.comicpage"})
MAX_BODY = 40  # characters, as COMMENTSVC_MAX_BODY_LENGTH


def comment_line(**changes) -> bytes:
    record = {"type": "comment", "id": 7, "content_type": "comics.comicpage",
              "object_id": 3, "parent_id": None, "author_id": 2, "body": "Hello",
              "date_added": "2024-05-06T07:08:09Z", "is_deleted": False,
              "is_anonymous": False, "is_read": True, **changes}
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


WELL_FORMED = [
    comment_line(),
    comment_line(parent_id=5, body="<b>x</b> & \"quotes\"\nline two"),
    comment_line(date_added="2024-05-06T09:08:09.123456+02:00"),
    comment_line(date_added="2024-05-06T07:08:09-00:30", body="ünï ☃ 🎉"),
    comment_line(id=2**63 - 1, object_id=1, author_id=2**63 - 1),
    comment_line(content_type="users.user", is_deleted=True, is_anonymous=True),
    comment_line(body="a \\x00 b, written out"),
    comment_line(body='he said "hi" there'),
    comment_line().replace(b'"id":', b'"id" \t:'),
    b'{"type":"comment","id":7,"content_type":"comics.comicpage","object_id":3,'
    b'"parent_id":null,"author_id":2,"body":"","date_added":"2024-05-06T07:08:09Z",'
    b'"is_deleted":true,"is_anonymous":false,"is_read":false}\r\n',
    comment_line(is_deleted=True, body="   "),
    comment_line(is_deleted=True, body="x" * (MAX_BODY + 1)),
    comment_line(body="x" * MAX_BODY),
    comment_line(date_added="1900-01-01T00:00:00Z"),
    comment_line(date_added="8999-12-31T23:59:59.999999Z"),
    comment_line(date_added="1900-01-01T05:00:00+05:00"),
]

# Accepted by the careful parser only: the quick path must step aside, not refuse.
CAREFUL_ONLY = [
    comment_line(body='he said "a": b'),  # looks like one key too many
    comment_line(body='"ok" :)'),  # so does this, once a quote is followed by a space
    comment_line(body="tab\tand \\u0000 written out"),
]

MALFORMED = [
    comment_line().replace(b'"body": "Hello"', b'"body": "Hello", "body": "Bye"'),
    comment_line().replace(b'"body": "Hello"', b'"body": "Hello", "body" : "Bye"'),
    comment_line().replace(b'"body": "Hello"', b'"body": "Hello", "id": 7'),
    comment_line(body="nul \x00 here"),
    comment_line().replace(b'"Hello"', b'"\\ud800"'),
    b"\xef\xbb\xbf" + comment_line(),  # a byte order mark, on a line other than the first
    comment_line(id=0), comment_line(id=2**63), comment_line(id=7.0), comment_line(id="7"),
    comment_line(id=True), comment_line(object_id=-3), comment_line(parent_id=0),
    comment_line(author_id=None), comment_line(content_type="comics.comic"),
    comment_line(content_type=None), comment_line(body=5), comment_line(body=None),
    comment_line(date_added="2024-05-06T07:08:09"), comment_line(date_added="2024-05-06"),
    comment_line(date_added="2024-05-06Z"), comment_line(date_added="yesterday"),
    comment_line(date_added="0001-01-01T00:00:00+01:00"), comment_line(date_added=1),
    comment_line(is_deleted=0), comment_line(is_read="true"), comment_line(is_anonymous=None),
    comment_line(extra=1), comment_line().replace(b', "is_read": true', b""),
    comment_line().replace(b'"type": "comment"', b'"type": "user"'),
    comment_line().replace(b'"id": 7', b'"id": 99999999999999999999'),
    b'[1, 2]', b'{"type": "comment"', b'{"id": NaN}', b"\xff\xfe",
    # The API's body rules, and dates every time zone can show.
    comment_line(body=""), comment_line(body=" \n\t "),
    comment_line(body="x" * (MAX_BODY + 1)),
    comment_line(date_added="9999-12-31T23:00:00Z"),
    comment_line(date_added="9000-01-01T00:00:00Z"),
    comment_line(date_added="1899-12-31T23:59:59Z"),
    comment_line(date_added="0001-01-01T01:00:00Z"),
    comment_line(date_added="1900-01-01T00:30:00+01:00"),
]


def test_a_deleted_comment_keeps_no_text():
    parser = _RecordParser(CONTENT_TYPES, MAX_BODY)
    raw = comment_line(is_deleted=True, body="private words")
    assert parser.parse(4, raw)[1][6] == ""
    assert parser._well_formed_comment(4, raw)[6] == ""


@pytest.mark.parametrize(("raw", "words"), [
    (comment_line(body=" \n "), "field 'body' may not be blank (unless is_deleted is true)"),
    (comment_line(body="x" * (MAX_BODY + 1)),
     f"field 'body' has {MAX_BODY + 1} characters; at most {MAX_BODY} are allowed"),
    (comment_line(date_added="9999-12-31T23:00:00Z"),
     "field 'date_added' must be from 1900-01-01T00:00:00Z up to 9000-01-01T00:00:00Z"),
])
def test_refusals_name_the_rule(raw, words):
    with pytest.raises(ImportFailed) as caught:
        _RecordParser(CONTENT_TYPES, MAX_BODY).parse(9, raw)
    assert caught.value.line == 9
    assert words in caught.value.reason


def careful(parser: _RecordParser, number: int, raw: bytes):
    try:
        return ("row", parser._parse(number, raw))
    except _Invalid as exc:
        return ("error", str(exc))


def either(parser: _RecordParser, number: int, raw: bytes):
    try:
        return ("row", parser.parse(number, raw))
    except ImportFailed as exc:
        assert exc.line == number
        return ("error", exc.reason)


@pytest.mark.parametrize("raw", WELL_FORMED)
def test_quick_path_takes_well_formed_comments(raw):
    parser = _RecordParser(CONTENT_TYPES, MAX_BODY)
    row = parser._well_formed_comment(4, raw)
    assert row is not None
    assert ("row", ("comment", row)) == careful(parser, 4, raw)


@pytest.mark.parametrize(("raw", "outcome"), [(raw, "row") for raw in CAREFUL_ONLY]
                         + [(raw, "error") for raw in MALFORMED])
def test_quick_path_leaves_every_other_line_to_the_careful_parser(raw, outcome):
    parser = _RecordParser(CONTENT_TYPES, MAX_BODY)
    assert parser._well_formed_comment(4, raw) is None
    result = either(parser, 4, raw)
    assert result[0] == outcome
    assert result == careful(parser, 4, raw)
