"""nsqadmin's configuration: Go nsqadmin's flag names (``_`` for ``-``), defaults and
bounds, for the flags that apply here (no graphite or statsd: the UI draws its own rates
from polling)."""
from __future__ import annotations

import ipaddress
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from nsq_protocol.flags import Duration
from nsq_protocol.host_port import ListenAddress, split_host_port
from nsq_protocol.logfmt import normalize_level

LogLevel = Annotated[str, BeforeValidator(normalize_level)]


def _upstream_address(value: str) -> str:
    """``host:port``, or a full ``http(s)://host:port`` URL (how an HTTPS nsqd is named)."""
    if "://" in value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
            raise ValueError(f"expected http(s)://host:port, got {value!r}")
        return value.rstrip("/")
    _, port = split_host_port(value)
    if port == 0:
        raise ValueError("port 0 cannot be connected to")
    return value


UpstreamAddress = Annotated[str, AfterValidator(_upstream_address)]


def _flag(name: str) -> dict:
    return {"flag": name}


class NsqadminOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    log_level: LogLevel = Field("info", description="set log verbosity: debug, info, warn, error, or fatal")
    log_prefix: str = Field("[nsqadmin] ", description="log message prefix")
    http_address: ListenAddress = Field("0.0.0.0:4171", description="<addr>:<port> to listen on for HTTP clients")
    base_path: str = Field("/", description="URL base path")
    nsqlookupd_http_addresses: list[UpstreamAddress] = Field(
        default_factory=list, json_schema_extra=_flag("lookupd-http-address"),
        description="lookupd HTTP address (may be given multiple times)")
    nsqd_http_addresses: list[UpstreamAddress] = Field(
        default_factory=list, json_schema_extra=_flag("nsqd-http-address"),
        description="nsqd HTTP address (may be given multiple times)")
    http_client_connect_timeout: Duration = Field(2.0, gt=0, description="timeout for HTTP connect")
    http_client_request_timeout: Duration = Field(5.0, gt=0, description="timeout for HTTP request")
    http_client_tls_insecure_skip_verify: bool = Field(
        False, description="configure the HTTP client to skip verification of TLS certificates")
    http_client_tls_root_ca_file: str = Field("", description="path to CA file for the HTTP client")
    http_client_tls_cert: str = Field("", description="path to certificate file for the HTTP client")
    http_client_tls_key: str = Field("", description="path to key file for the HTTP client")
    allow_config_from_cidr: str = Field(
        "127.0.0.1/8", description="A CIDR from which to allow HTTP requests to the /config endpoint")
    notification_http_endpoint: str = Field(
        "", description="HTTP endpoint (fully qualified) to which POST notifications of admin actions will be sent")
    acl_http_header: str = Field(
        "X-Forwarded-User", description="HTTP header to check for authenticated admin users")
    admin_users: list[str] = Field(
        default_factory=list, json_schema_extra=_flag("admin-user"),
        description="admin user (may be given multiple times; if specified, only these users will be able "
                    "to perform privileged actions; acl-http-header is used to determine the authenticated user)")

    @field_validator("base_path")
    @classmethod
    def _normalize_base_path(cls, value: str) -> str:
        """``/`` or ``/prefix`` without a trailing slash, as Go joins it to every route."""
        path = "/" + value.strip("/")
        if any(c.isspace() or c in "?#" for c in path):
            raise ValueError(f"not a URL path: {value!r}")
        return path

    @field_validator("allow_config_from_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        if value:
            ipaddress.ip_network(value, strict=False)
        return value

    @field_validator("notification_http_endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"expected a fully qualified http(s) URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "NsqadminOptions":
        if not self.nsqlookupd_http_addresses and not self.nsqd_http_addresses:
            raise ValueError("--nsqd-http-address or --lookupd-http-address required")
        if self.nsqlookupd_http_addresses and self.nsqd_http_addresses:
            raise ValueError("use --nsqd-http-address or --lookupd-http-address not both")
        if bool(self.http_client_tls_cert) != bool(self.http_client_tls_key):
            raise ValueError("--http-client-tls-cert and --http-client-tls-key must be given together")
        return self

    def route(self, path: str) -> str:
        """``path`` (starting with ``/``) under the base path."""
        return path if self.base_path == "/" else self.base_path + path

    @property
    def uses_lookupd(self) -> bool:
        return bool(self.nsqlookupd_http_addresses)
