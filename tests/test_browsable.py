"""The browsable page: what it shows, its caching apart from the JSON, its forms, and that
nothing a user typed can put markup into it."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import orjson
import pytest

from commentsvc.web.browsable import is_link_target, json_html, with_format
from commentsvc.web.responses import PAGE_HEADERS
from conftest import insert_records

URL = "/api/comments/"
TARGET = "content_type=comics.comicpage&object_id=100"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def text_of(markup) -> str:
    """What a reader sees: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", str(markup)))


class Elements(HTMLParser):
    """Every start tag of a page, noting whether it stands inside a comment's body."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.outside: list[tuple[str, dict]] = []
        self.in_bodies: list[tuple[str, dict]] = []
        self.texts: list[str] = []
        self._depth = 0  # open divs since a body began; 0: not in a body

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self._depth:
            self.in_bodies.append((tag, attrs))
            self._depth += tag == "div"
        else:
            self.outside.append((tag, attrs))
            if tag == "div" and attrs.get("class") == "body":
                self._depth = 1

    def handle_endtag(self, tag):
        if self._depth and tag == "div":
            self._depth -= 1

    def handle_data(self, data):
        self.texts.append(data)


def elements(page: bytes) -> Elements:
    parser = Elements()
    parser.feed(page.decode("utf-8"))
    return parser


# The page's own markup: every tag and attribute its templates write.
PAGE_TAGS = {"html", "head", "meta", "title", "link", "body", "header", "a", "span", "strong",
             "main", "div", "h1", "h2", "p", "form", "input", "label", "select", "option",
             "button", "nav", "ol", "li", "section", "article", "img", "time", "pre", "b",
             "code", "textarea", "dl", "dt", "dd", "table", "thead", "tbody", "tr", "th",
             "td", "script", "details", "summary"}
PAGE_ATTRS = {"lang", "charset", "name", "content", "rel", "href", "class", "aria-label",
              "aria-current", "aria-hidden", "method", "action", "type", "value", "id", "for",
              "selected", "inputmode", "size", "src", "alt", "width", "height", "pattern",
              "required", "rows", "maxlength", "defer", "data-method", "data-url",
              "data-body", "role", "hidden", "autocomplete", "title"}


# --- json_html -----------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    {}, [], {"a": []}, {"a": {}}, None, 1, "x", [1, [2, {"b": None}]],
    {"results": [{"id": 1, "author": "<b>\"x\" & 'y'</b>", "replies": []}],
     "p8n": {"next_url": "http://h/c/?a=1&b=%20&page=2", "page_links": [
         {"url": "http://h/c/", "number": 1}, {"url": None, "number": None}]}},
    {"author": "Émile \u2028 \\ \n", "author_url": "/user/%C3%89mile/"},
])
def test_json_html_reads_as_the_json_answer(value):
    assert text_of(json_html(value)) == orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def test_json_html_links_the_url_fields_only():
    page = str(json_html({
        "next_url": "http://h/?a=1&page=2", "url": "https://h/", "author_url": "/user/a%20b/",
        "author_avatar": "/media/x.png", "author": "http://looks.like/a/link",
        "body": "/etc/passwd", "previous_url": None,
    }))
    assert re.findall(r'<a href="([^"]*)">', page) == [
        "http://h/?a=1&amp;page=2", "https://h/", "/user/a%20b/", "/media/x.png"]


@pytest.mark.parametrize("value", ["javascript:alert(1)", "JavaScript:x", "//evil.example/",
                                   "data:text/html,x", "user/x", ""])
def test_json_html_never_links_another_scheme_or_origin(value):
    assert not is_link_target(value)
    assert "<a" not in str(json_html({"next_url": value, "author_url": value}))


def test_json_html_escapes_before_linking():
    page = str(json_html({"url": 'http://h/"><script>x</script>', "author": "<i>"}))
    assert "<script>" not in page and "<i>" not in page
    assert 'href="http://h/&#34;&gt;&lt;script&gt;x&lt;/script&gt;"' in page


@pytest.mark.parametrize(("query", "expected"), [
    ("", "format=json"),
    ("format=api", "format=json"),
    ("a=1&format=api&b=2", "a=1&b=2&format=json"),
    ("%66ormat=api&page=2", "page=2&format=json"),
])
def test_with_format_replaces_format_and_keeps_the_rest(query, expected):
    assert with_format(query, "json") == expected


# --- the list page -------------------------------------------------------------------

@pytest.fixture
def small_pages(app_factory, sample_records):
    app = app_factory(COMMENTSVC_PAGE_SIZE=3)
    insert_records(app, sample_records)
    return app.test_client()


def test_the_page_shows_request_status_headers_and_the_json(small_pages):
    json = small_pages.get(URL + f"?{TARGET}&format=json&page=2")
    response = small_pages.get(URL + f"?{TARGET}&format=api&page=2")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    seen = text_of(page)
    assert f"GET /api/comments/?{TARGET}&format=api&page=2" in seen
    assert "HTTP 200 OK" in seen
    for header in ("Allow: GET, POST, HEAD, OPTIONS", "Content-Type: application/json",
                   "Vary: Accept", "Cache-Control: max-age=0, must-revalidate"):
        assert header in seen
    api_data = orjson.loads(json.data)
    # the JSON shown is the JSON answer of the same URL with format=api
    shown = orjson.loads(text_of(re.search(r'<code class="json">(.*?)</code>', page,
                                           re.S).group(1)))
    assert shown["results"] == api_data["results"]
    assert shown["p8n"]["next_url"].endswith(f"?{TARGET}&format=api&page=3")


def test_p8n_links_keep_format_api_and_are_clickable(small_pages):
    page = small_pages.get(URL + f"?{TARGET}&format=api&page=5").get_data(as_text=True)
    links = {number: href for href, number in re.findall(
        r'<a class="page[^"]*"[^>]*href="([^"]*)">(\d+)</a>', page)}
    base = f"http://localhost/api/comments/?{TARGET.replace('&', '&amp;')}&amp;format=api"
    assert links["1"] == base and links["4"] == base + "&amp;page=4"
    assert re.search(r'<a class="page current" aria-current="page" href="[^"]*page=5">5</a>',
                     page)
    assert '<span class="break" aria-hidden="true">…</span>' in page
    assert f'<a href="{base}&amp;page=6">' in page  # the JSON's next_url, as a link


def test_the_page_numbers_follow_page_links(small_pages):
    page = small_pages.get(URL + f"?{TARGET}&format=api&page=5").get_data(as_text=True)
    pager = page.split('<nav class="pager"', 2)[1].split("</nav>")[0]
    shown = re.findall(r">(\d+|…)</", pager)
    p8n = small_pages.get(URL + f"?{TARGET}&page=5").get_json()["p8n"]
    assert shown == ["…" if link["is_break"] else str(link["number"])
                     for link in p8n["page_links"]]


def test_the_filter_form_is_prefilled_and_keeps_format_api(small_pages):
    page = small_pages.get(URL + f"?{TARGET}&format=api&page_size=2").get_data(as_text=True)
    form = page.split('<form class="filters"', 1)[1].split("</form>", 1)[0]
    assert 'method="get" action="/api/comments/"' in form
    assert '<input type="hidden" name="format" value="api">' in form
    assert '<input type="hidden" name="page_size" value="2">' in form
    assert '<option value="comics.comicpage" selected>' in form
    assert ('name="object_id" type="text" inputmode="numeric" pattern="-?[0-9]+" required '
            'size="8" value="100"') in form


def test_the_filter_form_never_sends_an_empty_filter(small_pages):
    """An empty content_type or object_id is a 400, so both fields are required and a whole
    kind (or the whole site) is a link of its own, each answering the page."""
    page = small_pages.get(URL + "?format=api&page_size=2").get_data(as_text=True)
    form = page.split('<form class="filters"', 1)[1].split("</form>", 1)[0]
    assert '<select id="filter-content_type" name="content_type" required>' in form
    assert '<option value="">Choose…</option>' in form  # the placeholder a browser refuses
    assert "pattern=\"-?[0-9]+\" required" in form
    links = re.findall(r'<span class="kinds">(.*?)</span>', form)[0]
    urls = [html.unescape(url) for url in re.findall(r'href="([^"]+)"', links)]
    assert sorted(urls) == [
        "/api/comments/?format=api&content_type=comics.comicpage&page_size=2",
        "/api/comments/?format=api&content_type=users.user&page_size=2"]
    for url in urls:
        response = small_pages.get(url)
        assert response.status_code == 200 and response.mimetype == "text/html"


def test_the_preview_shows_each_comment_as_a_site_would(client, sample):
    page = client.get("/api/comments/?content_type=comics.comicpage&object_id=100"
                      "&format=api&page_size=100").get_data(as_text=True)
    data = client.get("/api/comments/?content_type=comics.comicpage&object_id=100"
                      "&page_size=100").get_json()
    for comment in data["results"]:
        card = page.split(f'id="comment-{comment["id"]}"', 1)[1].split("</article>", 1)[0]
        assert f'<time>{comment["date_added"]}</time>' in card
        assert f'<img class="avatar" src="{comment["author_avatar"]}"' in page
        if comment["is_deleted"]:
            assert "This comment was deleted." in card
        else:
            assert f'<div class="body">{comment["body"]}</div>' in card  # the body's HTML
        author = html.escape(comment["author"]).replace("&#x27;", "&#39;")
        assert f'>{author}</' in card
    root = next(c for c in data["results"] if c["replies"])
    block = page.split(f'id="comment-{root["id"]}"', 1)[1].split('<div class="replies">', 1)[1]
    for reply in root["replies"]:
        assert f'id="comment-{reply["id"]}"' in block  # replies indented under their root


def test_the_page_headers_and_stylesheet(client, sample):
    response = client.get(URL, headers=BROWSER)
    for name, value in PAGE_HEADERS.items():
        assert response.headers[name] == value
    assert "script-src 'self';" in response.headers["Content-Security-Policy"]
    css = re.search(r'<link rel="stylesheet" href="([^"]+)">', response.get_data(as_text=True))
    with client.get(css.group(1)) as stylesheet:
        assert stylesheet.status_code == 200 and stylesheet.mimetype == "text/css"
        assert b"http" not in stylesheet.data and b"@import" not in stylesheet.data


# --- caching apart from the JSON -----------------------------------------------------

def test_page_and_json_have_their_own_tags_and_cache_entries(client, sample):
    url = URL + "?" + TARGET
    json_before = client.get(url)
    page = client.get(url, headers=BROWSER)
    json_after = client.get(url)
    page_again = client.get(url, headers=BROWSER)
    assert json_after.data == json_before.data and json_after.mimetype == "application/json"
    assert page_again.data == page.data and page_again.mimetype == "text/html"
    json_tag, page_tag = json_before.headers["ETag"], page.headers["ETag"]
    assert json_tag != page_tag
    assert client.get(url, headers={**BROWSER, "If-None-Match": json_tag}).status_code == 200
    assert client.get(url, headers={"If-None-Match": page_tag}).status_code == 200
    not_modified = client.get(url, headers={**BROWSER, "If-None-Match": page_tag})
    assert not_modified.status_code == 304 and not_modified.data == b""
    assert client.get(url, headers={"If-None-Match": json_tag}).status_code == 304
    # the page names the JSON answer's tag among the headers it shows
    assert f"ETag: {json_tag}" in text_of(page.get_data(as_text=True))


def test_format_api_and_a_browser_accept_are_different_urls_and_tags(client, sample):
    by_accept = client.get(URL, headers=BROWSER).headers["ETag"]
    by_format = client.get(URL + "?format=api").headers["ETag"]
    assert by_accept != by_format


def test_a_signed_in_page_is_private_and_tagged_for_them(client, community):
    anonymous = client.get(URL + "?format=api")
    ann = client.get(URL + "?format=api", headers=community.auth("ann"))
    bob = client.get(URL + "?format=api", headers=community.auth("bob"))
    assert ann.headers["Cache-Control"].startswith("private, ")
    assert len({anonymous.headers["ETag"], ann.headers["ETag"], bob.headers["ETag"]}) == 3
    assert "Post a comment" in ann.get_data(as_text=True)
    assert "Post a comment" not in anonymous.get_data(as_text=True)


# --- safety --------------------------------------------------------------------------

NASTY = [
    {"type": "user", "id": 901, "username": '"><img src=x onerror=alert(1)>', "avatar": '"x.png'},
    {"type": "user", "id": 902, "username": "</pre><script>alert(2)</script>", "avatar": None},
    {"type": "comment", "id": 9001, "content_type": "comics.comicpage", "object_id": 100,
     "parent_id": None, "author_id": 901,
     "body": '</div></code></pre><script>alert(3)</script><a href="javascript:x" onclick=y>z'
             '\n<img src=x onerror=alert(4)> www.example.com/"onmouseover="alert(5)',
     "date_added": "2030-01-01T00:00:00Z", "is_deleted": False, "is_anonymous": False,
     "is_read": False},
    {"type": "comment", "id": 9002, "content_type": "comics.comicpage", "object_id": 100,
     "parent_id": 9001, "author_id": 902, "body": "{{ 7*7 }} {% raw %} &lt;b&gt; <!-- x",
     "date_added": "2030-01-02T00:00:00Z", "is_deleted": False, "is_anonymous": False,
     "is_read": False},
]


@pytest.mark.parametrize("path", [URL + "?" + TARGET + "&format=api&page_size=100",
                                  "/api/comments/9001/?format=api",
                                  "/api/comments/1160/?format=api"])
def test_nothing_a_user_typed_becomes_markup(app, client, sample, path):
    insert_records(app, NASTY)
    page = client.get(path).data
    found = elements(page)
    assert any(tag == "a" for tag, _ in found.in_bodies)  # the bodies' own links are kept
    for tag, attrs in found.outside:
        assert tag in PAGE_TAGS, tag
        assert set(attrs) <= PAGE_ATTRS, (tag, attrs)
        for name in ("href", "src", "action"):
            if name in attrs:
                assert is_link_target(attrs[name]) or attrs[name].startswith("?"), attrs
    for tag, attrs in found.in_bodies:
        assert tag in ("br", "a"), tag
        if tag == "a":
            assert set(attrs) == {"href", "rel"} and attrs["rel"] == "nofollow"
            assert attrs["href"].startswith(("http://", "https://")), attrs
    text = "".join(found.texts)
    if "9001" in path or "page_size" in path:
        assert "<script>alert(3)</script>" in text  # shown as text, in the preview and JSON
        assert '"><img src=x onerror=alert(1)>' in text
    assert b"<img src=x" not in page
    # The one script is the page's own file (the policy runs no inline script anyway).
    assert page.count(b"<script") == 1
    assert re.search(rb'<script src="/api/static/browsable\.js" defer></script>', page)


# --- OPTIONS and the post form -------------------------------------------------------

FIELDS = {
    "content_type": {"type": "string", "required": True, "read_only": False,
                     "label": "Content type",
                     "choices": [{"value": "users.user", "display_name": "users.user"},
                                 {"value": "comics.comicpage",
                                  "display_name": "comics.comicpage"}]},
    "object_id": {"type": "integer", "required": True, "read_only": False,
                  "label": "Object id"},
    "body": {"type": "string", "required": True, "read_only": False, "label": "Body",
             "max_length": 5000},
    "parent": {"type": "integer", "required": False, "read_only": False, "label": "Parent"},
    "is_anonymous": {"type": "boolean", "required": False, "read_only": False,
                     "label": "Is anonymous"},
}


def test_anonymous_options_lists_what_it_renders_and_no_actions(client):
    body = client.options(URL).get_json()
    assert list(body) == ["name", "description", "renders", "parses"]
    assert body["renders"] == ["application/json", "text/html"]
    assert body["parses"] == ["application/json", "application/x-www-form-urlencoded",
                              "multipart/form-data"]


def test_signed_in_options_describes_the_post_fields(client, community):
    body = client.options(URL, headers=community.auth("ann")).get_json()
    assert list(body) == ["name", "description", "renders", "parses", "actions"]
    assert body["actions"] == {"POST": FIELDS}
    detail = client.options("/api/comments/100/", headers=community.auth("ann")).get_json()
    assert "actions" not in detail and detail["renders"] == ["application/json", "text/html"]


def test_the_post_fields_follow_the_settings(app_factory):
    app = app_factory(COMMENTSVC_CONTENT_TYPES="blog.post", COMMENTSVC_MAX_BODY_LENGTH=280)
    from conftest import Community

    community = Community(app)
    fields = app.test_client().options(URL, headers=community.auth("ann")).get_json()[
        "actions"]["POST"]
    assert fields["content_type"]["choices"] == [{"value": "blog.post",
                                                  "display_name": "blog.post"}]
    assert fields["body"]["max_length"] == 280


def test_options_as_a_page_shows_the_description(client, community):
    response = client.options(URL + "?format=api", headers=community.auth("ann"))
    assert response.status_code == 200 and response.mimetype == "text/html"
    seen = text_of(response.get_data(as_text=True))
    assert "OPTIONS /api/comments/?format=api" in seen
    assert "Comment List" in seen and "application/json, text/html" in seen
    assert "at most 5000 characters" in seen and "one of users.user, comics.comicpage" in seen


def test_the_post_form_is_built_from_the_post_fields(client, community):
    page = client.get(URL + "?format=api&content_type=comics.comicpage&object_id=10",
                      headers=community.auth("bob")).get_data(as_text=True)
    form = page.split('<section class="post" id="post">', 1)[1].split("</form>", 1)[0]
    assert '<form method="post" action="/api/comments/?format=api">' in form
    assert re.findall(r'name="([a-z_]+)"', form) == [*FIELDS, "idempotency_key"]
    assert '<option value="comics.comicpage" selected>' in form
    assert 'name="object_id" type="text" inputmode="numeric" pattern="-?[0-9]+" value="10"' \
        in form
    assert 'maxlength="5000" required' in form
    assert 'name="is_anonymous" type="checkbox" value="true"' in form
    assert "Signed in as" in page


def test_posting_the_form_answers_with_the_new_comment_as_a_page(client, community):
    response = client.post(URL + "?format=api", headers=community.auth("bob"), data={
        "content_type": "comics.comicpage", "object_id": "10", "body": "Hi <b>there</b>",
        "parent": "", "is_anonymous": "true"})
    assert response.status_code == 201 and response.mimetype == "text/html"
    location = response.headers["Location"]
    assert re.fullmatch(r"http://localhost/api/comments/\d+/", location)
    page = response.get_data(as_text=True)
    seen = text_of(page)
    assert "POST /api/comments/?format=api" in seen and "HTTP 201 Created" in seen
    assert f'<a href="{location}">{location}</a>' in page
    assert '<div class="body">Hi &lt;b&gt;there&lt;/b&gt;</div>' in page
    assert client.get(location).get_json()["is_anonymous"] is True


def test_a_refused_form_post_is_answered_in_json(client, community):
    response = client.post(URL + "?format=api", headers=community.auth("bob"), data={
        "content_type": "comics.comicpage", "object_id": "10", "body": " "})
    assert response.status_code == 400 and response.mimetype == "application/json"
    assert response.get_json() == {"body": ["This field may not be blank."]}


def test_a_host_sites_signed_in_user_browses_and_posts_under_its_prefix(database_url):
    from test_host_login import make_site

    from commentsvc.storage import engine

    site = make_site(database_url)
    try:
        client = site.test_client()
        page = client.get("/community/api/comments/", headers=BROWSER).get_data(as_text=True)
        assert "Post a comment" not in page
        assert '<link rel="stylesheet" href="/community/api/static/browsable.css">' in page
        with client.get("/community/api/static/browsable.css") as css:
            assert css.status_code == 200
        client.post("/login/7")
        page = client.get("/community/api/comments/", headers=BROWSER).get_data(as_text=True)
        assert "Signed in as <strong>dave</strong>" in page
        assert '<form method="post" action="/community/api/comments/?format=api">' in page
        response = client.post("/community/api/comments/?format=api", headers=BROWSER, data={
            "content_type": "comics.comicpage", "object_id": "10", "body": "From a browser"})
        assert response.status_code == 201 and response.mimetype == "text/html"
        assert "From a browser" in response.get_data(as_text=True)
    finally:
        with site.app_context():
            engine.get_engine().dispose()
