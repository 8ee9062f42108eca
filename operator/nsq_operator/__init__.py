"""The NSQ operator: CRD models, pure manifest builders, kopf handlers and the
reconcilers that drive nsqd and nsqlookupd through their HTTP APIs."""
