"""The client's version, sent to nsqd in IDENTIFY's user_agent."""
__version__ = "0.1.0"
