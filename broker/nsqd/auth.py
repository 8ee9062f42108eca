"""NSQ's auth server protocol: AUTH sends the client's secret to an auth server, whose
answer (identity, TTL, authorizations) decides what the client may publish and consume."""
from __future__ import annotations

import logging
import random
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

from .http_client import HttpClient, HttpClientError

log = logging.getLogger("nsqd")

PERMISSIONS = frozenset({"subscribe", "publish"})
FORM_TYPE = "application/x-www-form-urlencoded"


class AuthError(Exception):
    """The auth servers could not be asked, or answered something unusable."""


@dataclass(frozen=True)
class Authorization:
    topic: re.Pattern[str]
    channels: tuple[re.Pattern[str], ...]
    permissions: frozenset[str]

    def allows(self, topic: str, channel: str) -> bool:
        # a publish is checked with an empty channel, which a channel pattern must match
        needed = "subscribe" if channel else "publish"
        if needed not in self.permissions or not self.topic.search(topic):
            return False
        return any(c.search(channel) for c in self.channels)


@dataclass
class AuthState:
    identity: str
    identity_url: str
    ttl: int
    authorizations: list[Authorization] = field(default_factory=list)
    expires: float = 0.0

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.expires

    def allows(self, topic: str, channel: str) -> bool:
        return any(a.allows(topic, channel) for a in self.authorizations)


def parse_auth_response(data: object) -> AuthState:
    if not isinstance(data, dict):
        raise AuthError("auth server answer is not a JSON object")
    try:
        ttl = int(data.get("ttl", 0))
        grants = []
        for entry in data.get("authorizations") or []:
            perms = frozenset(entry.get("permissions") or [])
            unknown = perms - PERMISSIONS
            if unknown:
                raise AuthError(f"unknown permission {sorted(unknown)[0]}")
            grants.append(Authorization(
                re.compile(entry.get("topic", "")),
                tuple(re.compile(c) for c in entry.get("channels") or []),
                perms))
    except re.error as e:
        raise AuthError(f"unable to compile pattern: {e}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise AuthError(f"malformed auth server answer: {e}") from None
    if ttl <= 0:
        raise AuthError(f"invalid TTL {ttl} (must be >0)")
    return AuthState(str(data.get("identity", "")), str(data.get("identity_url", "")), ttl,
                     grants, time.monotonic() + ttl)


class AuthClient:
    def __init__(self, addresses: list[str], method: str, connect_timeout: float,
                 request_timeout: float) -> None:
        self.addresses = list(addresses)
        self.method = method
        self._http = HttpClient(connect_timeout=connect_timeout, request_timeout=request_timeout)

    async def close(self) -> None:
        await self._http.close()

    async def query(self, secret: str, remote_ip: str, tls: bool, common_name: str) -> AuthState:
        """Ask the auth servers in turn, starting at a random one; the first answer wins."""
        params = {"remote_ip": remote_ip, "tls": "true" if tls else "false",
                  "secret": secret, "common_name": common_name}
        start = random.randrange(len(self.addresses))
        last: Exception = AuthError("no auth server configured")
        for i in range(len(self.addresses)):
            address = self.addresses[(start + i) % len(self.addresses)]
            url = address if "://" in address else f"http://{address}/auth"
            try:
                if self.method == "post":
                    answer = await self._http.request("POST", url, body=urlencode(params).encode(),
                                                      headers={"Content-Type": FORM_TYPE})
                else:
                    answer = await self._http.request("GET", url, params=params)
                if answer.status != 200:
                    raise AuthError(f"auth server {address} answered {answer.status}")
                return parse_auth_response(answer.json())
            except (HttpClientError, ValueError, AuthError) as e:
                log.warning("failed to auth against %s: %s", address, e)
                last = e
        raise AuthError(str(last))
