"""The web app over a fake reader, driven as ASGI directly (no server, no cluster): routes, escaping, the
shipped assets, bad queries, a cluster error shown as 502, and the SSE stream's first event."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from epochlog.console.app import create_app
from epochlog.console.reader import GroupActiveError


class FakeReader:
    def overview(self) -> dict[str, Any]:
        return {"controller_id": 1, "brokers": []}

    def topic(self, name: str, with_configs: bool = True, offsets_timeout: float | None = None) -> dict[str, Any]:
        return {"name": name, "partitions": [{"partition": 0, "leader": 2, "leader_epoch": 5}], "configs": None}

    def messages(self, *args: Any) -> dict[str, Any]:
        return {"args": list(args)}

    def groups(self) -> dict[str, Any]:
        raise ConnectionError("no broker answered")

    def quotas(self) -> dict[str, Any]:
        return {"entities": [{"name": "client-id=app"}], "ip": [], "metrics": False}

    def reset_offsets(self, group: str, topic: str, partition: int | None, to: str) -> dict[str, Any]:
        if group == "busy":
            raise GroupActiveError("group busy has 2 members")
        return {"args": [group, topic, partition, to]}


async def _call(
    app: Any,
    path: str,
    query: str = "",
    max_body: int | None = None,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "root_path": "",
    }  # fmt: skip
    status, got_headers, got = 0, {}, bytearray()
    done = asyncio.Event()
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await done.wait()  # the client "disconnects" once we have read what we wanted
        return {"type": "http.disconnect"}

    async def send(msg: dict[str, Any]) -> None:
        nonlocal status, got_headers
        if msg["type"] == "http.response.start":
            status = msg["status"]
            got_headers = {k.decode(): v.decode() for k, v in msg["headers"]}
        elif msg["type"] == "http.response.body":
            got.extend(msg.get("body", b""))
            if not msg.get("more_body") or (max_body is not None and len(got) >= max_body):
                done.set()

    task = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.wait_for(done.wait(), 10)
    await asyncio.wait_for(task, 10)
    return status, got_headers, bytes(got)


def call(path: str, query: str = "", max_body: int | None = None, **kw: Any) -> tuple[int, dict[str, str], bytes]:
    return asyncio.run(_call(create_app(FakeReader(), refresh=0.05), path, query, max_body, **kw))  # type: ignore[arg-type]


def test_pages_are_shells_with_escaped_arguments() -> None:
    status, headers, body = call('/topics/a"<b>')
    assert status == 200 and headers["content-type"].startswith("text/html")
    html = body.decode()
    assert 'data-page="topic"' in html
    assert "<b>" not in html and "&quot;a&quot;" not in html  # the name is escaped inside the attribute
    assert "&lt;b&gt;" in html or "&lt;b>" in html


def test_assets_are_served_from_the_package() -> None:
    for name, kind in (("console.js", "javascript"), ("console.css", "css"), ("favicon.svg", "svg")):
        status, headers, body = call(f"/static/{name}")
        assert status == 200 and kind in headers["content-type"] and body


def test_api_json_and_errors() -> None:
    status, _, body = call("/api/topics/orders")
    assert status == 200 and json.loads(body)["partitions"][0]["leader_epoch"] == 5
    status, _, body = call("/api/groups")
    assert status == 502 and "no broker answered" in json.loads(body)["error"]
    status, _, body = call("/api/messages", "topic=t&partition=x")
    assert status == 400
    status, _, body = call("/api/messages", "topic=t&partition=2&offset=7&format=hex&limit=3")
    assert status == 200 and json.loads(body)["args"] == ["t", 2, 7, None, 3, "hex"]
    status, _, _ = call("/api/messages", "topic=t&format=yaml")
    assert status == 400
    status, _, body = call("/api/quotas")
    assert status == 200 and json.loads(body)["entities"] == [{"name": "client-id=app"}]
    status, _, body = call("/quotas")
    assert status == 200 and 'data-page="quotas"' in body.decode() and 'href="/quotas"' in body.decode()


def test_topic_events_stream_json() -> None:
    status, headers, body = call("/events/topics/orders", max_body=200)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in body.decode().splitlines() if line.startswith("data: ")]
    assert json.loads(events[0])["partitions"][0]["leader"] == 2


def test_offset_reset_takes_only_json_and_refuses_active_groups() -> None:
    def post(group: str, body: object, ctype: str = "application/json") -> tuple[int, dict[str, Any]]:
        status, _, got = call(
            f"/api/groups/{group}/offsets",
            method="POST",
            body=json.dumps(body).encode(),
            headers={"Content-Type": ctype},
        )
        return status, json.loads(got)

    assert post("g", {"topic": "t", "to": "earliest"}, "application/x-www-form-urlencoded")[0] == 415
    assert post("g", {"topic": "t", "to": "earliest"}) == (200, {"args": ["g", "t", None, "earliest"]})
    assert post("g", {"topic": "t", "partition": "2", "to": "17"}) == (200, {"args": ["g", "t", 2, "17"]})
    assert post("g", {"topic": "t", "partition": "all", "to": "latest"})[1]["args"][2] is None
    assert post("g", {"topic": "t", "to": "yesterday"})[0] == 400
    assert post("g", {"to": "earliest"})[0] == 400
    assert post("busy", {"topic": "t", "to": "earliest"}) == (409, {"error": "group busy has 2 members"})
    # GET is not a way to reset.
    assert call("/api/groups/g/offsets")[0] == 405
