"""An Atom 1.0 document (RFC 4287) of list entries, written by feedgen.

feedgen builds the document as an lxml tree, so lxml escapes every text and attribute
and no string is ever pasted into XML by hand (a Jinja XML template would have been the
fallback: feedgen's one shortcoming here, skipping an author whose name is empty, is
covered by ``NAMELESS``). lxml refuses characters XML 1.0 cannot carry, which a comment
body may hold (any control character but NUL), so every text passes ``xml_text`` first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from feedgen.entry import FeedEntry
from feedgen.feed import FeedGenerator

from commentsvc.version import __version__

ATOM_TYPE = "application/atom+xml"
# Entries a feed holds: its list's newest, as the list's first page of this size.
FEED_SIZE = 50
# The feed's updated date when it has no entry: fixed, so an empty feed keeps its ETag's
# promise (the same bytes until the list changes).
EMPTY_UPDATED = datetime(1970, 1, 1, tzinfo=UTC)
# An author whose name is empty: Atom wants a name, and feedgen drops a nameless author.
NAMELESS = "(no name)"

# Every character XML 1.0 allows (its Char production); anything else is replaced.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with each character XML 1.0 cannot hold (C0 controls but tab, line feed
    and carriage return; lone surrogates; U+FFFE and U+FFFF) replaced by U+FFFD.

    >>> xml_text("a\\x0bb\\ud800c\\uffffd\\te\\U0001f600")
    'a\\ufffdb\\ufffdc\\ufffdd\\te\\U0001f600'
    """
    return _NOT_XML.sub("\ufffd", text)


@dataclass(frozen=True, slots=True)
class Entry:
    """One comment as a feed entry: its own URL (the entry's id and alternate link), its
    author and body as the list shows them, and its date (aware, UTC)."""

    url: str
    author: str
    html: str  # the list's escaped HTML body; "" for a deleted comment
    date: datetime
    is_reply: bool


@dataclass(frozen=True, slots=True)
class Feed:
    """A list's feed: its URL (also its id), its title, the JSON list it mirrors, and its
    entries newest first."""

    url: str
    title: str
    list_url: str
    entries: list[Entry]


class _Entry(FeedEntry):  # type: ignore[misc]  # feedgen ships no types
    """feedgen 1.0.0 writes an entry's links with their href only (python-feedgen issue
    135): each link's other attributes (rel, type) are put back."""

    def atom_entry(self, extensions: bool = True) -> Any:
        element = super().atom_entry(extensions)
        for written, given in zip(element.findall("link"), self.link(), strict=True):
            written.attrib.update({name: value for name, value in given.items()
                                   if name != "href"})
        return element


def entry_title(author: str, is_reply: bool) -> str:
    """What a reader lists the entry as.

    >>> entry_title("Ann", False), entry_title("Anonymous", True)
    ('Ann commented', 'Anonymous replied')
    """
    return f"{author} {'replied' if is_reply else 'commented'}"


def render(feed: Feed) -> bytes:
    """The feed as a UTF-8 Atom document; its ``updated`` is the newest entry's date."""
    generator = FeedGenerator()
    generator.id(feed.url)
    generator.title(xml_text(feed.title))
    generator.updated(feed.entries[0].date if feed.entries else EMPTY_UPDATED)
    generator.link(href=feed.url, rel="self", type=ATOM_TYPE)
    generator.link(href=feed.list_url, rel="alternate", type="application/json")
    generator.generator("commentsvc", version=__version__)
    for entry in feed.entries:
        author = xml_text(entry.author) or NAMELESS
        item = generator.add_entry(_Entry(), order="append")
        item.id(entry.url)
        item.title(entry_title(author, entry.is_reply))
        item.author(name=author)
        item.link(href=entry.url, rel="alternate", type="application/json")
        item.content(xml_text(entry.html), type="html")
        item.published(entry.date)
        item.updated(entry.date)
    return cast(bytes, generator.atom_str(pretty=False))
