"""For any list size, page size and page: the pages together hold every comment exactly
once, newest first, and each page's ``p8n`` agrees with an independent computation."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import Community, insert_records
from helpers import newest_first

BASE = "http://localhost/api/comments/"
PAGE_SIZE, MAX_PAGE_SIZE = 3, 8
# Every example gets a list of its own (a comic page id and comment ids never used before),
# since the app and its database live for the whole test.
_targets = itertools.count(1000)
_ids = itertools.count(10_000, 100)


@st.composite
def threads(draw) -> list[tuple[int, int | None]]:
    """Comments as (minute added, index of the root it replies to or None); few distinct
    minutes, so ties (broken by id) are common."""
    size = draw(st.integers(0, 30))
    comments: list[tuple[int, int | None]] = []
    for _ in range(size):
        roots = [i for i, (_, parent) in enumerate(comments) if parent is None]
        parent = draw(st.none() | st.sampled_from(roots)) if roots else None
        comments.append((draw(st.integers(0, 4)), parent))
    return comments


def load(app, comments: list[tuple[int, int | None]], id_order: list[int]) -> tuple[int, list]:
    """The comments stored on a fresh comic page with ids in ``id_order``'s order."""
    target, first = next(_targets), next(_ids)
    ids = [first + position for position in id_order]
    records = [{"type": "comment", "id": ids[i], "content_type": "comics.comicpage",
                "object_id": target, "parent_id": None if parent is None else ids[parent],
                "author_id": 1 + i % 3, "body": f"c{i}",
                "date_added": f"2024-05-01T10:{minute:02d}:00Z", "is_deleted": i % 7 == 3,
                "is_anonymous": i % 5 == 4, "is_read": False}
               for i, (minute, parent) in enumerate(comments)]
    insert_records(app, records)
    return target, records


def link(query: str, page: int) -> str:
    """A page's URL, written out here rather than by the service's helper."""
    return BASE + "?" + query + (f"&page={page}" if page > 1 else "")


def assert_p8n(p8n: dict, query: str, page: int, pages: int) -> None:
    assert p8n["num_pages"] == pages
    assert p8n["previous_url"] == (link(query, page - 1) if page > 1 else None)
    assert p8n["next_url"] == (link(query, page + 1) if page < pages else None)
    shown = p8n["page_links"]
    numbers = [entry["number"] for entry in shown if not entry["is_break"]]
    assert numbers[0] == 1 and numbers[-1] == pages and numbers == sorted(set(numbers))
    assert [entry["number"] for entry in shown if entry["is_active"]] == [page]
    assert {page - 1, page, page + 1} & set(range(1, pages + 1)) <= set(numbers)
    for before, after in itertools.pairwise(shown):
        assert not (before["is_break"] and after["is_break"])
        if not before["is_break"] and not after["is_break"]:
            assert after["number"] == before["number"] + 1  # no gap without a break
    for entry in shown:
        if entry["is_break"]:
            assert entry == {"url": None, "number": None, "is_active": False, "is_break": True}
        else:
            assert entry["url"] == link(query, entry["number"])


@pytest.fixture
def paging_app(app_factory):
    """An app with small pages and the community's users; one per test, not per example."""
    app = app_factory(COMMENTSVC_PAGE_SIZE=PAGE_SIZE, COMMENTSVC_MAX_PAGE_SIZE=MAX_PAGE_SIZE)
    Community(app)
    return app


@given(comments=threads(), id_order=st.randoms(use_true_random=False),
       page_size=st.none() | st.integers(1, MAX_PAGE_SIZE + 3), asked=st.integers(0, 12))
def test_pages_hold_every_comment_once_in_order(paging_app, comments, id_order, page_size,
                                                asked):
    app = paging_app
    order = list(range(len(comments)))
    id_order.shuffle(order)
    target, records = load(app, comments, order)
    expected = newest_first(records)
    size = min(page_size or PAGE_SIZE, MAX_PAGE_SIZE)
    pages = max(1, -(-len(expected) // size))
    query = f"content_type=comics.comicpage&object_id={target}" + (
        f"&page_size={page_size}" if page_size else "")
    client = app.test_client()

    seen, url, page = [], link(query, 1), 0
    while url:
        page += 1
        body = client.get(url).get_json()
        results = [entry["id"] for entry in body["results"]]
        assert len(results) == (size if page < pages else len(expected) - size * (pages - 1))
        assert_p8n(body["p8n"], query, page, pages)
        seen += results
        url = body["p8n"]["next_url"]
    assert page == pages
    assert seen == expected  # every comment, once, newest first (ties: higher id first)

    response = client.get(link(query, 1) + f"&page={asked}")
    if 1 <= asked <= pages:
        assert [e["id"] for e in response.get_json()["results"]] == \
            expected[(asked - 1) * size: asked * size]
    else:
        assert response.status_code == 404
        assert response.get_json() == {"detail": "Invalid page."}
    last = client.get(link(query, 1) + "&page=last").get_json()
    assert last["p8n"] == client.get(link(query, pages)).get_json()["p8n"]

