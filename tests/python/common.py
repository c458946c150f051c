"""Shared helpers for the official-SDK test scripts: endpoint, key and a fresh database."""
import os
import sys
import uuid

from azure.cosmos import CosmosClient

ENDPOINT = os.environ.get("STRATA_ENDPOINT", "https://localhost:8081/")
KEY = os.environ.get(
    "STRATA_KEY",
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==",
)


def client(**kwargs):
    return CosmosClient(ENDPOINT, KEY, **kwargs)


def fresh_database(c, label):
    return c.create_database(f"{label}-{uuid.uuid4().hex[:8]}")


def check(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr)
        sys.exit(1)


def expect_status(fn, status, substatus=None):
    """Runs fn, which must raise a CosmosHttpResponseError with this status (and substatus)."""
    from azure.cosmos import exceptions
    try:
        fn()
    except exceptions.CosmosHttpResponseError as e:
        check(e.status_code == status, f"expected {status}, got {e.status_code}: {e.message}")
        if substatus is not None:
            check(e.sub_status == substatus, f"expected substatus {substatus}, got {e.sub_status}")
        return e
    check(False, f"expected HTTP {status}, but the call succeeded")
