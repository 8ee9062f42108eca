"""One JSON object a line on stdout, flushed at once so the test sees it live."""
from __future__ import annotations

import json
import sys


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def text(value: bytes | str) -> str:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value
