"""nsqadmin: NSQ's web UI and admin API, in Python.

Go nsqadmin v1.3.0's ``/api`` routes, JSON shapes, status codes, flags and admin-action
notifications, over any nsqd and nsqlookupd (ours or Go's); a web UI of its own, served
from this package's ``static/`` folder with nothing fetched from elsewhere.
"""
__version__ = "1.3.0"
