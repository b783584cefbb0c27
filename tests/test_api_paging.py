"""Page selection and the p8n block: page numbers, page_size and URLs that keep the query."""

from __future__ import annotations

import pytest

from conftest import insert_records
from helpers import assert_error, newest_first

BASE = "http://localhost/api/comments/"
TARGET = "content_type=comics.comicpage&object_id=100"  # 29 comments: 3 pages of 10


def test_target_has_the_expected_size(client, sample):
    assert len(newest_first(sample, "comics.comicpage", 100)) == 29


def test_middle_page_p8n_keeps_query_order_and_appends_page_last(client, sample):
    url = "/api/comments/?object_id=100&page=2&content_type=comics.comicpage&format=json"
    p8n = client.get(url).get_json()["p8n"]
    keep = "object_id=100&content_type=comics.comicpage&format=json"
    assert p8n == {
        "previous_url": f"{BASE}?{keep}",
        "next_url": f"{BASE}?{keep}&page=3",
        "page_links": [
            {"url": f"{BASE}?{keep}", "number": 1, "is_active": False, "is_break": False},
            {"url": f"{BASE}?{keep}&page=2", "number": 2, "is_active": True, "is_break": False},
            {"url": f"{BASE}?{keep}&page=3", "number": 3, "is_active": False, "is_break": False},
        ],
        "num_pages": 3,
    }
    assert list(p8n) == ["previous_url", "next_url", "page_links", "num_pages"]
    assert list(p8n["page_links"][0]) == ["url", "number", "is_active", "is_break"]


def test_long_list_shortens_page_links_with_a_break(client, sample):
    p8n = client.get("/api/comments/?page_size=2").get_json()["p8n"]  # 60 comments, 30 pages
    numbers = [link["number"] for link in p8n["page_links"]]
    assert numbers == [1, 2, 3, None, 30]
    brk = p8n["page_links"][3]
    assert brk == {"url": None, "number": None, "is_active": False, "is_break": True}
    assert p8n["page_links"][-1]["url"] == BASE + "?page_size=2&page=30"


def test_page_last_is_the_last_page(client, sample):
    last = client.get(f"/api/comments/?{TARGET}&page=last").get_json()
    assert last["p8n"]["next_url"] is None
    assert last["p8n"]["num_pages"] == 3
    assert [e["id"] for e in last["results"]] == newest_first(sample, "comics.comicpage", 100)[20:]
    assert len(last["results"]) == 9
    assert last["p8n"]["previous_url"] == f"{BASE}?{TARGET}&page=2"


@pytest.mark.parametrize(("query", "expected_page"), [
    ("", 1),
    ("&page=", 1),
    ("&page=1", 1),
    ("&page=3", 3),
    ("&page=003", 3),
    ("&page=3&page=2", 2),  # repeated: the last value counts
    ("&page=2&page=last", 3),
])
def test_page_parameter(client, sample, query, expected_page):
    body = client.get(f"/api/comments/?{TARGET}{query}").get_json()
    active = [link["number"] for link in body["p8n"]["page_links"] if link["is_active"]]
    assert active == [expected_page]
    order = newest_first(sample, "comics.comicpage", 100)
    start = (expected_page - 1) * 10
    assert [e["id"] for e in body["results"]] == order[start:start + 10]


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.0", "4", "99999999999999999999999",
                                  "last2", "%20", "1e3", "２"])
def test_invalid_page_is_404(client, sample, page):
    assert_error(client.get(f"/api/comments/?{TARGET}&page={page}"), 404, "Invalid page.")


def test_page_two_of_an_empty_list_is_404(client, sample):
    response = client.get("/api/comments/?content_type=users.user&object_id=999&page=2")
    assert_error(response, 404, "Invalid page.")


def test_page_size_lowers_and_raises_up_to_the_maximum(client, sample):
    assert len(client.get("/api/comments/?page_size=4").get_json()["results"]) == 4
    assert len(client.get("/api/comments/?page_size=25").get_json()["results"]) == 25
    body = client.get("/api/comments/?page_size=100000").get_json()  # clamped to 100
    assert len(body["results"]) == 60 and body["p8n"]["num_pages"] == 1


@pytest.mark.parametrize("value", ["0", "-3", "abc", "1.5"])
def test_bad_page_size_is_400(client, sample, value):
    response = client.get(f"/api/comments/?page_size={value}")
    assert response.status_code == 400
    assert list(response.get_json()) == ["page_size"]


def test_configured_page_size(app_factory, sample_records):
    app = app_factory(COMMENTSVC_PAGE_SIZE=7, COMMENTSVC_MAX_PAGE_SIZE=20)
    insert_records(app, sample_records)
    client = app.test_client()
    assert len(client.get("/api/comments/").get_json()["results"]) == 7
    assert len(client.get("/api/comments/?page_size=50").get_json()["results"]) == 20


def test_page_urls_keep_unknown_parameters_and_their_spelling(client, sample):
    p8n = client.get("/api/comments/?q=a%20b&x=%C3%A9&flag&page_size=20").get_json()["p8n"]
    assert p8n["next_url"] == BASE + "?q=a%20b&x=%C3%A9&flag&page_size=20&page=2"


def test_page_urls_use_the_request_host_and_scheme(client, sample):
    response = client.get("/api/comments/?page_size=20", base_url="https://comics.example:8443")
    assert response.get_json()["p8n"]["next_url"] == (
        "https://comics.example:8443/api/comments/?page_size=20&page=2")


def test_forwarded_headers_are_ignored_unless_a_proxy_is_trusted(app_factory, sample_records):
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "public.example"}
    plain = app_factory()
    insert_records(plain, sample_records)
    url = plain.test_client().get("/api/comments/", headers=headers).get_json()["p8n"]["next_url"]
    assert url == BASE + "?page=2"

    trusting = app_factory(COMMENTSVC_TRUSTED_PROXIES=1)
    insert_records(trusting, sample_records)
    url = trusting.test_client().get("/api/comments/", headers=headers).get_json()
    assert url["p8n"]["next_url"] == "https://public.example/api/comments/?page=2"


@pytest.mark.parametrize(("proto", "host", "expected"), [
    ("HTTPS", "public.example:443", "https://public.example/api/comments/?page=2"),
    ("Http", "public.example:80", "http://public.example/api/comments/?page=2"),
    ("ftp", "public.example", "http://public.example/api/comments/?page=2"),
    ("javascript", "public.example:8443", "http://public.example:8443/api/comments/?page=2"),
])
def test_a_trusted_proxys_scheme_counts_in_lower_case_and_only_http_or_https(
        app_factory, sample_records, proto, host, expected):
    trusting = app_factory(COMMENTSVC_TRUSTED_PROXIES=1)
    insert_records(trusting, sample_records)
    headers = {"X-Forwarded-Proto": proto, "X-Forwarded-Host": host}
    response = trusting.test_client().get("/api/comments/", headers=headers)
    assert response.get_json()["p8n"]["next_url"] == expected
