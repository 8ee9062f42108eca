"""nsqlookupd: NSQ's discovery service, in Python."""
# the NSQ version nsqlookupd reports on the wire (/info), not the package's release:
# see nsq_protocol.version
from nsq_protocol.version import NSQ_VERSION as __version__

__all__ = ["__version__"]
