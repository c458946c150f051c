"""A reader identity denied a write, through the official Python SDK with an Entra ID token
credential (the "Entra ID and RBAC" example of docs/security.md). The server's policy assigns the
built-in Data Reader role to principal `reader-oid` (python_sdk.rs puts it, as `--rbac FILE`
would); the account key sets up a container and an item."""
import base64
import json
import time

from azure.core.credentials import AccessToken
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from common import ENDPOINT, KEY, check, client, fresh_database


class EmulatorCredential:
    """A token as the emulator accepts it (the Python suite's CosmosEmulatorCredential):
    header and claims base64url-encoded, the account key as the signature."""

    def __init__(self, oid):
        self.oid = oid

    def get_token(self, *scopes, **kwargs):
        def b64(b):
            return base64.urlsafe_b64encode(b).decode().rstrip("=")
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "kid": "CosmosEmulatorPrimaryMaster"}
        claims = {"aud": "https://localhost.localhost", "oid": self.oid,
                  "iat": now, "nbf": now, "exp": now + 3600}
        jwt = ".".join([b64(json.dumps(header).encode()), b64(json.dumps(claims).encode()),
                        b64(KEY.encode())])
        return AccessToken(jwt, now + 3600)


admin = client()
db = fresh_database(admin, "rbac")
db.create_container("c", partition_key=PartitionKey(path="/pk")).create_item({"id": "1", "pk": "t"})

reader = CosmosClient(ENDPOINT, credential=EmulatorCredential("reader-oid"))
c = reader.get_database_client(db.id).get_container_client("c")
check(c.read_item("1", partition_key="t")["id"] == "1", "the reader reads")
check(len(list(c.query_items("SELECT * FROM c", partition_key="t"))) == 1, "the reader queries")
try:
    c.create_item({"id": "2", "pk": "t"})
    check(False, "the reader's write was accepted")
except exceptions.CosmosHttpResponseError as e:
    check((e.status_code, e.sub_status) == (403, 5301), f"{e.status_code} {e.sub_status}")
    check("does not have required RBAC permissions" in e.message, e.message)
    print(f"denied: {e.status_code} {e.sub_status}")
admin.delete_database(db.id)
print("ok")
