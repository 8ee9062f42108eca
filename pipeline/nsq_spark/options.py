"""The connector's options as Spark hands them over: every value a string, keys in any
case and spelled with underscores, dashes or camelCase (``max_in_flight``,
``max-in-flight`` and ``maxInFlight`` are one option).

One pydantic model for the source and one for the sink. Options of the client's
:class:`nsq_client.Config` (TLS, AUTH, compression, timeouts, identity) are accepted by
both and checked by that model. Any mistake raises :class:`OptionError` whose message
names the option, so a query fails at start saying which option is wrong.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nsq_client import Config
from nsq_protocol.flags import parse_duration
from nsq_protocol.host_port import split_dial_address, split_host_port
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

# options of nsq_client.Config a Spark user may set (the rest are the connector's own)
CLIENT_OPTION_NAMES = (
    "dial_timeout", "read_timeout", "write_timeout", "heartbeat_interval", "output_buffer_size",
    "output_buffer_timeout", "lookupd_poll_timeout", "client_id", "hostname", "user_agent",
    "tls_v1", "tls_root_ca_file", "tls_insecure_skip_verify", "tls_cert", "tls_key",
    "tls_min_version", "tls_server_name", "deflate", "deflate_level", "snappy", "auth_secret",
)


# what Spark itself puts among a writer's options
SPARK_OWN_OPTIONS = frozenset({"path", "paths", "checkpointlocation"})


class OptionError(ValueError):
    """An option of the nsq data source is missing, unknown or invalid."""


def _seconds(value: Any) -> Any:
    """``"30s"``, ``"250ms"`` (Go durations) or a bare number of seconds."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            return parse_duration(text)
    return value


def _address_list(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


Seconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0)]
AddressList = Annotated[tuple[str, ...], BeforeValidator(_address_list)]


class _Endpoints(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str
    nsqd_tcp_addresses: AddressList = ()
    lookupd_http_addresses: AddressList = ()
    lookupd_poll_interval: Seconds = 15.0
    client: dict[str, str] = Field(default_factory=dict)

    @field_validator("topic")
    @classmethod
    def _topic_name(cls, value: str) -> str:
        if not is_valid_topic_name(value):
            raise ValueError(f"{value!r} is not a valid NSQ topic name")
        return value

    @field_validator("nsqd_tcp_addresses")
    @classmethod
    def _host_ports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            try:
                split_dial_address(address)
            except ValueError as e:
                raise ValueError(f"{address!r} is not a host:port address: {e}") from None
        return value

    @model_validator(mode="after")
    def _somewhere_to_connect(self) -> "_Endpoints":
        if not self.nsqd_tcp_addresses and not self.lookupd_http_addresses:
            raise ValueError("give nsqd_tcp_addresses or lookupd_http_addresses (or both)")
        return self

    def client_config(self, **connector_settings: Any) -> Config:
        """The client's Config: the user's client options plus the connector's own."""
        return Config(**self.client, lookupd_poll_interval=self.lookupd_poll_interval, **connector_settings)


class SourceOptions(_Endpoints):
    """``spark.readStream.format("nsq")``."""

    channel: str
    max_messages_per_batch: Annotated[int, Field(ge=1)] | None = None
    max_in_flight: Annotated[int, Field(ge=1)] = 2500
    connections_per_nsqd: Annotated[int, Field(ge=1, le=64)] = 1
    msg_timeout: Seconds | None = None
    touch_interval: Seconds | None = None
    partitions: Annotated[int, Field(ge=1, le=10_000)] = 2
    drain_file: str | None = None
    batch_transfer: Literal["fetch", "inline"] = "fetch"
    batch_server_address: str | None = None   # host or host:port the tasks fetch rows from

    @field_validator("channel")
    @classmethod
    def _channel_name(cls, value: str) -> str:
        if not is_valid_channel_name(value):
            raise ValueError(f"{value!r} is not a valid NSQ channel name")
        return value

    @model_validator(mode="after")
    def _touch_before_timeout(self) -> "SourceOptions":
        if self.msg_timeout and self.touch_interval and self.touch_interval >= self.msg_timeout:
            raise ValueError(f"touch_interval ({self.touch_interval:g}s) must be shorter than "
                             f"msg_timeout ({self.msg_timeout:g}s)")
        return self

    @field_validator("batch_server_address")
    @classmethod
    def _listen_address(cls, value: str | None) -> str | None:
        if value:
            cls._split_listen(value)
        return value

    @staticmethod
    def _split_listen(value: str) -> tuple[str, int]:
        if ":" not in value:
            return value, 0  # a host alone: any port
        return split_host_port(value)  # an empty host (':7078') is Spark's host too

    def batch_server_host_port(self) -> tuple[str, int]:
        """Where the reader listens for tasks: ('', 0) for Spark's host and any port."""
        return self._split_listen(self.batch_server_address) if self.batch_server_address else ("", 0)

    def connection_config(self) -> Config:
        return self.client_config(max_in_flight=self.max_in_flight, msg_timeout=self.msg_timeout or 0)


class SinkOptions(_Endpoints):
    """``df.write.format("nsq")`` and ``df.writeStream.format("nsq")``."""

    body_column: str = "body"
    max_mpub_messages: Annotated[int, Field(ge=1)] = 1000
    max_mpub_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    publish_concurrency: Annotated[int, Field(ge=1, le=256)] = 4


M = TypeVar("M", bound=_Endpoints)


def _canonical(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def parse_options(model: type[M], raw: Mapping[str, str]) -> M:
    """Build ``model`` from Spark's options; :class:`OptionError` names the faulty option."""
    own = {_canonical(name): name for name in model.model_fields if name != "client"}
    client_names = {_canonical(name): name for name in CLIENT_OPTION_NAMES}
    values: dict[str, Any] = {}
    client: dict[str, str] = {}
    for key, value in raw.items():
        canonical = _canonical(key)
        if key.lower() in SPARK_OWN_OPTIONS:
            continue
        if canonical in own:
            values[own[canonical]] = value
        elif canonical in client_names:
            client[client_names[canonical]] = value
        else:
            known = ", ".join(sorted([*own.values(), *CLIENT_OPTION_NAMES]))
            raise OptionError(f"nsq option {key!r} is unknown (known options: {known})")
    try:
        options = model(**values, client=client)
        if isinstance(options, SourceOptions):
            options.connection_config()
        else:
            options.client_config()
    except ValidationError as err:
        raise OptionError(describe(err)) from None
    return options


def describe(err: ValidationError) -> str:
    """One line per problem, each naming the option."""
    lines = []
    for problem in err.errors():
        location = [str(part) for part in problem["loc"] if part != "client"]
        message = problem["msg"].removeprefix("Value error, ")
        if not location:
            lines.append(f"nsq options: {message}")
        elif problem["type"] == "missing":
            lines.append(f"nsq option {location[0]!r} is required")
        else:
            given = problem.get("input")
            shown = "" if str(given) in message else f" (got {given!r})"
            lines.append(f"nsq option {location[0]!r}: {message}{shown}")
    return "; ".join(lines)
