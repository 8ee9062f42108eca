"""The roller: rolling restarts pod by pod (lookupds, then nsqds drained first) and
nsqd scale-down with the leaving pods' messages handed off, recorded in status.rollout."""
