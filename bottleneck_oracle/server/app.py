"""The HTTP API of ``oracle serve`` over the service layer, and the page it serves.

Each route parses its input, calls one function of ``workspace/`` (or the agent's ``Conversation``
for ``/api/ask``) and writes the result as JSON; nothing here decides anything about a trace.
Errors are ``{"detail": one line}``: bad input 400, a trace, step or rank that is not there 404, a
graph database or chat model that is down 503. Traces are named by id, id prefix or name, never by a
path on the server. With a token, every ``/api`` request carries ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import hmac
import logging
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from bottleneck_oracle import __version__
from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError, GraphStoreError, ModelError, NotFoundError, OracleError, one_line
from bottleneck_oracle.graphdb import GraphStore, TraceSummary, list_traces, open_store
from bottleneck_oracle.server import _models as m
from bottleneck_oracle.server._events import ask_events
from bottleneck_oracle.server._upload import OP_TABLE_SUFFIXES, Upload, check_name, receive_upload
from bottleneck_oracle.traces.op_table import JobLayout, read_layout
from bottleneck_oracle.workspace.diff import diff_traces
from bottleneck_oracle.workspace.findings import trace_findings
from bottleneck_oracle.workspace.hang import hang_report
from bottleneck_oracle.workspace.ingest import ingest
from bottleneck_oracle.workspace.loaded import LoadedTrace, loaded_trace
from bottleneck_oracle.workspace.questions import run_verdict_of
from bottleneck_oracle.workspace.steps import explain_step, list_steps, step_rows
from bottleneck_oracle.workspace.stragglers import straggler_report
from bottleneck_oracle.workspace.timeline import DEFAULT_MAX_EVENTS, trace_timeline, whatif_paths
from bottleneck_oracle.workspace.traces import TraceEntry, find_entry
from bottleneck_oracle.workspace.whatif import optimize_trace, whatif_trace

__all__ = ["STATIC", "UPLOADS", "create_app"]

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
UPLOADS = "uploads"  # under the workspace: uploads/<uuid>/<name>/<rank files>
_STATUS = ((NotFoundError, 404), (GraphStoreError, 503), (ModelError, 503), (OracleError, 400))
_WHY = {400: "Bad input: a bad file, edit, step or argument", 401: "The token is missing or wrong",
        404: "No such trace, step or rank (the detail lists those there are)", 413: "The upload is too large",
        503: "The graph database or the chat model is down"}
_UPLOAD_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                  "description": "one Kineto trace per rank, .json or .json.gz"},
        "name": {"type": "string", "description": "the trace's name (default: upload-<id>)"}}}}}}}
_HANG_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                  "description": "one Flight Recorder dump per rank (nccl_trace_rank_0, ...)"}}}}}}}
_SIZES = ("dp", "pp", "tp", "dsp", "vpp")  # a pipeline job's layout, as `oracle stragglers --dp --pp ...` takes it
_MAX_WORKERS = 2**20  # recorded workers (dp x pp) an uploaded layout may name
_MAX_WHATIFS = 16
_STRAGGLERS_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                  "description": "the job's op table (trace.parquet or trace.csv) and, unless dp and pp are "
                                 "given, its meta.yaml"},
        **{k: {"type": "integer", "minimum": 1, "description": f"{k} size (default: meta.yaml)"} for k in _SIZES},
        "whatif": {"type": "array", "items": {"type": "string"}, "maxItems": _MAX_WHATIFS,
                   "description": "edits to predict: 'fix straggler_rank rank=37', 'move_layer 3->0 layers=8', "
                                  "'even_microbatches', ..."}}}}}}}
_SSE_DATA = {"tool": ["name", "args"], "tool_done": ["name", "ms", "ok"], "error": ["detail"],
             "answer": ["question", "answer", "answered", "cause", "tool_calls", "grounded", "verdict", "evidence",
                        "action", "confidence", "check"]}
_SSE_EVENT = {"anyOf": [{  # one event of /api/ask: its name, and its data as one line of JSON
    "type": "object", "required": ["event", "data"],
    "properties": {"event": {"const": name}, "data": {
        "type": "string", "contentMediaType": "application/json",
        "contentSchema": {"type": "object", "required": fields}}}} for name, fields in _SSE_DATA.items()]}
_PAGE_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                 "Content-Security-Policy": "frame-ancestors 'none'; object-src 'none'; base-uri 'none'"}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": m.ErrorOut, "description": _WHY[code]} for code in (400, 401, *codes)}


def _json(data: object, status: int = 200) -> Response:
    """``data`` as JSON (numpy numbers included)."""
    body = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status, media_type="application/json",
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


def _error(status: int, detail: str) -> Response:
    return _json({"detail": detail}, status)


def _trace_json(t: TraceSummary) -> dict[str, Any]:
    return {"id": t.trace_id, "name": t.name, "ranks": t.ranks, "steps": t.steps, "status": t.status,
            "detail": t.detail.value, "ops": t.ops, "loaded_at": t.loaded_at}


def _steps_json(rows: list[dict[str, Any]], listed: dict[str, Any], trace: dict[str, Any],
                run: dict[str, Any]) -> dict[str, Any]:
    """``step_rows`` (one per step and rank) with the slow steps of ``list_steps``, slowest first, and the run's
    verdict (``whatif/run_verdict.py``, as ``oracle analyze`` states it)."""
    slow = list(dict.fromkeys(s["step"] for s in listed["slow_steps"]))
    return {"trace": trace, "steps": rows, "slow": slow, "median_step_ms": listed["median_step_ms"],
            "slow_steps": listed["slow_steps"], "run": run}


def _status_of(e: OracleError) -> int:
    return next(code for kind, code in _STATUS if isinstance(e, kind))


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(OracleError)
    async def oracle_error(request: Request, e: OracleError) -> Response:
        return _error(_status_of(e), one_line(e))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> Response:
        first = e.errors()[0] if e.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return _error(400, one_line(f"{where}: {first.get('msg', 'invalid')}" if where else first.get("msg")))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException) -> Response:
        response = _error(e.status_code, str(e.detail))
        response.headers.update(e.headers or {})
        if e.status_code == 405:  # every route of the path, not only the first that matched
            allowed = {method for route in request.app.routes if isinstance(route, APIRoute)
                       and route.matches(request.scope)[0] == Match.PARTIAL for method in route.methods}
            response.headers["Allow"] = ", ".join(sorted(allowed | ({"HEAD"} if "GET" in allowed else set())))
        return response

    @app.exception_handler(Exception)
    async def internal(request: Request, e: Exception) -> Response:
        logger.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, f"internal error: {type(e).__name__}: {one_line(e)}")


def _layout(fields: dict[str, list[str]], name: str) -> JobLayout | None:
    """The layout the form fields give (dp and pp both, tp, dsp and vpp optional), or None: the uploaded meta.yaml's.

    Raises:
        ConfigError: a size sent twice or not a positive integer, or only one of dp and pp.
    """
    sizes = {}
    for key in _SIZES:
        values = fields.get(key, [])
        if len(values) > 1:
            raise ConfigError(f"upload: field {key!r} sent {len(values)} times")
        if values and not (values[0].isdigit() and 0 < int(values[0]) < 2**31):
            raise ConfigError(f"upload: field {key!r}: expected a positive integer, got {values[0][:32]!r}")
        if values:
            sizes[key] = int(values[0])
    if not sizes:
        return None
    if "dp" not in sizes or "pp" not in sizes:
        raise ConfigError("upload: give both 'dp' and 'pp' (or neither, to read the uploaded meta.yaml)")
    return JobLayout(**sizes, name=name)


def _pipeline_report(folder: Path, got: Upload, settings: Settings) -> dict[str, Any]:
    """``oracle stragglers --json`` of the op table uploaded into ``folder``, its layout from the form or its
    meta.yaml; errors name the files sent, not where the server keeps them.

    Raises:
        ConfigError, TraceFormatError: a bad layout, table or edit (400).
    """
    edits = got.fields.get("whatif", [])
    try:
        if len(edits) > _MAX_WHATIFS:
            raise ConfigError(f"upload: {len(edits)} whatif edits; send at most {_MAX_WHATIFS}")
        table = next((f.stem for f in got.files if f.suffix in (".parquet", ".csv")), "job")
        layout = _layout(got.fields, got.name or table)
        if layout is None and not (folder / "meta.yaml").is_file():
            raise ConfigError("upload: send the op table's meta.yaml with it, or its layout in the dp and pp fields")
        layout = layout or read_layout(folder / "meta.yaml")
        if layout.dp * layout.pp > _MAX_WORKERS:
            raise ConfigError(f"upload: dp {layout.dp} x pp {layout.pp} recorded workers; at most {_MAX_WORKERS}")
        report = straggler_report(folder, settings, layout=layout, edits=edits)
    except OracleError as e:
        raise type(e)(one_line(e).replace(f"{folder}/", "").replace(str(folder), "the upload")) from None
    report["job"]["source"] = Path(report["job"]["source"]).name
    return report


def _store(request: Request) -> GraphStore:
    """The app's one connection to the graph database (opened at start-up, closed at shutdown)."""
    return request.app.state.store


Store = Annotated[GraphStore, Depends(_store)]


def _auth(token: str | None) -> list[Any]:
    """The API's dependencies: the bearer token, when there is one."""
    if token is None:
        return []
    bearer = HTTPBearer(auto_error=False, description="the token of `oracle serve --token-file`")
    expected = token.encode()

    def check(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        given = credentials.credentials.encode() if credentials is not None else b""
        if not hmac.compare_digest(given, expected):
            raise HTTPException(401, "missing or wrong token: send Authorization: Bearer <token>",
                                headers={"WWW-Authenticate": "Bearer"})

    return [Depends(check)]


def create_app(settings: Settings, *, token: str | None = None, max_upload_mb: int = 256) -> FastAPI:
    """The HTTP API and the page, over the workspace and graph database of ``settings``.

    Args:
        token: when given, every ``/api`` request must carry ``Authorization: Bearer <token>``.
        max_upload_mb: the most a trace upload may send, all files together.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.store = await run_in_threadpool(open_store, settings, start=True)
        try:
            yield
        finally:
            app.state.store.close()

    app = FastAPI(title="Bottleneck Oracle", version=__version__, lifespan=lifespan, docs_url=None,
                  redoc_url=None, summary="Why a training step is slow, from its PyTorch profiler traces.")
    _install_error_handlers(app)
    app.include_router(_api(settings, token, max_upload_mb * 2**20))
    app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        index = STATIC / "index.html"
        if not index.is_file():
            return _error(404, "the page is not installed (bottleneck_oracle/server/static/index.html)")
        return FileResponse(index, headers=_PAGE_HEADERS)

    return app


def _api(settings: Settings, token: str | None, limit_bytes: int) -> APIRouter:
    api = APIRouter(prefix="/api", dependencies=_auth(token))

    def entry(ref: str) -> TraceEntry:
        """A trace of the workspace by id, id prefix or name (never a path on the server)."""
        return find_entry(ref, settings)

    def loaded(db: GraphStore, ref: str) -> LoadedTrace:
        return loaded_trace(db, entry(ref).trace_id, settings)

    def summary(db: GraphStore, trace_id: str) -> dict[str, Any]:
        return next((_trace_json(t) for t in list_traces(db) if t.trace_id == trace_id), {})

    @api.get("/health", responses={200: {"model": m.HealthOut}, **_errors()})
    def health() -> Response:
        return _json({"status": "ok", "version": __version__})

    @api.get("/traces", responses={200: {"model": m.TracesOut}, **_errors(503)})
    def traces(db: Store) -> Response:
        return _json({"traces": [_trace_json(t) for t in list_traces(db)]})

    @api.post("/traces", status_code=201, openapi_extra=_UPLOAD_BODY,
              responses={201: {"model": m.TraceOneOut}, **_errors(413, 503)})
    async def upload(request: Request, db: Store) -> Response:
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit_bytes:
            raise HTTPException(413, f"upload: {int(length) / 2**20:.1f} MiB is over the limit of "
                                     f"{limit_bytes / 2**20:g} MiB")
        root = Path(settings.home) / UPLOADS / uuid.uuid4().hex
        try:
            got = await receive_upload(request.headers.get("content-type"), request.stream(), root / "files",
                                       limit_bytes)
            folder = root / check_name(got.name or f"upload-{root.name[:8]}")
            (root / "files").rename(folder)
            done = await run_in_threadpool(ingest, [folder], settings)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return _json({"trace": await run_in_threadpool(summary, db, done.report.trace_id)}, 201)

    @api.post("/hang", openapi_extra=_HANG_BODY, responses={200: {"model": m.HangOut}, **_errors(413)})
    async def hang(request: Request) -> Response:
        # the dumps are kept under the workspace, as uploaded traces are
        folder = Path(settings.home) / UPLOADS / f"hang-{uuid.uuid4().hex}"
        try:
            await receive_upload(request.headers.get("content-type"), request.stream(), folder, limit_bytes,
                                 suffixes=("",))
            return _json(await run_in_threadpool(hang_report, folder, settings))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    @api.post("/stragglers", openapi_extra=_STRAGGLERS_BODY,
              responses={200: {"model": m.StragglersOut}, **_errors(413)})
    async def stragglers(request: Request) -> Response:
        # the op table is kept under the workspace, as uploaded traces and dumps are
        folder = Path(settings.home) / UPLOADS / f"stragglers-{uuid.uuid4().hex}"
        try:
            got = await receive_upload(request.headers.get("content-type"), request.stream(), folder, limit_bytes,
                                       suffixes=OP_TABLE_SUFFIXES, fields=(*_SIZES, "whatif"))
            return _json(await run_in_threadpool(_pipeline_report, folder, got, settings))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    @api.get("/traces/{ref}/steps", responses={200: {"model": m.StepsOut}, **_errors(404, 503)})
    def steps(ref: str, db: Store) -> Response:
        t = loaded(db, ref)
        return _json(_steps_json(step_rows(db, t), list_steps(db, t), summary(db, t.trace_id),
                                 run_verdict_of(t, settings)))

    @api.get("/traces/{ref}/steps/{step}", responses={200: {"model": m.ExplainOut}, **_errors(404, 503)})
    def explain(ref: str, step: int, db: Store, rank: int | None = None) -> Response:
        return _json(explain_step(db, loaded(db, ref), step, rank))

    @api.get("/traces/{ref}/steps/{step}/timeline", responses={200: {"model": m.TimelineOut}, **_errors(404)})
    def timeline(ref: str, step: int, rank: Annotated[list[int] | None, Query()] = None,
                 max_events: Annotated[int, Query(ge=1, le=m.MAX_EVENTS_LIMIT)] = DEFAULT_MAX_EVENTS) -> Response:
        return _json(trace_timeline(entry(ref).trace_id, step, settings, ranks=rank, max_events=max_events))

    @api.get("/traces/{ref}/findings", responses={200: {"model": m.FindingsOut}, **_errors(404)})
    def findings(ref: str) -> Response:
        return _json({"findings": trace_findings(entry(ref).trace_id, settings)})

    @api.post("/traces/{ref}/whatif", responses={200: {"model": m.WhatIfOut}, **_errors(404)})
    def whatif(ref: str, body: m.WhatIfIn) -> Response:
        return _json(whatif_paths(whatif_trace(entry(ref).trace_id, body.edits, settings, step=body.step)))

    @api.post("/traces/{ref}/optimize", responses={200: {"model": m.OptimizeOut}, **_errors(404)})
    def optimize(ref: str, body: m.OptimizeIn) -> Response:
        return _json(optimize_trace(entry(ref).trace_id, settings, step=body.step, budget=body.budget).to_json())

    @api.get("/diff", responses={200: {"model": m.DiffOut}, **_errors(404)})
    def diff(base: Annotated[str, Query(min_length=1, description="BASE: id, id prefix or name")],
             new: Annotated[str, Query(min_length=1, description="NEW: id, id prefix or name")]) -> Response:
        # the comparison of `oracle diff --format json`, by the same service function
        return _json(diff_traces(entry(base).trace_id, entry(new).trace_id, settings).to_json())

    @api.post("/ask", response_class=StreamingResponse, responses={
        200: {"description": "server-sent events: tool, tool_done, then answer or error",
              "content": {"text/event-stream": {"schema": _SSE_EVENT}}}, **_errors(404, 503)})
    def ask(body: m.AskIn) -> StreamingResponse:
        trace = entry(body.trace).trace_id if body.trace else None
        events = ask_events(settings, body.question, trace=trace, llm=body.llm, session=body.session)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    return api
