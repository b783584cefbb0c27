"""SQL of a batch of posts written together (storage.posting.write_batch): the checks and
the state every post of the batch needs read once, then every row written in one
statement per table. PostgreSQL takes a batch's rows as arrays (``unnest``); SQLite runs
the one-row form once per row, in process."""

from __future__ import annotations

from sqlalchemy import DateTime, bindparam, text

from commentsvc.rules.identifiers import PAGE_TYPE, USER_TYPE
from commentsvc.storage.queries.prepared import Prepared

# Everything deciding a batch of posts needs, in one statement (one round trip), a row
# per fact, told apart by ``kind``:
#   author  id, name = username, text = avatar          (the authors' rows)
#   user    id                                          (target users that exist)
#   page    id                                          (target comic pages that exist)
#   parent  id, name = content_type, number = object_id, root = its parent (NULL: it is
#           a root), flag = is_deleted                  (the replies' parents)
#   list    name = list key, number = size              (the lists the batch adds to)
#   top     id = the highest comment id, moment = the date of the site's newest comment
#           (NULL on an empty site)
#   key     id = its user, name = a sign-in key's digest  (the keys still kept, of the
#           posts whose key was not read before: web.known_keys)
# Primary keys throughout, and the site position index for the newest comment.
_FACTS_BODY = """
    SELECT 'author' AS kind, id, username AS name, avatar AS text,
           CAST(NULL AS BIGINT) AS number, CAST(NULL AS BIGINT) AS root,
           CAST(NULL AS BOOLEAN) AS flag, CAST(NULL AS TIMESTAMP) AS moment
    FROM commentsvc_user WHERE id {author_ids}
    UNION ALL
    SELECT 'user', id, NULL, NULL, NULL, NULL, NULL, NULL
    FROM commentsvc_user WHERE id {user_ids}
    UNION ALL
    SELECT 'page', id, NULL, NULL, NULL, NULL, NULL, NULL
    FROM commentsvc_comicpage WHERE id {page_ids}
    UNION ALL
    SELECT 'parent', id, content_type, NULL, object_id, parent_id, is_deleted, NULL
    FROM commentsvc_comment WHERE id {parent_ids}
    UNION ALL
    SELECT 'list', NULL, list_key, NULL, n, NULL, NULL, NULL
    FROM commentsvc_list_count WHERE list_key {list_keys}
    UNION ALL
    SELECT 'key', user_id, digest, NULL, NULL, NULL, NULL, NULL
    FROM commentsvc_token WHERE digest {digests}
    UNION ALL
    SELECT 'top', (SELECT COALESCE(MAX(id), 0) FROM commentsvc_comment), NULL, NULL, NULL,
           NULL, NULL,
           (SELECT date_added FROM commentsvc_comment
            WHERE site_pos = (SELECT n FROM commentsvc_list_count WHERE list_key = 'site'))
"""
_FACTS_PARAMETERS = {"author_ids": "bigint[]", "user_ids": "bigint[]", "page_ids": "bigint[]",
                     "parent_ids": "bigint[]", "list_keys": "text[]", "digests": "text[]"}

# As one statement of SQLAlchemy's, each set of ids or keys an expanding IN list (SQLite).
BATCH_FACTS = text(_FACTS_BODY.format(**{name: f"IN :{name}" for name in _FACTS_PARAMETERS})
                   ).bindparams(*(bindparam(name, expanding=True) for name in _FACTS_PARAMETERS)
                                ).columns(moment=DateTime())

# The content types whose targets BATCH_FACTS looks up, and the kind of row it gives.
TARGET_KINDS = {USER_TYPE: "user", PAGE_TYPE: "page"}
TARGET_PARAMETERS = {USER_TYPE: "user_ids", PAGE_TYPE: "page_ids"}

_COMMENT_COLUMNS = """
    id, content_type, object_id, parent_id, author_id, body, date_added, is_deleted,
    is_anonymous, is_read, site_pos, kind_pos, target_pos, shown, shown_key
"""

# Comments with their positions and stored renders, one row (SQLite, once per row).
INSERT_COMMENT = text(f"""
    INSERT INTO commentsvc_comment ({_COMMENT_COLUMNS})
    VALUES (:id, :content_type, :object_id, :parent_id, :author_id, :body, :date_added,
            FALSE, :is_anonymous, FALSE, :site_pos, :kind_pos, :target_pos, :shown,
            :shown_key)
""").bindparams(bindparam("date_added", type_=DateTime()))

# A list that gained comments: its size and version go up (primary key).
GROW_LIST = text("""
    INSERT INTO commentsvc_list_count (list_key, n, version)
    VALUES (:list_key, :added, :first_version)
    ON CONFLICT (list_key) DO UPDATE
    SET n = commentsvc_list_count.n + excluded.n, version = commentsvc_list_count.version + 1
""")

# BATCH_FACTS for PostgreSQL, each set an array.
BATCH_FACTS_PREPARED = Prepared(
    "commentsvc_batch_facts",
    _FACTS_BODY.format(**{name: f"= ANY(:{name})" for name in _FACTS_PARAMETERS}),
    _FACTS_PARAMETERS)

# A whole batch written in one statement (PostgreSQL): the comments (as INSERT_COMMENT),
# their lists grown (as GROW_LIST) and their events numbered upwards from the newest (as
# queries.outbox.INSERT_EVENT), each parameter an array with one entry per row.
WRITE_BATCH = Prepared("commentsvc_write_batch", f"""
    WITH comments AS (
        INSERT INTO commentsvc_comment ({_COMMENT_COLUMNS})
        SELECT id, content_type, object_id, parent_id, author_id, body, date_added, FALSE,
               is_anonymous, FALSE, site_pos, kind_pos, target_pos, shown, shown_key
        FROM unnest(:id, :content_type, :object_id, :parent_id, :author_id, :body,
                    :date_added, :is_anonymous, :site_pos, :kind_pos, :target_pos, :shown,
                    :shown_key)
             AS v (id, content_type, object_id, parent_id, author_id, body, date_added,
                   is_anonymous, site_pos, kind_pos, target_pos, shown, shown_key)
    ), lists AS (
        INSERT INTO commentsvc_list_count (list_key, n, version)
        SELECT list_key, added, :first_version
        FROM unnest(:list_key, :added) AS v (list_key, added)
        ON CONFLICT (list_key) DO UPDATE
        SET n = commentsvc_list_count.n + excluded.n,
            version = commentsvc_list_count.version + 1
    )
    INSERT INTO commentsvc_event (id, event_uid, event_type, comment_id, created, payload)
    SELECT top.id + v.n, v.uid, v.event_type, v.comment_id, v.created, v.payload
    FROM (SELECT COALESCE(MAX(id), 0) AS id FROM commentsvc_event) AS top,
         unnest(:uid, :event_type, :event_comment_id, :created, :payload)
         WITH ORDINALITY AS v (uid, event_type, comment_id, created, payload, n)
""", {"id": "bigint[]", "content_type": "varchar(100)[]", "object_id": "bigint[]",
      "parent_id": "bigint[]", "author_id": "bigint[]", "body": "text[]",
      "date_added": "timestamp[]", "is_anonymous": "boolean[]", "site_pos": "bigint[]",
      "kind_pos": "bigint[]", "target_pos": "bigint[]", "shown": "text[]",
      "shown_key": "text[]", "list_key": "varchar(200)[]", "added": "bigint[]",
      "uid": "varchar(36)[]", "event_type": "varchar(40)[]", "event_comment_id": "bigint[]",
      "created": "timestamp[]", "payload": "text[]", "first_version": "bigint"})
