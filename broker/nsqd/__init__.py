"""nsqd: NSQ's broker, in Python."""
__version__ = "1.3.0"
