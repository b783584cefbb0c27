"""The Atom validator the feed tests rely on (tests/atom_validator.py) rejects what RFC
4287 forbids, and rules.atom writes valid Atom whatever the texts hold."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atom_validator import InvalidAtom, schematron_rules, validate
from commentsvc.rules import atom

GOOD = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <id>urn:example:feed</id>
  <title>Example</title>
  <updated>2024-01-01T00:00:00Z</updated>
  <link rel="self" href="http://example.com/feed"/>
  {feed_author}
  <entry>
    <id>urn:example:1</id>
    <title>One</title>
    <updated>2024-01-01T00:00:00+00:00</updated>
    {entry_author}
    {content}
    {link}
  </entry>
</feed>"""
PARTS = {"feed_author": "", "entry_author": "<author><name>Ann</name></author>",
         "content": '<content type="html">&lt;b&gt;hi&lt;/b&gt;</content>',
         "link": '<link rel="alternate" href="http://example.com/1"/>'}


def document(**changes: str) -> bytes:
    return GOOD.format(**{**PARTS, **changes}).encode("utf-8")


def test_a_valid_feed_passes():
    root = validate(document())
    assert root.tag == "{http://www.w3.org/2005/Atom}feed"


def test_the_schemas_schematron_rules_are_all_asserted():
    assert [(context, message) for context, _test, message in schematron_rules()] == [
        ("atom:feed", "An atom:feed must have an atom:author unless all of its atom:entry "
                      "children have an atom:author."),
        ("atom:entry", "An atom:entry must have at least one atom:link element with a rel "
                       "attribute of 'alternate' or an atom:content."),
        ("atom:entry", "An atom:entry must have an atom:author if its feed does not."),
    ]


@pytest.mark.parametrize("broken, reason", [
    (document().replace(b"<id>urn:example:feed</id>", b""), "RFC 4287's schema"),
    (document().replace(b"<id>urn:example:1</id>", b""), "RFC 4287's schema"),
    (document().replace(b"http://www.w3.org/2005/Atom", b"http://www.w3.org/2005/Atomic"),
     "RFC 4287's schema"),
    (document().replace(b' xmlns="http://www.w3.org/2005/Atom"', b""), "RFC 4287's schema"),
    (document().replace(b"<title>Example</title>", b""), "RFC 4287's schema"),
    (document().replace(b"2024-01-01T00:00:00Z", b"01 Jan, 2024, 12:00 AM"), "RFC 4287's schema"),
    (document(content='<content type="html"><b>raw</b></content>'), "RFC 4287's schema"),
    (document(link='<link rel="alternate"/>'), "RFC 4287's schema"),
    (document(entry_author=""), "must have an atom:author"),
    (document(content="", link='<link rel="self" href="http://example.com/1"/>'),
     "at least one atom:link"),
    (document().replace(b"urn:example:1", b"urn:example:feed"), "ids repeat"),
    (document().replace(b"<title>One</title>", b"<title>\x01</title>"), "well-formed"),
    (document().replace(b"</feed>", b""), "well-formed"),
])
def test_a_broken_feed_is_rejected(broken, reason):
    with pytest.raises(InvalidAtom, match=reason):
        validate(broken)


@pytest.mark.parametrize("changes", [
    {"entry_author": "", "feed_author": "<author><name>Site</name></author>"},
    {"content": ""},  # an alternate link stands for the content
    {"content": "", "link": '<link href="http://example.com/1"/>'},  # no rel: alternate
    {"content": '<content type="html"/>'},  # an empty body
])
def test_what_the_rfc_allows_passes(changes):
    validate(document(**changes))


WHEN = datetime(2024, 3, 5, 14, 7, tzinfo=UTC)
HOSTILE = [
    "<script>alert(1)</script>", "&lt;b&gt;", "]]>", "a & b", "\"quotes\" and 'apostrophes'",
    "emoji \U0001f600 and \u00e9", "line<br />break", "\x00\x01\x08\x0b\x0c\x1b\x7f",
    "\ud800 lone surrogate", "\ufffe\uffff", "tab\tnewline\ncr\r", "",
    '<a href="http://x.example/?a=1&amp;b=2" rel="nofollow">link</a>',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_any_text_makes_valid_atom(text):
    feed = atom.Feed(url="http://h/api/comments/feed/?content_type=x&object_id=1",
                     title=f"Comments {text}", list_url="http://h/api/comments/", entries=[
                         atom.Entry("http://h/api/comments/1/", text, text, WHEN, False),
                         atom.Entry("http://h/api/comments/2/", "Ann", text, WHEN, True)])
    root = validate(atom.render(feed))
    ns = {"a": "http://www.w3.org/2005/Atom"}
    assert root.xpath("string(a:entry[2]/a:content)", namespaces=ns) == atom.xml_text(text)
    assert root.xpath("string(a:entry[1]/a:author/a:name)", namespaces=ns) == (
        atom.xml_text(text) or atom.NAMELESS)


@pytest.mark.parametrize("text, expected", [
    ("plain", "plain"),
    ("tab\tlf\ncr\r", "tab\tlf\ncr\r"),
    ("\x00\x01\x1f", "\ufffd\ufffd\ufffd"),
    ("\x7f\x85\x9f", "\x7f\x85\x9f"),  # C1 controls are XML 1.0 characters
    ("\ud7ff\ud800\udfff\ue000", "\ud7ff\ufffd\ufffd\ue000"),
    ("\ufffd\ufffe\uffff", "\ufffd\ufffd\ufffd"),
    ("\U00010000\U0010ffff", "\U00010000\U0010ffff"),
])
def test_xml_text_replaces_only_what_xml_forbids(text, expected):
    assert atom.xml_text(text) == expected


def test_the_document_holds_the_feed_and_its_entries_in_order():
    older = datetime(2023, 1, 1, 8, 0, 0, 123456, tzinfo=UTC)
    body = atom.render(atom.Feed("http://h/f/", "Comments", "http://h/l/", [
        atom.Entry("http://h/c/2/", "Anonymous", "Hi &amp; bye<br />x", WHEN, True),
        atom.Entry("http://h/c/1/", "Ann", "", older, False)]))
    assert body.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n")
    assert body.decode("utf-8").split("\n", 1)[1] == (
        '<feed xmlns="http://www.w3.org/2005/Atom"><id>http://h/f/</id>'
        "<title>Comments</title><updated>2024-03-05T14:07:00+00:00</updated>"
        '<link href="http://h/f/" rel="self" type="application/atom+xml"/>'
        '<link href="http://h/l/" rel="alternate" type="application/json"/>'
        f'<generator version="{atom.__version__}">commentsvc</generator>'
        "<entry><id>http://h/c/2/</id><title>Anonymous replied</title>"
        "<updated>2024-03-05T14:07:00+00:00</updated>"
        "<author><name>Anonymous</name></author>"
        '<content type="html">Hi &amp;amp; bye&lt;br /&gt;x</content>'
        '<link href="http://h/c/2/" rel="alternate" type="application/json"/>'
        "<published>2024-03-05T14:07:00+00:00</published></entry>"
        "<entry><id>http://h/c/1/</id><title>Ann commented</title>"
        "<updated>2023-01-01T08:00:00.123456+00:00</updated>"
        "<author><name>Ann</name></author>"
        '<content type="html"/>'
        '<link href="http://h/c/1/" rel="alternate" type="application/json"/>'
        "<published>2023-01-01T08:00:00.123456+00:00</published></entry></feed>")
    validate(body)


def test_an_empty_feed_has_a_fixed_date_and_is_valid():
    body = atom.render(atom.Feed("http://h/f/", "Comments", "http://h/l/", []))
    root = validate(body)
    assert root.findtext("{http://www.w3.org/2005/Atom}updated") == "1970-01-01T00:00:00+00:00"
    assert body == atom.render(atom.Feed("http://h/f/", "Comments", "http://h/l/", []))


def test_the_modules_examples_hold():
    import doctest

    result = doctest.testmod(atom)
    assert result.attempted and not result.failed
