"""nsq_local: run NSQ on this machine — real nsqd/nsqlookupd processes, load, and the demo."""
