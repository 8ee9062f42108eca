"""Talking to the Kubernetes API: an async client on the operator's own login, and the
create-or-patch that applies the builders' manifests."""
