"""nsqadmin processes for tests (ours, or Go's v1.3.0 from ../shared for comparison), a
consumer process, and a receiver for admin-action notifications."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.servers import BIN, HOST, HttpAnswer, Nsqd, ServerProcess, free_port, request, wait_for

GO_NSQADMIN = Path(__file__).resolve().parents[2].parent / "shared" / "nsq-v1.3.0" / "bin" / "nsqadmin"


class AdminProcess(ServerProcess):
    program = "nsqadmin"

    def __init__(self, workdir: Path, flags: dict[str, Any] | None = None, binary: Path | None = None) -> None:
        super().__init__(workdir, flags)
        self.binary = binary or BIN / "nsqadmin"
        self.log_path = self.workdir / f"{self.binary.parent.name}-nsqadmin.log"
        self.ping_path = "/" + str(self.flags.get("base-path", "")).strip("/") + "/ping" if self.flags.get("base-path") else "/ping"

    def argv(self) -> list[str]:
        args = [str(self.binary), f"--http-address={self.host}:{self.http_port}"]
        for key, value in self.flags.items():
            for v in value if isinstance(value, list) else [value]:
                args.append(f"--{key}={v}")
        return args

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> HttpAnswer:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        return request(method, self.url(path), data, headers=headers)


def start_admin(workdir: Path, flags: dict[str, Any], binary: Path | None = None) -> AdminProcess:
    return AdminProcess(workdir, flags, binary).start()  # type: ignore[return-value]


# Sets the (namespace's) hostname, then becomes the program: python is the one tool sure to be here.
_SET_HOSTNAME = "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])"
_OWN_UTS = (["unshare", "--uts"], ["unshare", "--user", "--map-root-user", "--uts"])


def own_hostname_prefix() -> list[str] | None:
    """How to run a program under a hostname of its own (a UTS namespace, as a container
    or a Kubernetes pod has): as root, or in a user namespace where the kernel allows
    them; None where neither works."""
    for prefix in _OWN_UTS:
        try:
            probe = subprocess.run([*prefix, sys.executable, "-c", _SET_HOSTNAME, "probe", "/bin/true"],
                                   capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    return None


class HostNamedNsqd(Nsqd):
    """Our nsqd with a hostname of its own: the name it reports in /info and to lookupd."""

    def __init__(self, workdir: Path, flags: dict[str, Any], hostname: str, prefix: list[str]) -> None:
        super().__init__(workdir, flags)
        self.hostname, self.prefix = hostname, prefix

    def argv(self) -> list[str]:
        return [*self.prefix, sys.executable, "-c", _SET_HOSTNAME, self.hostname, *super().argv()]


class Consumer:
    """Our ``nsq_tail`` subscribed to one channel of one nsqd: a real V2 client that
    finishes what it gets."""

    def __init__(self, nsqd: Nsqd, topic: str, channel: str) -> None:
        self.proc = subprocess.Popen(
            [str(BIN / "nsq_tail"), f"--nsqd-tcp-address={nsqd.tcp_address}", f"--topic={topic}",
             f"--channel={channel}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class NotificationReceiver:
    """An HTTP endpoint on 127.0.0.1 keeping every POSTed JSON body by path."""

    def __init__(self) -> None:
        received: list[tuple[str, dict[str, str], Any]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port(HOST)
        self.server = ThreadingHTTPServer((HOST, self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def wait_for(self, path: str, action: str, timeout: float = 10.0) -> tuple[dict[str, str], Any]:
        def found() -> tuple[dict[str, str], Any] | None:
            return next(((h, b) for p, h, b in self.received if p == path and b.get("action") == action), None)
        return wait_for(found, timeout, message=f"notification {action} at {path}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
