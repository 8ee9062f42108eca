"""The client's version, sent to nsqd in IDENTIFY's user_agent: the package's release,
written once in pyproject.toml (nsq_protocol.version)."""
from nsq_protocol.version import RELEASE as __version__

__all__ = ["__version__"]
