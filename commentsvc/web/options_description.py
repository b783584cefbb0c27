"""What OPTIONS says about an endpoint, and the POST fields a signed-in user may send.

The fields are read from the schema that checks a new comment, so the description (and
the browsable page's form, built from it) cannot drift from what POST accepts.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields

from commentsvc.rules.schemas import Text
from commentsvc.web.negotiation import RENDERS
from commentsvc.web.request_body import FORM_TYPES

PARSES = ["application/json", *FORM_TYPES]

# Most specific first: WholeNumber is an Integer, Text a String.
_TYPES = ((fields.Boolean, "boolean"), (fields.Integer, "integer"), (fields.String, "string"))


def describe(name: str, description: str, post_schema: Schema | None = None) -> dict[str, Any]:
    """The OPTIONS body: name, description, renders, parses, and the POST fields when a
    ``post_schema`` is given (for a signed-in user only)."""
    body: dict[str, Any] = {"name": name, "description": description,
                            "renders": list(RENDERS), "parses": list(PARSES)}
    if post_schema is not None:
        body["actions"] = {"POST": field_descriptions(post_schema)}
    return body


def field_descriptions(schema: Schema) -> dict[str, dict[str, Any]]:
    """Each field of ``schema`` as Django REST Framework's metadata describes one.

    ``choices`` come from the schema's ``content_types`` (what ``content_type`` is checked
    against) and ``max_length`` from its ``max_body_length`` (what a Text body is checked
    against), so a setting changes the description with the check.
    """
    described = {}
    for name, field in schema.fields.items():
        info: dict[str, Any] = {"type": _type_of(field), "required": field.required,
                                "read_only": False, "label": name.replace("_", " ").capitalize()}
        if name == "content_type" and (content_types := getattr(schema, "content_types", None)):
            info["choices"] = [{"value": value, "display_name": value}
                               for value in content_types]
        if isinstance(field, Text) and (max_length := getattr(schema, "max_body_length", None)):
            info["max_length"] = max_length
        described[name] = info
    return described


def _type_of(field: fields.Field[Any]) -> str:
    for kind, name in _TYPES:
        if isinstance(field, kind):
            return name
    return "field"
