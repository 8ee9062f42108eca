"""One reconcile pass per object kind: data in (the object's body), status out."""
