"""Schemathesis against the running server: requests generated from its OpenAPI schema to every
route, and every response checked with all of schemathesis's checks (no 5xx; bodies, statuses,
content types, headers and server-sent events as documented; schema-valid data accepted, invalid
data rejected; the Allow header of a 405).

The schema is the app's own, built at collection time (schemathesis's lazy fixture loader does not
run on this pytest), and the first test checks that the running server serves exactly it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from bottleneck_oracle.config import Settings
from bottleneck_oracle.server import create_app

MAX_EXAMPLES = 8
OPENAPI = create_app(Settings(home=Path("never-opened"), workers=1)).openapi()  # no lifespan: no I/O
# What a schema cannot say: whether a file holds a trace, an edit parses, a model name is known, a
# prefix names one trace. For those the service layer answers 400 with one line, and schema-valid
# data may get it.
_MEANING = {("/api/traces", "POST"), ("/api/traces/{ref}/whatif", "POST"), ("/api/ask", "POST"),
            ("/api/diff", "GET")}
CONFIG = SchemathesisConfig.from_dict({"operations": [
    {"include-path": path, "include-method": method,
     "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "404"]}}}
    for path, method in sorted(_MEANING)]})
schema = schemathesis.openapi.from_dict(OPENAPI, config=CONFIG)


def test_the_server_serves_the_schema_under_test(server: str) -> None:
    assert httpx.get(f"{server}/openapi.json").json() == OPENAPI
    assert set(OPENAPI["paths"]) >= {"/api/health", "/api/traces", "/api/traces/{ref}/steps/{step}/timeline",
                                     "/api/traces/{ref}/whatif", "/api/ask"}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_route_answers_within_its_schema(case: Any, server: str, uploaded: dict[str, Any]) -> None:
    case.call_and_validate(base_url=server, timeout=120)
