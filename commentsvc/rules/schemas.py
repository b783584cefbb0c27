"""Marshmallow schemas: what a comment looks like on the wire, and the list's query.

The field order is the interface's. What an anonymous or deleted comment hides is
decided in one place, ``ReplySchema.hide``; the derived fields call pure functions
from ``formatting``. Per-request display options travel in a marshmallow Context.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any, TypedDict, cast

from marshmallow import (
    EXCLUDE,
    Schema,
    ValidationError,
    fields,
    pre_dump,
    validates,
    validates_schema,
)
from marshmallow.experimental.context import Context

from commentsvc.rules import formatting, permissions
from commentsvc.rules.identifiers import INT64_MAX
from commentsvc.storage.store import Comment

if TYPE_CHECKING:
    from marshmallow.types import ErrorMessages

ANONYMOUS_AUTHOR = "Anonymous"


@dataclass(frozen=True)
class Display:
    """How this request shows comments: the time zone, default avatar and viewer."""

    tz: tzinfo
    default_avatar: str
    viewer: Any = None  # the signed-in user; None for a request without one


class Shown(TypedDict):
    """A comment as ``ReplySchema.hide`` hands it to the fields: what may be shown."""

    id: int
    author_id: int
    username: str | None
    avatar: str | None
    body: str
    date_added: datetime
    is_deleted: bool
    is_anonymous: bool
    is_read: bool
    replies: list[Comment] | None


def _display() -> Display:
    return Context.get()


class ReplySchema(Schema):
    """A comment inside its parent's ``replies``: every Comment field but ``replies``."""

    # A Method field's JSON type is given in its metadata, for the OpenAPI document.
    id = fields.Integer()
    author = fields.Method("get_author", metadata={
        "type": "string", "description": 'Display name; "Anonymous" when is_anonymous.'})
    body = fields.Method("get_body", metadata={
        "type": "string", "description": 'The text as safe HTML; "" when is_deleted.'})
    date_added = fields.Method("get_date_added", metadata={
        "type": "string", "pattern": r"^\d{2} [A-Z][a-z]{2}, \d{4}, \d{2}:\d{2} [AP]M$",
        "description": "DD Mon, YYYY, HH:MM AM|PM in the configured time zone.",
        "example": "07 Jan, 2023, 01:32 AM"})
    is_deleted = fields.Boolean()
    is_anonymous = fields.Boolean()
    is_read = fields.Boolean()
    author_url = fields.Method("get_author_url", metadata={
        "type": "string", "description": '/user/<name>/; "" when is_anonymous.'})
    author_avatar = fields.Method("get_author_avatar", metadata={
        "type": "string", "description": "/media/users/<name>/thumb/<file>, or the default."})
    can_delete = fields.Method("get_can_delete", metadata={"type": "boolean"})
    can_reply = fields.Method("get_can_reply", metadata={"type": "boolean"})

    @pre_dump
    def hide(self, comment: Comment, **_kwargs: Any) -> Shown:
        """Anonymous comments never send their author; deleted ones never their text."""
        return {
            "id": comment.id,
            "author_id": comment.author_id,
            "username": None if comment.is_anonymous else comment.username,
            "avatar": None if comment.is_anonymous else comment.avatar,
            "body": "" if comment.is_deleted else comment.body,
            "date_added": comment.date_added,
            "is_deleted": comment.is_deleted,
            "is_anonymous": comment.is_anonymous,
            "is_read": comment.is_read,
            "replies": comment.replies,
        }

    def get_author(self, shown: Shown) -> str:
        return ANONYMOUS_AUTHOR if shown["username"] is None else shown["username"]

    def get_body(self, shown: Shown) -> str:
        return formatting.render_body(shown["body"])

    def get_date_added(self, shown: Shown) -> str:
        return formatting.format_date(shown["date_added"], _display().tz)

    def get_author_url(self, shown: Shown) -> str:
        return "" if shown["username"] is None else formatting.author_url(shown["username"])

    def get_author_avatar(self, shown: Shown) -> str:
        default = _display().default_avatar
        if shown["username"] is None:
            return default
        return formatting.avatar_url(shown["username"], shown["avatar"], default)

    def get_can_delete(self, shown: Shown) -> bool:
        return permissions.can_delete(_display().viewer, shown["author_id"])

    def get_can_reply(self, shown: Shown) -> bool:
        return permissions.can_reply(_display().viewer, shown["is_deleted"])


class CommentSchema(ReplySchema):
    """A top-level list entry: a root carries its replies, a reply listed alone has null."""

    replies = fields.Method("get_replies", metadata={
        "type": ["array", "null"], "items": {"$ref": "#/components/schemas/Reply"},
        "description": "A root's replies ([] for none); null for a reply listed alone."})

    def get_replies(self, shown: Shown) -> list[dict[str, Any]] | None:
        if shown["replies"] is None:
            return None
        return cast(list[dict[str, Any]], REPLY_SCHEMA.dump(shown["replies"], many=True))


REPLY_SCHEMA = ReplySchema()
COMMENT_SCHEMA = CommentSchema()


def dump_comments(comments: list[Comment], display: Display) -> list[dict[str, Any]]:
    """The ``results`` of a list response."""
    with Context(display):
        return cast(list[dict[str, Any]], COMMENT_SCHEMA.dump(comments, many=True))


def check_content_type(value: str, content_types: tuple[str, ...]) -> None:
    """A content type must be one of the configured ones; the error names them all."""
    if value not in content_types:
        allowed = ", ".join(sorted(content_types))
        raise ValidationError(f'Unknown content type "{value}". Allowed values: {allowed}.')


BLANK = "This field may not be blank."
# What a list query's object_id becomes when the integer names no target (outside
# 1..2**63-1): no comment has it (writes and imports take ids from 1 up), so its list is
# empty, read like any other without a special case.
NO_TARGET = 0


def saturated(text: str) -> int:
    """An ASCII integer's value, held within -2**63..2**63 so its length costs nothing.

    >>> saturated("007"), saturated("-0"), saturated("9" * 30), saturated("-" + "9" * 30)
    (7, 0, 9223372036854775808, -9223372036854775808)
    """
    digits = text.removeprefix("-").lstrip("0")
    value = int(digits) if digits and len(digits) <= 19 else (2**63 if digits else 0)
    value = min(value, 2**63)
    return -value if text.startswith("-") else value


class QueryInteger(fields.Integer):
    """An integer of the list's query: ASCII digits with an optional minus, any length.

    Leading zeros are allowed; a plus sign, white space, underscores, a decimal point and
    non-ASCII digits are not (Python's int() takes all of those but the point). Its value
    is ``saturated``; an empty value is blank, not missing.
    """

    default_error_messages = {"invalid": "Not a valid integer.", "blank": BLANK}

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: Any) -> int:
        if value == "":
            raise self.make_error("blank")
        if not isinstance(value, str) or not _QUERY_INTEGER.fullmatch(value):
            raise self.make_error("invalid")
        return saturated(value)


class ObjectId(QueryInteger):
    """A target's id: an integer outside 1..2**63-1 names no target (``NO_TARGET``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: Any) -> int:
        number = super()._deserialize(value, attr, data, **kwargs)
        return number if 1 <= number <= INT64_MAX else NO_TARGET


_QUERY_INTEGER = re.compile(r"-?[0-9]+")
# A write's integer as a string: the same digits, and within 64 bits.
_INTEGER = re.compile(r"-?[0-9]{1,19}")


class ListQuerySchema(Schema):
    """The filters of GET /api/comments/; ``page`` and ``format`` are read elsewhere.

    A filter given empty is refused (400), never read as missing: a client that lost its
    id must not get the wider list.
    """

    class Meta:
        unknown = EXCLUDE

    content_type = fields.String(load_default=None)
    object_id = ObjectId(load_default=None)
    page_size = QueryInteger(load_default=None)

    def __init__(self, *, content_types: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.content_types = content_types

    @validates("content_type")
    def known_content_type(self, value: str | None, **_kwargs: Any) -> None:
        if value == "":
            raise ValidationError(BLANK)
        if value is not None:
            check_content_type(value, self.content_types)

    @validates_schema
    def object_needs_type(self, data: dict[str, Any], **_kwargs: Any) -> None:
        if data.get("object_id") is not None and data.get("content_type") is None:
            raise ValidationError("object_id needs content_type.", "object_id")

    @validates("page_size")
    def positive(self, value: int | None, **_kwargs: Any) -> None:
        if value is not None and value < 1:
            raise ValidationError("Ensure this value is greater than or equal to 1.")


# Field messages of the writes, in the wording the API uses for every field error.
_REQUIRED: ErrorMessages = {"required": "This field is required.",
                            "null": "This field may not be null."}


class WholeNumber(fields.Integer):
    """A JSON integer or a string of digits: no booleans, no fractions, no "+1"."""

    default_error_messages = {"invalid": "A valid integer is required."}

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str) or (
                isinstance(value, str) and not _INTEGER.fullmatch(value)):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class Text(fields.String):
    """A string that can be stored anywhere: no NUL characters."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if "\x00" in text:
            raise ValidationError("Null characters are not allowed.")
        return text


class NewCommentSchema(Schema):
    """The fields of POST /api/comments/; whether the target and parent exist is checked
    against the database when the comment is written."""

    class Meta:
        unknown = EXCLUDE

    content_type = fields.String(required=True, error_messages=_REQUIRED)
    object_id = WholeNumber(required=True, error_messages=_REQUIRED)
    body = Text(required=True, error_messages={**_REQUIRED, "invalid": "Not a valid string."})
    parent = WholeNumber(load_default=None, allow_none=True)
    is_anonymous = fields.Boolean(load_default=False, error_messages={
        "invalid": "Must be a valid boolean.", "null": _REQUIRED["null"]})

    def __init__(self, *, content_types: tuple[str, ...] = (), max_body_length: int = 5000,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.content_types = content_types
        self.max_body_length = max_body_length

    @validates("content_type")
    def known_content_type(self, value: str, **_kwargs: Any) -> None:
        check_content_type(value, self.content_types)

    @validates("body")
    def sized(self, value: str, **_kwargs: Any) -> None:
        if not value.strip():
            raise ValidationError("This field may not be blank.")
        if len(value) > self.max_body_length:
            raise ValidationError(
                f"Ensure this field has no more than {self.max_body_length} characters.")


class ReadFlagSchema(Schema):
    """The one field PATCH /api/comments/<id>/ changes; naming any other is an error."""

    class Meta:
        unknown = EXCLUDE

    is_read = fields.Boolean(required=True,
                             error_messages={**_REQUIRED, "invalid": "Must be a valid boolean."})

    @validates_schema(pass_original=True)
    def nothing_else(self, _data: dict[str, Any], original: dict[str, Any], **_kwargs: Any) -> None:
        others = sorted(set(original) - {"is_read"})
        if others:
            raise ValidationError({name: ["This field cannot be changed."] for name in others})
