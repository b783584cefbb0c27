"""The standalone service's /media/: every user's avatar thumbnail, drawn on request.

The standalone service keeps no uploaded files, so ``/media/users/<name>/thumb/<file>``
(the author_avatar of a user with an avatar) answers the identicon of ``<name>`` whatever
the file is called. The picture depends on the name only, so it is cached by clients
for a day and revalidated with its ETag. A host site serves its own media; this
blueprint is registered by the standalone app only.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from flask import Blueprint, Response, request
from flask.blueprints import BlueprintSetupState
from werkzeug.routing import PathConverter
from werkzeug.wrappers import Response as BaseResponse

from commentsvc.standalone import avatars
from commentsvc.web.responses import NOSNIFF


class NameConverter(PathConverter):
    """Werkzeug's ``path`` that also takes line breaks: its ``.`` stops at one, so a name
    holding one (an import may store it) had an author_avatar that answered 404."""

    regex = r"[^/][\s\S]*?"


# The converter a user's name in a path goes through, registered in the app first.
NAME_CONVERTER = "commentsvc_name"


def _register_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters[NAME_CONVERTER] = NameConverter


media_api = Blueprint("commentsvc_media", __name__)
media_api.record(_register_converter)

# A picture never changes for a name (VERSION aside): a day of reuse, then a 304.
CACHE_CONTROL = "public, max-age=86400"


@media_api.get(f"/media/users/<{NAME_CONVERTER}:name>/thumb/<{NAME_CONVERTER}:file>")
def user_thumbnail(name: str, file: str) -> BaseResponse:
    """The 64x64 PNG of the user ``name`` (percent-decoded, slashes and all).

    The name and the file name may both hold a slash (an avatar ``avatars/ann.png``), which
    the decoded path no longer tells from the ones between them: the name is read from the
    raw path where the server passes it on (gunicorn, Werkzeug), else the shortest name
    the path allows is taken."""
    name = _raw_name(name, file) or name
    tag = f"{avatars.VERSION}-{avatars.name_digest(name).hex()[:32]}"
    response = Response(avatars.identicon(name), mimetype="image/png",
                        headers={"Cache-Control": CACHE_CONTROL, **NOSNIFF})
    response.set_etag(tag)
    return response.make_conditional(request)


_USERS = "/media/users/"


def _raw_name(name: str, file: str) -> str | None:
    """The name as the raw request path spells it (its first segment after /media/users/,
    decoded), if that path is this request's; None where there is none to read."""
    raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or ""
    path = urlsplit(raw).path if "://" in raw.split("?", 1)[0] else raw.split("?", 1)[0]
    start = path.find(_USERS)
    if start < 0:
        return None
    spelled, thumb, rest = path[start + len(_USERS):].partition("/thumb/")
    if not thumb or "/" in spelled:
        return None
    candidate = unquote(spelled)
    return candidate if f"{candidate}/thumb/{unquote(rest)}" == f"{name}/thumb/{file}" else None
