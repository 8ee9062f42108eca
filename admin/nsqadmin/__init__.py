"""nsqadmin: NSQ's web UI and admin API, in Python.

Go nsqadmin v1.3.0's ``/api`` routes, JSON shapes, status codes, flags and admin-action
notifications, over any nsqd and nsqlookupd (ours or Go's); a web UI of its own, served
from this package's ``static/`` folder with nothing fetched from elsewhere.
"""
# the NSQ version nsqadmin names in its pages (as Go nsqadmin v1.3.0 does), not the
# package's release: see nsq_protocol.version
from nsq_protocol.version import NSQ_VERSION as __version__

__all__ = ["__version__"]
