"""Loaded by every interpreter with this folder on PYTHONPATH: pod DNS names resolve
through the test kubelet's address book named by NSQ_E2E_ADDRESS_BOOK (see e2e/pod_dns.py)."""
import os
from pathlib import Path

if os.environ.get("NSQ_E2E_ADDRESS_BOOK"):
    from e2e.pod_dns import ADDRESS_BOOK_ENV, install

    install(Path(os.environ[ADDRESS_BOOK_ENV]))
