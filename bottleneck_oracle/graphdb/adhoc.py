"""Read-only ad-hoc Cypher, for the agent's ``cypher`` tool: checked, capped, timed, and run where
the server itself refuses writes.

The check reads the text with its string literals, quoted names and comments blanked out (one
left-to-right scan, so a ``//`` inside a ``/* */`` comment or a quote inside a string cannot hide
code), then refuses write clauses (``queries.has_write_clause``), admin commands, a call of any
procedure not on a short allow-list of read procedures, and more than one statement. What passes
runs on the store's read path (``GRAPH.RO_QUERY`` on FalkorDB, a read transaction on Neo4j), so a
write that slipped past the check is still refused, by the server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bottleneck_oracle.errors import QueryError
from bottleneck_oracle.graphdb.queries import Mode, Query, has_write_clause
from bottleneck_oracle.graphdb.store import GraphStore
from bottleneck_oracle.graphdb.types import Row

__all__ = ["READ_PROCEDURES", "MAX_LIMIT", "check_read_only", "limit_rows", "run_read_only"]

# procedures a read-only query may CALL (compared case-insensitively): schema listings and index reads
READ_PROCEDURES = frozenset({
    "db.labels", "db.relationshiptypes", "db.propertykeys", "db.indexes", "db.constraints",
    "db.idx.vector.querynodes", "db.index.vector.querynodes", "db.idx.fulltext.querynodes",
    "db.index.fulltext.querynodes",
})
MAX_LIMIT = 1000  # the most rows an ad-hoc query may ask for, whatever ``limit`` says
# statements that administer the server, not the graph (Neo4j's admin commands)
_ADMIN = frozenset({"ALTER", "GRANT", "DENY", "REVOKE", "RENAME", "TERMINATE", "START", "STOP", "SHOW", "USE",
                    "ENABLE", "DEALLOCATE", "REALLOCATE", "DRYRUN"})
_FORBIDDEN_NAMESPACES = ("apoc.", "dbms.", "graph.")  # APOC can run writes even from a function
_WRITE_WORDS = ("CREATE", "MERGE", "SET", "DELETE", "REMOVE", "DROP", "FOREACH", "LOAD")
_WORD = re.compile(r"[A-Za-z_][\w.]*")
_CALL = re.compile(r"\bCALL\b\s*([A-Za-z_][\w.]*)?", re.IGNORECASE)
_RETURN = re.compile(r"\bRETURN\b", re.IGNORECASE)
_LIMIT = re.compile(r"\bLIMIT\b\s*(\d+)?", re.IGNORECASE)
_NAME = "adhoc"


def _mask(text: str) -> str:
    """``text`` with string literals, quoted names and comments replaced by spaces (same length)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" and c != "`" else 1
            end = min(j + 1, n)
            out[i + 1:end - 1] = " " * max(end - i - 2, 0)
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = " " * (end - i)
            i = end
        else:
            i += 1
    return "".join(out)


def _refusal(code: str) -> str | None:
    """Why ``code`` (masked, one statement) is not read-only, or None."""
    words = _WORD.findall(code)
    if has_write_clause(code):
        word = next((w for w in words if any(p.upper() in _WRITE_WORDS for p in w.split("."))), "")
        if "." in word:
            return f"it calls {word}, which writes"
        return f"it holds {'LOAD CSV' if word.upper() == 'LOAD' else word.upper() or 'a write clause'}, which writes"
    if words and words[0].upper() in _ADMIN:
        return f"{words[0].upper()} is an administration command"
    for word in words:
        if word.lower().startswith(_FORBIDDEN_NAMESPACES):
            return f"{word} is not a read procedure"
    for match in _CALL.finditer(code):
        name = match.group(1)
        rest = code[match.end():].lstrip()
        if name is None:
            if rest.startswith(("{", "(")):
                continue  # a subquery: its clauses were checked with the rest
            return "CALL of a quoted or unnamed procedure"
        if name.lower() not in READ_PROCEDURES:
            return f"CALL {name} is not on the allow-list of read procedures ({', '.join(sorted(READ_PROCEDURES))})"
    return None


def _statement(text: str) -> str:
    """The one statement of ``text``, masked, without a trailing ``;``."""
    code = _mask(text).rstrip()
    if code.endswith(";"):
        code = code[:-1].rstrip()
    if ";" in code:
        raise QueryError("ad-hoc Cypher refused: one statement only (it holds a ';')")
    if not code.strip():
        raise QueryError("ad-hoc Cypher refused: the query is empty")
    return code


def check_read_only(text: str) -> None:
    """Refuses Cypher that could write or administer the database.

    Refused: CREATE, MERGE, SET, DELETE (and DETACH DELETE), REMOVE, DROP, FOREACH, LOAD CSV,
    admin commands (SHOW, GRANT, ALTER, ...), APOC, ``dbms.*`` and ``GRAPH.*``, a CALL of any
    procedure not in ``READ_PROCEDURES``, and more than one statement. Words inside string
    literals, quoted names and comments do not count.

    Raises:
        QueryError: a one-line reason.
    """
    reason = _refusal(_statement(text))
    if reason is not None:
        raise QueryError(f"ad-hoc Cypher refused: {reason}; the cypher tool only reads")


def limit_rows(text: str, limit: int) -> str:
    """``text`` with a row limit: ``LIMIT limit`` added after its last RETURN when it has none, and
    a larger literal LIMIT lowered to ``limit``. A query with no RETURN (a lone CALL) is unchanged:
    ``run_read_only`` cuts its rows instead.

    Raises:
        QueryError: ``text`` is more than one statement, or empty.
    """
    code = _statement(text)
    body = text[:len(code)]
    returns = list(_RETURN.finditer(code))
    if not returns:
        return body
    tail = returns[-1].end()
    match = next(iter(_LIMIT.finditer(code, tail)), None)
    if match is None:
        return f"{body}\nLIMIT {limit}"
    if match.group(1) is not None and int(match.group(1)) > limit:
        return f"{body[:match.start(1)]}{limit}{body[match.end(1):]}"
    return body


def run_read_only(store: GraphStore, text: str, *, params: Mapping[str, Any] | None = None, limit: int = 200,
                  timeout_ms: int = 5000) -> list[Row]:
    """Runs ad-hoc read-only Cypher: checked (``check_read_only``), limited to ``limit`` rows
    (at most ``MAX_LIMIT``), stopped by the server after ``timeout_ms``, on the read-only path.

    Args:
        store (GraphStore): the database.
        text (str): one Cypher statement.
        params (Mapping[str, Any] | None): its ``$parameters``.
        limit (int): the most rows returned.
        timeout_ms (int): the server's time limit for the query.

    Returns:
        the rows, at most ``limit``.

    Raises:
        QueryError: one line: refused by the check, or by the server (a write, a syntax error,
            a timeout).
    """
    if limit < 1 or timeout_ms < 1:
        raise ValueError(f"limit and timeout_ms must be positive, not {limit} and {timeout_ms}")
    limit = min(int(limit), MAX_LIMIT)
    check_read_only(text)
    params = dict(params or {})
    query = Query(name=_NAME, text=limit_rows(text, limit), mode=Mode.READ, backend=None,
                  params=tuple(params), returns=(), summary="ad-hoc read-only Cypher", guarded=False)
    return store.read(query, params, timeout_ms=int(timeout_ms))[:limit]
