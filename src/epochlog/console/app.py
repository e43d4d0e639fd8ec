"""The console's web app: HTML shells, a JSON API, and server-sent events for the live pages.

Starlette (ASGI) served by uvicorn: small, typed, maintained, and its StreamingResponse is all SSE needs.
Pages are one static HTML shell rendered by static/console.js from the JSON API, so the browser tests
exercise the same JSON the API serves.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from epochlog.console.broker_metrics import MetricsEndpoints
from epochlog.console.payload import FORMATS
from epochlog.console.reader import LIVE_OFFSETS_TIMEOUT, ClusterReader, GroupActiveError

STATIC = files("epochlog.console") / "static"
REFRESH_SECONDS = 1.0
PAGES = {"overview": "Cluster", "topics": "Topics", "topic": "Topic", "partition": "Partition",
         "groups": "Consumer groups", "group": "Consumer group", "messages": "Messages",
         "quotas": "Quotas"}  # fmt: skip


@functools.cache
def _page_template() -> Template:
    return Template((STATIC / "page.html").read_text(encoding="utf-8"))


def _shell(page: str, **args: str) -> HTMLResponse:
    tpl = _page_template()
    title = PAGES[page] + (" " + "-".join(args.values()) if args else "")
    # The page's arguments travel as JSON in a data attribute; Template does no escaping, so escape here.
    data = json.dumps(args).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return HTMLResponse(tpl.substitute(page=page, title=title.replace("<", "&lt;"), args=data))


def _json_default(o: object) -> Any:
    return str(o)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(json.dumps(obj, default=_json_default), status_code=status, media_type="application/json")


REPORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.html")


def report_routes(report_dir: Path) -> list[Route]:
    """The simulator's HTML reports (sim/report.py) under /sim/: a list, and each report as written. Only
    names of files directly in report_dir are served, so no path reaches outside it."""

    async def report_list(request: Request) -> Response:
        names = sorted(p.name for p in report_dir.glob("*.html") if REPORT_NAME.fullmatch(p.name))
        items = "".join(f'<li><a href="/sim/{html.escape(n)}">{html.escape(n)}</a></li>' for n in names)
        return HTMLResponse(
            '<!doctype html><meta charset="utf-8"><title>Simulator reports · epochlog</title>'
            '<link rel="stylesheet" href="/static/console.css"><header><a class="brand" href="/sim/">epochlog</a>'
            f'</header><main><h1>Simulator reports</h1><ul id="reports">{items}</ul></main>'
        )

    async def report(request: Request) -> Response:
        name = request.path_params["name"]
        path = report_dir / name
        if not REPORT_NAME.fullmatch(name) or not path.is_file():
            return HTMLResponse("no such report", 404)
        return FileResponse(path, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})

    return [Route("/sim/", report_list), Route("/sim/{name:str}", report)]


def create_report_app(report_dir: Path) -> Starlette:
    """The console's app with no cluster behind it: the simulator's reports and the shared assets only
    (`epochlog sim --open`)."""
    return Starlette(
        routes=[
            Route("/", lambda request: RedirectResponse("/sim/")),
            *report_routes(report_dir),
            Mount("/static", app=StaticFiles(packages=[("epochlog.console", "static")]), name="static"),
        ]
    )


def create_app(reader: ClusterReader, refresh: float = REFRESH_SECONDS, report_dir: Path | None = None) -> Starlette:
    async def call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kw))

    async def guarded(fn: Callable[..., Any], *args: Any, **kw: Any) -> Response:
        try:
            return _json(await call(fn, *args, **kw))
        except Exception as e:  # the cluster is unreachable or refused: say so, the page shows it
            return _json({"error": f"{type(e).__name__}: {e}"}, 502)

    def stream(request: Request, fn: Callable[[], Any]) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            # The browser reconnects by itself after `retry` ms if the console restarts.
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                try:
                    payload = await call(fn)
                except Exception as e:
                    payload = {"error": f"{type(e).__name__}: {e}"}
                yield f"data: {json.dumps(payload, default=_json_default)}\n\n"
                await asyncio.sleep(refresh)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    # -- HTML pages ---------------------------------------------------------------------------------------

    async def overview_page(request: Request) -> Response:
        return _shell("overview")

    async def topics_page(request: Request) -> Response:
        return _shell("topics")

    async def topic_page(request: Request) -> Response:
        return _shell("topic", topic=request.path_params["name"])

    async def partition_page(request: Request) -> Response:
        return _shell("partition", topic=request.path_params["name"], partition=str(request.path_params["partition"]))

    async def groups_page(request: Request) -> Response:
        return _shell("groups")

    async def group_page(request: Request) -> Response:
        return _shell("group", group=request.path_params["group"])

    async def messages_page(request: Request) -> Response:
        return _shell("messages")

    async def quotas_page(request: Request) -> Response:
        return _shell("quotas")

    async def favicon(request: Request) -> Response:
        return RedirectResponse("/static/favicon.svg")

    # -- JSON ---------------------------------------------------------------------------------------------

    async def api_overview(request: Request) -> Response:
        return await guarded(reader.overview)

    async def api_topics(request: Request) -> Response:
        return await guarded(reader.topics)

    async def api_topic(request: Request) -> Response:
        return await guarded(reader.topic, request.path_params["name"])

    async def api_partition(request: Request) -> Response:
        return await guarded(reader.partition, request.path_params["name"], request.path_params["partition"])

    async def api_groups(request: Request) -> Response:
        return await guarded(reader.groups)

    async def api_group(request: Request) -> Response:
        return await guarded(reader.group, request.path_params["group"])

    async def api_quotas(request: Request) -> Response:
        return await guarded(reader.quotas)

    async def api_messages(request: Request) -> Response:
        q = request.query_params
        try:
            topic = q["topic"]
            partition = int(q.get("partition", "0"))
            offset = int(q["offset"]) if q.get("offset") else None
            ts = int(q["timestamp"]) if q.get("timestamp") else None
            limit = int(q.get("limit", "50"))
            fmt = q.get("format", "text")
            if fmt not in FORMATS:
                raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        except (KeyError, ValueError) as e:
            return JSONResponse({"error": f"bad query: {e}"}, 400)
        return await guarded(reader.messages, topic, partition, offset, ts, limit, fmt)

    async def api_reset_offsets(request: Request) -> Response:
        # The one request that changes the cluster. It must be a JSON POST: a page on another origin cannot
        # send one without a CORS preflight, which this app never answers, so it cannot reset offsets
        # through a user's browser.
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send the reset as application/json"}, 415)
        try:
            body = await request.json()
            topic = str(body["topic"])
            partition = None if body.get("partition") in (None, "", "all") else int(body["partition"])
            to = str(body["to"])
            if to not in ("earliest", "latest"):
                int(to)
        except (KeyError, ValueError, TypeError) as e:
            return JSONResponse({"error": f"bad reset request: {e}"}, 400)
        try:
            return _json(await call(reader.reset_offsets, request.path_params["group"], topic, partition, to))
        except GroupActiveError as e:
            return _json({"error": str(e)}, 409)
        except ValueError as e:
            return _json({"error": str(e)}, 400)
        except Exception as e:
            return _json({"error": f"{type(e).__name__}: {e}"}, 502)

    # -- live ---------------------------------------------------------------------------------------------

    async def sse_overview(request: Request) -> Response:
        return stream(request, reader.overview)

    async def sse_topic(request: Request) -> Response:
        name = request.path_params["name"]
        # Configs change rarely and cost a DescribeConfigs each: the page loads them once over /api.
        return stream(request, lambda: reader.topic(name, with_configs=False, offsets_timeout=LIVE_OFFSETS_TIMEOUT))

    async def sse_partition(request: Request) -> Response:
        name, partition = request.path_params["name"], request.path_params["partition"]
        return stream(request, lambda: reader.partition(name, partition, offsets_timeout=LIVE_OFFSETS_TIMEOUT))

    async def sse_group(request: Request) -> Response:
        group = request.path_params["group"]
        return stream(request, lambda: reader.group(group))

    async def sse_quotas(request: Request) -> Response:
        return stream(request, reader.quotas)

    routes = [
        Route("/", overview_page),
        Route("/topics", topics_page),
        Route("/topics/{name:str}", topic_page),
        Route("/topics/{name:str}/{partition:int}", partition_page),
        Route("/groups", groups_page),
        Route("/groups/{group:str}", group_page),
        Route("/messages", messages_page),
        Route("/quotas", quotas_page),
        Route("/favicon.ico", favicon),
        Route("/api/overview", api_overview),
        Route("/api/topics", api_topics),
        Route("/api/topics/{name:str}", api_topic),
        Route("/api/topics/{name:str}/partitions/{partition:int}", api_partition),
        Route("/api/groups", api_groups),
        Route("/api/groups/{group:str}", api_group),
        Route("/api/groups/{group:str}/offsets", api_reset_offsets, methods=["POST"]),
        Route("/api/messages", api_messages),
        Route("/api/quotas", api_quotas),
        Route("/events/overview", sse_overview),
        Route("/events/topics/{name:str}", sse_topic),
        Route("/events/topics/{name:str}/partitions/{partition:int}", sse_partition),
        Route("/events/groups/{group:str}", sse_group),
        Route("/events/quotas", sse_quotas),
        *(report_routes(report_dir) if report_dir is not None else []),
        Mount("/static", app=StaticFiles(packages=[("epochlog.console", "static")]), name="static"),
    ]
    return Starlette(routes=routes)


def serve(
    bootstrap: str,
    host: str = "127.0.0.1",
    port: int = 8080,
    refresh: float = REFRESH_SECONDS,
    bootstrap_controllers: str | None = None,
    endpoints: MetricsEndpoints | None = None,
    report_dir: Path | None = None,
) -> None:
    import uvicorn

    reader = ClusterReader(bootstrap, bootstrap_controllers=bootstrap_controllers, endpoints=endpoints)
    try:
        # Open event streams never end by themselves; a short graceful timeout lets Ctrl-C stop promptly.
        uvicorn.run(
            create_app(reader, refresh, report_dir), host=host, port=port, log_level="warning",
            timeout_graceful_shutdown=1,
        )  # fmt: skip
    finally:
        reader.close()


def serve_reports(report_dir: Path, host: str = "127.0.0.1", port: int = 8080) -> None:
    import uvicorn

    uvicorn.run(create_report_app(report_dir), host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
