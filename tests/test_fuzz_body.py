"""Any comment text, rendered: only ``<br />`` and nofollow http(s) links, and the text
a reader sees is the text that was written."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import example, given
from hypothesis import strategies as st

from commentsvc.rules.formatting import render_body
from hypothesis_profiles import examples

# Pieces that meet the renderer's rules: link starts, their edges, markup, entities,
# every kind of line break and the punctuation that ends a link.
PIECES = st.sampled_from([
    "http://", "https://", "HTTPS://", "www.", "WWW.", "ex.com", "/a?b=1&c=2", "#x",
    "<", ">", "&", '"', "'", "&amp;", "&#x27;", "&lt;", "<a href='javascript:alert(1)'>",
    "</a>", "<br />", "<script>", "javascript:", "data:", "ftp://", "\r\n", "\r", "\n",
    ".", ",", ")", "(", "!", "?", ":", ";", "@", "/", "-", "_", "%", "=", "~", "+", " ",
    "\t", "\u2028", "\x00", "é", "ß", "𝔘", "١", "x", "0",
])
TEXTS = st.one_of(st.text(), st.lists(st.one_of(PIECES, st.text(max_size=3))).map("".join))
# A pure function takes microseconds: it can afford many more examples than the profile's.
MANY = examples(500)


class Reader(HTMLParser):
    """What a browser makes of the HTML: its text (a ``<br />`` read as a line break),
    every tag with its attributes, and every link's text and href."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.open_links = 0
        self.links: list[dict] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "a":
            self.open_links += 1
            self.links.append({"href": dict(attrs).get("href"), "text": ""})

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "br":
            self.text.append("\n")

    def handle_endtag(self, tag):
        if tag == "a":
            self.open_links -= 1

    def handle_data(self, data):
        self.text.append(data)
        if self.open_links:
            self.links[-1]["text"] += data


def read(html: str) -> Reader:
    reader = Reader()
    reader.feed(html)
    reader.close()
    return reader


@MANY
@given(TEXTS)
@example("see www.ex.com/<script>, https://ex.com/?a=1&b='2'.")
@example("\r\n\r\r\n\n")
def test_rendered_markup_is_only_breaks_and_nofollow_links(text):
    html = render_body(text)
    reader = read(html)
    for tag, attrs in reader.tags:
        assert (tag, attrs) == ("br", []) or (
            tag == "a" and [name for name, _ in attrs] == ["href", "rel"]
            and dict(attrs)["rel"] == "nofollow"), (tag, attrs, html)
    assert reader.open_links == 0  # every link is closed
    for link in reader.links:
        assert link["href"].lower().startswith(("http://", "https://")), link
        # The link goes where its text says: to it, or to http:// and it for www.
        assert link["href"] in (link["text"], "http://" + link["text"]), link


@MANY
@given(TEXTS)
@example("a\r\nb\rc\nd")
@example("&amp; &lt;b&gt; www.x.org/&amp;")
def test_the_visible_text_is_the_written_text(text):
    """Line breaks are the one change: \\r\\n, \\r and \\n all show as one break."""
    expected = text.replace("\r\n", "\n").replace("\r", "\n")
    assert "".join(read(render_body(text)).text) == expected


@MANY
@given(TEXTS)
def test_no_raw_markup_character_survives_outside_tags(text):
    """Outside the tags the renderer writes, < > " ' never appear unescaped."""
    html = render_body(text)
    stripped = re.sub(r'<br />|<a href="[^"<>]*" rel="nofollow">|</a>', "", html)
    assert not set(stripped) & set("<>\"'"), stripped
