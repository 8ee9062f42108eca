"""nsqadmin's flags, config file and command line."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from nsq_protocol.flags import build_options, parse_command_line
from nsqadmin import cli
from nsqadmin.options import NsqadminOptions
from tests.servers import BIN

STATIC = Path(__file__).resolve().parents[2] / "admin" / "nsqadmin" / "static"


def options(*argv: str) -> NsqadminOptions:
    return build_options(NsqadminOptions, parse_command_line(argv, NsqadminOptions, {"verbose": True}))


def test_gos_flags_and_defaults() -> None:
    o = options("--lookupd-http-address=a:4161", "-lookupd-http-address", "b:4161", "--admin-user=x",
                "--admin-user=y", "--base-path=/nsq/", "--http-client-request-timeout=1.5s", "--verbose")
    assert o.nsqlookupd_http_addresses == ["a:4161", "b:4161"] and o.admin_users == ["x", "y"]
    assert (o.base_path, o.route("/ping"), o.http_client_request_timeout) == ("/nsq", "/nsq/ping", 1.5)
    assert (o.http_address, o.acl_http_header, o.allow_config_from_cidr, o.http_client_connect_timeout) == \
        ("0.0.0.0:4171", "X-Forwarded-User", "127.0.0.1/8", 2.0)
    assert options("--nsqd-http-address=https://n:4152").nsqd_http_addresses == ["https://n:4152"]


@pytest.mark.parametrize("argv,error", [
    ((), "--nsqd-http-address or --lookupd-http-address required"),
    (("--nsqd-http-address=a:1", "--lookupd-http-address=b:2"), "not both"),
    (("--lookupd-http-address=nope",), "missing port"),
    (("--lookupd-http-address=a:1", "--allow-config-from-cidr=300.1.1.1/8"), "does not appear to be"),
    (("--lookupd-http-address=a:1", "--notification-http-endpoint=not-a-url"), "fully qualified"),
    (("--lookupd-http-address=a:1", "--http-client-tls-cert=c.pem"), "together"),
])
def test_bad_options_are_refused(argv: tuple[str, ...], error: str) -> None:
    with pytest.raises(Exception, match=re.escape(error)):
        options(*argv)
    with pytest.raises(ValidationError):
        NsqadminOptions.model_validate({})


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    version = subprocess.run([str(BIN / "nsqadmin"), "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("nsqadmin v1.3.0")
    assert cli.run(["--no-such-flag"]) == 2
    assert cli.run([]) == 2 and "--lookupd-http-address required" in capsys.readouterr().err
    config = tmp_path / "nsqadmin.toml"
    config.write_text('nsqlookupd_http_addresses = ["a:1"]\nnsqd_http_addresses = ["b:2"]\n')
    assert cli.run([f"--config={config}"]) == 2 and "not both" in capsys.readouterr().err
    assert cli.run([f"--config={tmp_path / 'missing.toml'}"]) == 1
    assert cli.run(["-h"]) == 0 and "-lookupd-http-address" in capsys.readouterr().err


def test_pages_fetch_nothing_from_elsewhere() -> None:
    """Every file the page loads is one of ours, by a path relative to nsqadmin."""
    for path in STATIC.iterdir():
        text = path.read_text()
        urls = set(re.findall(r"""(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s"'`)]*""", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (path.name, urls)  # an XML namespace name, never fetched
        for ref in re.findall(r"""(?:src|href)="([^"]*)\"""", text):
            assert ref.startswith("{{STATIC}}") or ref.startswith("data:"), (path.name, ref)
        for module in re.findall(r"""from "([^"]+)\"""", text):
            assert module.startswith("./") and (STATIC / module[2:]).exists(), (path.name, module)
