"""A stand-in for the Kubernetes API server's service proxy, on 127.0.0.1.

Like `https://<endpoint>/api/v1/namespaces/<ns>/services/<svc>:dashboard/proxy/...` it only
answers requests that carry `Authorization: Bearer <token>` (401 otherwise) under its path prefix
(404 otherwise), strips the prefix and forwards HTTP and websocket traffic to the dashboard.
Plain http: the TLS part of the real proxy is exercised by `verify`, not here.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "host", "authorization", "content-length"}


@dataclass
class Seen:
    method: str
    path: str
    authorized: bool
    websocket: bool


@dataclass
class AuthProxy:
    upstream: str
    prefix: str
    tokens: set[str]
    seen: list[Seen] = field(default_factory=list)
    base: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None

    def start(self) -> "AuthProxy":
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="dashboard-proxy", daemon=True)
        self._thread.start()
        assert ready.wait(30), "the API-server stand-in did not start"
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        authorized = auth.startswith("Bearer ") and auth[len("Bearer ") :] in self.tokens
        is_ws = request.headers.get("Upgrade", "").lower() == "websocket"
        raw = request.raw_path
        self.seen.append(Seen(request.method, raw, authorized, is_ws))
        if not authorized:
            return web.Response(status=401, text='{"kind":"Status","reason":"Unauthorized","code":401}')
        if not (raw == self.prefix or raw.startswith(self.prefix + "/") or raw.startswith(self.prefix + "?")):
            return web.Response(status=404, text='{"kind":"Status","reason":"NotFound","code":404}')
        target = self.upstream + (raw[len(self.prefix) :] or "/")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and not k.lower().startswith("sec-websocket")
        }
        if is_ws:
            return await self._websocket(request, "ws" + target[len("http") :])
        async with aiohttp.ClientSession() as session:
            async with session.request(request.method, target, data=await request.read(), headers=headers) as resp:
                body = await resp.read()
                passed = {k: v for k, v in resp.headers.items() if k.lower() in ("content-type",)}
                return web.Response(status=resp.status, body=body, headers=passed)

    async def _websocket(self, request: web.Request, target: str) -> web.StreamResponse:
        down = web.WebSocketResponse()
        await down.prepare(request)
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(target) as up:

                async def pump(src, dst) -> None:
                    async for msg in src:
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            await dst.send_str(msg.data)
                        elif msg.type == aiohttp.WSMsgType.BINARY:
                            await dst.send_bytes(msg.data)
                        else:
                            break

                tasks = [asyncio.ensure_future(pump(up, down)), asyncio.ensure_future(pump(down, up))]
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for t in tasks:
                    t.cancel()
        await down.close()
        return down
