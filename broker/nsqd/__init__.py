"""nsqd: NSQ's broker, in Python."""
# the NSQ version nsqd reports on the wire (IDENTIFY, /info, /stats, lookupd), not the
# package's release: see nsq_protocol.version
from nsq_protocol.version import NSQ_VERSION as __version__

__all__ = ["__version__"]
