"""NSQ clients run inside an nsqd pod with `kubectl exec`, talking to that pod's own nsqd
on 127.0.0.1 (so a NetworkPolicy in force does not stand in the way): publish a list of
bodies, read a replicated nsqd's GET /replication, and consume a channel until every
expected body came or a deadline passed."""
from __future__ import annotations

import json
from typing import Any

from tests.cluster.kube import Kube

_PUBLISH = """
import sys, urllib.request
topic, bodies = sys.argv[1], sys.argv[2:]
request = urllib.request.Request("http://127.0.0.1:4151/mpub?topic=" + topic, data="\\n".join(bodies).encode(),
                                 method="POST")
print(urllib.request.urlopen(request, timeout=30).read().decode())
"""

_GET = """
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:4151" + sys.argv[1], timeout=10).read().decode())
"""

# NSQ's TCP protocol V2, by hand: SUB, RDY, then FIN every message until each wanted body
# came or the deadline passed; prints every body delivered, duplicates included
_CONSUME = """
import json, socket, struct, sys, time
topic, channel, seconds, wanted = sys.argv[1], sys.argv[2], float(sys.argv[3]), set(sys.argv[4:])
sock = socket.create_connection(("127.0.0.1", 4150), timeout=1)
sock.sendall(b"  V2" + f"SUB {topic} {channel}\\n".encode() + b"RDY 200\\n")
buffer, delivered, deadline = b"", [], time.monotonic() + seconds
while time.monotonic() < deadline and not wanted <= set(delivered):
    try:
        chunk = sock.recv(65536)
    except socket.timeout:
        continue
    if not chunk:
        break
    buffer += chunk
    while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">l", buffer[:4])[0]:
        size = struct.unpack(">l", buffer[:4])[0]
        frame, buffer = buffer[4:4 + size], buffer[4 + size:]
        kind, data = struct.unpack(">l", frame[:4])[0], frame[4:]
        if kind == 1:
            raise SystemExit(data.decode())
        if kind == 0 and data == b"_heartbeat_":
            sock.sendall(b"NOP\\n")
        elif kind == 2:
            delivered.append(data[26:].decode())
            sock.sendall(b"FIN " + data[10:26] + b"\\n")
print(json.dumps(delivered))
"""


def _exec(kube: Kube, namespace: str, pod: str, script: str, *args: str, timeout: float = 120) -> str:
    return kube.run("exec", pod, "-n", namespace, "-c", "nsqd", "--", "python3", "-c", script, *args,
                    timeout=timeout)


def publish(kube: Kube, namespace: str, pod: str, topic: str, bodies: list[str]) -> None:
    """One HTTP /mpub to the pod's nsqd; answered OK only once a quorum holds every body."""
    assert all("\n" not in b for b in bodies)
    assert _exec(kube, namespace, pod, _PUBLISH, topic, *bodies).strip() == "OK"


def nsqd_json(kube: Kube, namespace: str, pod: str, path: str) -> Any:
    return json.loads(_exec(kube, namespace, pod, _GET, path))


def consume(kube: Kube, namespace: str, pod: str, topic: str, channel: str, wanted: list[str],
            seconds: float = 60) -> list[str]:
    """Every body the pod's nsqd delivered on the channel (each FINed) until all of
    ``wanted`` came or ``seconds`` passed."""
    delivered: list[str] = json.loads(_exec(kube, namespace, pod, _CONSUME, topic, channel, str(seconds), *wanted,
                                            timeout=seconds + 60))
    return delivered
