"""Replicated topics (beyond NSQ): every nsqd owns the messages published to it and
copies them to the next peers of the ring; a publish is answered once a quorum of the
replicas holds it, and when an owner is lost a surviving replica adopts its messages.
See docs/replication.md."""
