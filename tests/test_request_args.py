"""Reading the list filters: the schema's answers for a spelling are remembered, its
refusals are not, and two apps with different content types never share an answer."""

from __future__ import annotations

import pytest

from commentsvc.rules.comment_lists import CommentList
from commentsvc.rules.schemas import NO_TARGET, ListQuerySchema
from commentsvc.web import request_args
from commentsvc.web.errors import ValidationFailed


class FakeRequest:
    """Just enough of a Flask request for the readers: args with getlist."""

    def __init__(self, **args: str):
        self.args = FakeArgs(args)


class FakeArgs(dict):
    def getlist(self, name):
        return [self[name]] if name in self else []


def test_the_same_spelling_is_answered_from_memory():
    schema = ListQuerySchema(content_types=("users.user",))
    request = FakeRequest(content_type="users.user", object_id="7", page_size="5")
    before = request_args._loaded_filters.cache_info().hits
    first = request_args.list_filters(request, schema, 10, 100)
    second = request_args.list_filters(request, schema, 10, 100)
    assert first == second == (CommentList("users.user", 7), 5)
    assert request_args._loaded_filters.cache_info().hits == before + 1


def test_refusals_are_raised_every_time():
    schema = ListQuerySchema(content_types=("users.user",))
    for _ in range(2):
        with pytest.raises(ValidationFailed) as caught:
            request_args.list_filters(FakeRequest(object_id="x"), schema, 10, 100)
        assert "object_id" in caught.value.detail


def test_answers_belong_to_their_schema():
    request = FakeRequest(content_type="comics.comicpage")
    allowing = ListQuerySchema(content_types=("comics.comicpage",))
    refusing = ListQuerySchema(content_types=("users.user",))
    assert request_args.list_filters(request, allowing, 10, 100)[0] == CommentList(
        "comics.comicpage")
    with pytest.raises(ValidationFailed):
        request_args.list_filters(request, refusing, 10, 100)


def test_page_size_is_clamped_and_defaulted():
    schema = ListQuerySchema()
    assert request_args.list_filters(FakeRequest(page_size="500"), schema, 10, 100)[1] == 100
    assert request_args.list_filters(FakeRequest(), schema, 10, 100)[1] == 10


def test_page_size_clamps_whatever_its_length():
    schema = ListQuerySchema()
    for spelling in ("101", "9" * 19, "9" * 20, "9" * 5000, "0" * 50 + "101"):
        assert request_args.list_filters(FakeRequest(page_size=spelling), schema, 10, 100)[1] \
            == 100, spelling


def test_empty_filters_are_given_not_missing():
    request = FakeRequest(content_type="", object_id="", page="")
    assert request_args.last_given(request, "content_type") == ""
    assert request_args.last(request, "content_type") is None
    assert request_args.last_given(request, "page_size") is None
    with pytest.raises(ValidationFailed) as caught:
        request_args.list_filters(request, ListQuerySchema(content_types=("users.user",)),
                                  10, 100)
    assert caught.value.detail == {"content_type": ["This field may not be blank."],
                                   "object_id": ["This field may not be blank."]}


@pytest.mark.parametrize(("spelling", "object_id"), [
    ("17", 17), ("0017", 17), ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", NO_TARGET), ("0", NO_TARGET), ("-0", NO_TARGET),
    ("-9223372036854775808", NO_TARGET), ("1" * 25, NO_TARGET), ("9" * 5000, NO_TARGET),
])
def test_an_id_outside_1_to_2_63_is_the_list_of_no_target(spelling, object_id):
    request = FakeRequest(content_type="users.user", object_id=spelling)
    comments, _size = request_args.list_filters(
        request, ListQuerySchema(content_types=("users.user",)), 10, 100)
    assert comments == CommentList("users.user", object_id)
