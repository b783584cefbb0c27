"""The statements that tell every process when a list changed (PostgreSQL only): a trigger
on the lists' counter rows that notifies their key at commit, and what a process runs to
hear it (storage.list_versions)."""

from __future__ import annotations

# The channel the notifications go to; each one's payload is a list's key, or "*" (the
# counter rows were emptied at once: every list may have changed).
CHANNEL = "commentsvc_lists"

# How many of the two triggers exist: init-db and the commands that check the schema
# create them only when they are missing (replacing a trigger locks the counter rows
# against every read until the command's transaction ends).
TRIGGERS_PRESENT = """
    SELECT count(*) FROM pg_trigger
    WHERE tgrelid = to_regclass('commentsvc_list_count')
      AND tgname IN ('commentsvc_list_count_changed', 'commentsvc_list_count_emptied')
"""

# Created by init-db after schema.sql, where missing (safe to run again). A trigger
# fires in the writer's transaction; PostgreSQL sends its notifications when that commits,
# and never when it rolls back, and sends one of each payload per transaction.
CREATE_NOTIFY_TRIGGERS = (
    f"""
    CREATE OR REPLACE FUNCTION commentsvc_list_changed() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_LEVEL = 'STATEMENT' THEN
            PERFORM pg_notify('{CHANNEL}', '*');
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM pg_notify('{CHANNEL}', OLD.list_key);
        ELSE
            PERFORM pg_notify('{CHANNEL}', NEW.list_key);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    "DROP TRIGGER IF EXISTS commentsvc_list_count_changed ON commentsvc_list_count",
    """
    CREATE TRIGGER commentsvc_list_count_changed
        AFTER INSERT OR UPDATE OR DELETE ON commentsvc_list_count
        FOR EACH ROW EXECUTE FUNCTION commentsvc_list_changed()
    """,
    "DROP TRIGGER IF EXISTS commentsvc_list_count_emptied ON commentsvc_list_count",
    """
    CREATE TRIGGER commentsvc_list_count_emptied
        AFTER TRUNCATE ON commentsvc_list_count
        FOR EACH STATEMENT EXECUTE FUNCTION commentsvc_list_changed()
    """,
)

# Sent by init-db --drop before the tables go (dropping them notifies nothing).
EVERY_LIST_CHANGED = f"SELECT pg_notify('{CHANNEL}', '*')"
DROP_FUNCTION = "DROP FUNCTION IF EXISTS commentsvc_list_changed()"

# What a listening connection runs (in autocommit): listen first, then check that the
# triggers are there and enabled (a database init-db has not run on since they were
# added has none, and then no process may rely on hearing of changes).
LISTEN = f"LISTEN {CHANNEL}"
NAME_LISTENER = "SET application_name = 'commentsvc list changes'"
TRIGGERS_ENABLED = TRIGGERS_PRESENT + "  AND tgenabled IN ('O', 'A')\n"
