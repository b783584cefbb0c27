"""SQL injection attempts shared by the security tests and the request fuzzer.

Each would change or reveal data if it reached SQL as text: quoting breakouts, stacked
statements, UNIONs over the token table, comments, PostgreSQL casts and sleeps, SQLite
functions, and encoded or NUL-prefixed variants.
"""

INJECTIONS = [
    "' OR '1'='1",
    "' OR 1=1 --",
    "1 OR 1=1",
    '" OR ""="',
    "1; DROP TABLE commentsvc_comment; --",
    "'); DELETE FROM commentsvc_comment; --",
    "1' UNION SELECT digest, user_id FROM commentsvc_token --",
    "1) UNION ALL SELECT NULL,NULL,NULL--",
    "users.user' OR content_type LIKE '%",
    "comics.comicpage'; UPDATE commentsvc_user SET is_staff = true; --",
    "1; SELECT pg_sleep(5); --",
    "1::text",
    "sqlite_version()",
    "%27%20OR%201%3D1",
    "\\'; SELECT 1; --",
    "admin'--",
    "' OR 'x'='x'\x00",
    "1 AND (SELECT COUNT(*) FROM commentsvc_token) > 0",
]
