"""nsqlookupd: NSQ's discovery service, in Python."""
__version__ = "1.3.0"
