"""What names a target and a row, in every layer: the content types whose targets the
service keeps itself, and the range of ids."""

from __future__ import annotations

# A user's profile and a comic page: the service keeps both kinds of target (commentsvc_user,
# commentsvc_comicpage). A host may configure other types (CONTENT_TYPES, TARGET_EXISTS).
USER_TYPE = "users.user"
PAGE_TYPE = "comics.comicpage"
BUILT_IN_CONTENT_TYPES = (USER_TYPE, PAGE_TYPE)

# The largest id of a user, comic page, comment or host object (BIGINT's maximum); ids
# start at 1.
INT64_MAX = 2**63 - 1


def id_of_digits(digits: str) -> int | None:
    """The id a run of ASCII digits names (leading zeros allowed), or None where it can
    name nothing (0, or past INT64_MAX), without converting a run too long to be one.

    >>> id_of_digits("007"), id_of_digits("0"), id_of_digits(str(INT64_MAX + 1))
    (7, None, None)
    """
    significant = digits.lstrip("0")
    if not significant or len(significant) > len(str(INT64_MAX)):
        return None
    number = int(significant)
    return number if number <= INT64_MAX else None
