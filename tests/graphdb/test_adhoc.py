"""Ad-hoc read-only Cypher: the check refuses writes however they are spelled, rows are capped, and
the real server's read path refuses a write that slips past the check."""

from __future__ import annotations

import pytest

from bottleneck_oracle.errors import QueryError
from bottleneck_oracle.graphdb import Capability, GraphStore
from bottleneck_oracle.graphdb.adhoc import MAX_LIMIT, check_read_only, limit_rows, run_read_only
from bottleneck_oracle.graphdb.queries import Mode, Query
from tests.graphdb.conftest import GPT, LoadedTrace


@pytest.mark.parametrize(("text", "word"), [
    ("CREATE (n:Op {name: 'x'})", "CREATE"),
    ("MATCH (t:Trace) MERGE (t)-[:X]->(:Y)", "MERGE"),
    ("MATCH (t:Trace) SET t.name = 'x'", "SET"),
    ("MATCH (o:Op) DELETE o", "DELETE"),
    ("MATCH (o:Op) detach delete o", "DELETE"),
    ("MATCH (o:Op) REMOVE o.name", "REMOVE"),
    ("DROP INDEX op_key", "DROP"),
    ("LOAD CSV FROM 'file:///x.csv' AS row RETURN row", "LOAD CSV"),
    ("load  csv from 'file:///x.csv' as row return row", "LOAD CSV"),
    ("MATCH (o:Op) FOREACH (x IN [1] | SET o.y = x)", "FOREACH"),
    ("MATCH (n) /* // */ DELETE n", "DELETE"),  # a '//' inside a block comment hides nothing
    ("MATCH (n {name: 'it\\'s'}) Create (m)", "CREATE"),  # an escaped quote does not end the string
    ("CALL db.create.setNodeVectorProperty(n, 'e', [1.0])", "db.create.setNodeVectorProperty"),
    ("CALL db.idx.vector.createNodeIndex('Op', 'e', 3)", "allow-list"),
    ("CALL db.idx.fulltext.drop('Op')", "db.idx.fulltext.drop"),
    ("CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DELETE n', {})", "apoc.periodic.iterate"),
    ("CALL apoc.meta.stats()", "apoc.meta.stats"),
    ("RETURN apoc.cypher.runFirstColumnSingle('MATCH (n) RETURN n', {})", "apoc"),
    ("CALL dbms.listConfig()", "dbms.listConfig"),
    ("CALL GRAPH.QUERY('g', 'x')", "GRAPH.QUERY"),
    ("CALL `db`.`labels`()", "quoted"),
    ("CALL db.awaitIndexes()", "allow-list"),
    ("SHOW USERS", "SHOW"),
    ("MATCH (n) RETURN n; MATCH (m) RETURN m", "one statement"),
    ("", "empty"),
])
def test_check_read_only_refuses_writes_and_admin(text: str, word: str) -> None:
    with pytest.raises(QueryError) as refused:
        check_read_only(text)
    message = str(refused.value)
    assert "\n" not in message and word.lower() in message.lower(), message


@pytest.mark.parametrize("text", [
    "MATCH (n {name: 'CREATE TABLE; DROP'}) RETURN n.name",  # words and ';' inside a string literal
    "MATCH (n:`DELETE`) RETURN n",  # a quoted name
    "MATCH (n) RETURN n // then DELETE n",
    "MATCH (n) /* SET n.x = 1 */ RETURN n.created_at, n.offset",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.idx.vector.queryNodes('Finding', 'embedding', 3, vecf32($v)) YIELD node RETURN node.key",
    "MATCH (t:Trace) CALL { WITH t MATCH (s:Step {trace: t.id}) RETURN count(s) AS n } RETURN t.id, n",
    "MATCH (n) RETURN n;",
])
def test_check_read_only_allows_reads(text: str) -> None:
    check_read_only(text)


def test_limit_rows_injects_and_caps() -> None:
    assert limit_rows("MATCH (o:Op) RETURN o.name", 50) == "MATCH (o:Op) RETURN o.name\nLIMIT 50"
    assert limit_rows("MATCH (o:Op) RETURN o.name ORDER BY o.name limit 5000;", 50).endswith("limit 50")
    assert limit_rows("MATCH (o:Op) RETURN o.name LIMIT 10", 50) == "MATCH (o:Op) RETURN o.name LIMIT 10"
    assert limit_rows("MATCH (o:Op) WITH o LIMIT 900 RETURN o.name", 50).endswith("RETURN o.name\nLIMIT 50")
    assert limit_rows("MATCH (o {name: 'RETURN x'}) RETURN o // LIMIT 3", 50).endswith("\nLIMIT 50")
    assert limit_rows("CALL db.labels()", 50) == "CALL db.labels()"  # no RETURN: cut after the query


def test_run_read_only_returns_capped_rows(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    gpt = loaded[GPT.name]
    rows = run_read_only(store, "MATCH (s:Step {trace: $trace}) RETURN s.step AS step, s.rank AS rank "
                         "ORDER BY step, rank", params={"trace": gpt.trace_id}, limit=3)
    assert rows == [{"step": 2, "rank": 0}, {"step": 2, "rank": 1}, {"step": 3, "rank": 0}]
    ops = run_read_only(store, "MATCH (o:Op {trace: $trace}) RETURN o.idx AS idx LIMIT 100000",
                        params={"trace": gpt.trace_id}, limit=10 * MAX_LIMIT)
    assert len(ops) == MAX_LIMIT
    labels = run_read_only(store, "CALL db.labels()", limit=2)
    assert len(labels) == 2


def test_run_read_only_reports_a_syntax_error_on_one_line(store: GraphStore, loaded: dict[str, LoadedTrace]) -> None:
    with pytest.raises(QueryError) as bad:
        run_read_only(store, "MATCH (n RETURN n")
    assert "\n" not in str(bad.value) and "adhoc" in str(bad.value)


def test_run_read_only_stops_at_its_time_limit(store: GraphStore) -> None:
    with pytest.raises(QueryError) as slow:
        run_read_only(store, "UNWIND range(1, 200000000) AS x RETURN count(x) AS n", timeout_ms=10)
    assert "\n" not in str(slow.value) and "time" in str(slow.value).lower()


def test_the_read_path_refuses_a_write_that_slips_past_the_check(store: GraphStore,
                                                                 loaded: dict[str, LoadedTrace]) -> None:
    """A hand-built query marked READ that writes: the server's read-only path refuses it."""
    assert Capability.READ_ONLY_ENFORCED in store.capabilities
    sneaky = Query(name="sneaky", text="MATCH (t:Trace) SET t.name = 'pwned' RETURN t.name AS name",
                   mode=Mode.READ, backend=None, params=(), returns=("name",), summary="", guarded=False)
    with pytest.raises(QueryError) as refused:
        store.read(sneaky, timeout_ms=5000)
    assert "\n" not in str(refused.value)
    names = {r["name"] for r in run_read_only(store, "MATCH (t:Trace) RETURN t.name AS name")}
    assert "pwned" not in names and GPT.name in names
