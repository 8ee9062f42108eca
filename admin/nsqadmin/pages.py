"""The web UI: one HTML page for every UI route (the script draws the page the path
names) and the files of ``static/``, all from this package, nothing from elsewhere."""
from __future__ import annotations

import json
import mimetypes
from importlib import resources
from typing import Any

from aiohttp import web

from . import __version__
from .http_api import AdminState, is_admin
from .responses import HttpError, error

UI_ROUTES = ("/", "/topics", "/topics/{topic}", "/topics/{topic}/{channel}", "/nodes", "/nodes/{node}",
             "/counter", "/lookup")
POLL_SECONDS = 2.0
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}


def _load_static() -> dict[str, bytes]:
    folder = resources.files(__package__).joinpath("static")
    return {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file() and not f.name.startswith(".")}


class Pages:
    def __init__(self, state: AdminState) -> None:
        self.state = state
        self.assets = _load_static()
        self.index_template = self.assets.pop("index.html").decode()

    def add_routes(self, app: web.Application) -> None:
        r = self.state.options.route
        for path in UI_ROUTES:
            app.router.add_route("GET", r(path), self.index)
        app.router.add_route("GET", r("/static/{asset}"), self.static)

    def page_config(self, request: web.Request) -> dict[str, Any]:
        options = self.state.options
        return {"basePath": "" if options.base_path == "/" else options.base_path, "version": __version__,
                "lookupds": options.nsqlookupd_http_addresses, "nsqds": options.nsqd_http_addresses,
                "isAdmin": is_admin(options, request), "pollSeconds": POLL_SECONDS}

    async def index(self, request: web.Request) -> web.Response:
        # "<" escaped so that no value can close the script element it sits in
        config = json.dumps(self.page_config(request)).replace("<", "\\u003c")
        base = self.state.options.route("/static/")
        html = self.index_template.replace("{{CONFIG}}", config).replace("{{STATIC}}", base)
        return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["asset"]
        body = self.assets.get(name)
        if body is None:
            return error(404, "NOT_FOUND")
        suffix = name[name.rfind("."):]
        content_type = _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
        return web.Response(body=body, headers={"Content-Type": content_type, "Cache-Control": "no-cache"})


__all__ = ["Pages", "HttpError"]
