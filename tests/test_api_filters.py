"""The list's filters and page size at their edges: an empty filter never widens the list,
an integer id outside 1..2**63-1 names no target, and any page size above the maximum
is served the maximum."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from conftest import table_rows
from helpers import assert_error

URL = "/api/comments/"
BASE = "http://localhost/api/comments/"
BLANK = ["This field may not be blank."]
INVALID = ["Not a valid integer."]


def empty_page(query: str) -> dict:
    """Page 1 of a list without comments, as the service answers it for ``query``."""
    return {"results": [], "p8n": {
        "previous_url": None, "next_url": None,
        "page_links": [{"url": BASE + "?" + query, "number": 1, "is_active": True,
                        "is_break": False}],
        "num_pages": 1}}


@pytest.mark.parametrize(("query", "errors"), [
    ("content_type=users.user&object_id=", {"object_id": BLANK}),
    ("content_type=", {"content_type": BLANK}),
    ("content_type=&object_id=17", {"content_type": BLANK}),
    ("content_type=&object_id=", {"object_id": BLANK, "content_type": BLANK}),
    ("object_id=", {"object_id": BLANK}),
    # The last value counts, also when it is the empty one.
    ("content_type=users.user&object_id=17&object_id=", {"object_id": BLANK}),
    ("content_type=users.user&content_type=&object_id=17", {"content_type": BLANK}),
])
def test_an_empty_filter_is_400_not_the_wider_list(client, sample, query, errors):
    assert_error(client.get(URL + "?" + query), 400, errors)


def test_an_empty_filter_before_a_value_is_overridden_by_it(client, sample):
    response = client.get(URL + "?object_id=&content_type=users.user&object_id=17")
    assert response.status_code == 200
    assert [entry["id"] for entry in response.get_json()["results"]] == [1031, 1030, 1298]


@pytest.mark.parametrize(("query", "kept"), [
    ("page=", ""), ("page_size=", "page_size=&"), ("format=", "format=&"),
    ("page=&page_size=", "page_size=&"),
])
def test_other_empty_parameters_still_count_as_missing(client, sample, query, kept):
    response = client.get(URL + "?" + query)
    assert response.status_code == 200
    body = response.get_json()
    assert len(body["results"]) == 10  # the default page size, on page 1
    assert body["p8n"]["next_url"] == BASE + "?" + kept + "page=2"


@pytest.mark.parametrize("object_id", [
    "0", "-0", "000", "-1", "-17", "9223372036854775808", "-9223372036854775807",
    "-9223372036854775808", "-9223372036854775809", "1" * 25, "-" + "1" * 25, "9" * 5000,
    "0" * 30 + "9223372036854775808",
])
def test_an_integer_outside_1_to_2_63_names_no_target(client, sample, object_id):
    query = f"content_type=users.user&object_id={object_id}"
    response = client.get(URL + "?" + query)
    assert response.status_code == 200
    assert response.get_json() == empty_page(query)
    assert response.headers["ETag"] and response.headers["Allow"]
    assert_error(client.get(URL + "?" + query + "&page=2"), 404, "Invalid page.")
    assert client.get(URL + "?" + query + "&page=last").get_json() == empty_page(query)


@pytest.mark.parametrize(("object_id", "ids"), [
    ("17", [1031, 1030, 1298]),
    ("0017", [1031, 1030, 1298]),
    ("9223372036854775807", []),
    ("0" * 40 + "17", [1031, 1030, 1298]),
])
def test_in_range_ids_are_read_as_before(client, sample, object_id, ids):
    response = client.get(URL + f"?content_type=users.user&object_id={object_id}")
    assert response.status_code == 200
    assert [entry["id"] for entry in response.get_json()["results"]] == ids


# What an integer is, compared with Python's int() (which takes all of these but "1.0"
# and "1e3") and Django REST Framework's IntegerField (which also takes "1.0"): the
# service keeps its own stricter rule, ASCII digits with an optional minus.
@pytest.mark.parametrize("value", [
    "+17", " 17", "17 ", "\t17", "17\n", "1_7", "١٧", "１７", "17.0", "1.0", "1e3", "0x11",
    "--17", "-", "17-", "abc", "17%00",
])
def test_what_is_not_an_integer_stays_400(client, sample, value):
    response = client.get(URL, query_string={"content_type": "users.user", "object_id": value})
    assert_error(response, 400, {"object_id": INVALID})
    response = client.get(URL, query_string={"page_size": value})
    assert_error(response, 400, {"page_size": INVALID})


def test_a_post_to_an_id_outside_the_range_stays_400(app, client, community):
    before = table_rows(app)
    for object_id in ("0", "-1", "9223372036854775808", "1" * 25, -1, 2**63, 10**30):
        response = client.post(URL, headers=community.auth("ann"), json={
            "content_type": "users.user", "object_id": object_id, "body": "hi"})
        assert response.status_code == 400, object_id
        assert list(response.get_json()) == ["object_id"]
    assert table_rows(app) == before


@pytest.mark.parametrize("page_size", [
    "11", "100", "101", "9" * 19, "9" * 20, "9" * 5000, "00000000000000000000000101",
])
def test_any_page_size_above_the_maximum_is_served_the_maximum(app_factory, sample_records,
                                                               page_size):
    from conftest import insert_records

    app = app_factory(COMMENTSVC_MAX_PAGE_SIZE=11)
    insert_records(app, sample_records)
    body = app.test_client().get(URL + f"?page_size={page_size}").get_json()
    assert len(body["results"]) == 11
    assert body["p8n"]["next_url"] == BASE + f"?page_size={quote(page_size)}&page=2"


@pytest.mark.parametrize("page_size", ["0", "-0", "-1", "-" + "9" * 30, "000"])
def test_a_page_size_below_1_stays_400(client, page_size):
    assert_error(client.get(URL + f"?page_size={page_size}"), 400,
                 {"page_size": ["Ensure this value is greater than or equal to 1."]})


def test_a_refusals_fields_come_in_the_schemas_order(client, sample):
    """content_type's check runs after object_id's type check; the answer still lists
    the fields as the schema declares them, as Django REST Framework does."""
    response = client.get(URL + "?object_id=abc&content_type=x&page_size=0")
    assert response.status_code == 400
    assert list(response.get_json()) == ["content_type", "object_id", "page_size"]
