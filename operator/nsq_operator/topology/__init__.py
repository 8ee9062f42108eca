"""Topics and channels kept on every nsqd of a cluster through nsqd's HTTP API."""
