"""Resource tokens through the official Python SDK, unchanged: a user, a tenant-scoped
permission on a /TenantId/UserId/SessionId container (a prefix of the hierarchical key,
strata's extension), and clients built from the token in both of the SDK's forms."""
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from common import ENDPOINT, check, client, expect_status, fresh_database

admin = client()
db = fresh_database(admin, "tokens")
try:
    sessions = db.create_container(
        "sessions",
        partition_key=PartitionKey(path=["/TenantId", "/UserId", "/SessionId"], kind="MultiHash"),
    )
    for t in ("contoso", "fabrikam"):
        for u in ("alice", "bob"):
            sessions.create_item({"id": f"{t}-{u}", "TenantId": t, "UserId": u, "SessionId": "s1"})
    user = db.create_user({"id": "contoso-app"})
    link = f"dbs/{db.id}/colls/{sessions.id}"
    perm = user.create_permission({
        "id": "contoso-all",
        "permissionMode": "All",
        "resource": link,
        "resourcePartitionKey": ["contoso"],
    })
    token = perm.properties["_token"]
    check(token.startswith("type=resource"), token)

    # The {resource_link: token} form.
    tenant = CosmosClient(ENDPOINT, {link: token})
    c = tenant.get_database_client(db.id).get_container_client(sessions.id)
    items = list(c.query_items("SELECT * FROM c", enable_cross_partition_query=True))
    check(sorted(i["id"] for i in items) == ["contoso-alice", "contoso-bob"], items)
    check(c.read_item("contoso-bob", partition_key=["contoso", "bob", "s1"])["id"] == "contoso-bob", "read")
    c.upsert_item({"id": "contoso-carol", "TenantId": "contoso", "UserId": "carol", "SessionId": "s9"})
    expect_status(lambda: c.read_item("fabrikam-bob", partition_key=["fabrikam", "bob", "s1"]), 403)
    expect_status(
        lambda: c.create_item({"id": "x", "TenantId": "fabrikam", "UserId": "eve", "SessionId": "s1"}), 403)
    # A prefix query inside the tenant works; one for the other tenant's prefix (which the
    # SDK sends as an EPK range) is narrowed to the token's scope and finds nothing.
    alice = list(c.query_items("SELECT * FROM c", partition_key=["contoso", "alice"]))
    check([i["id"] for i in alice] == ["contoso-alice"], alice)
    other = list(c.query_items("SELECT * FROM c", partition_key=["fabrikam"]))
    check(other == [], other)

    # The resource_tokens form, a read-only permission on the whole container.
    reader = user.create_permission({"id": "read-all", "permissionMode": "Read", "resource": link})
    ro = CosmosClient(ENDPOINT, credential={link: reader.properties["_token"]})
    rc = ro.get_database_client(db.id).get_container_client(sessions.id)
    check(len(list(rc.read_all_items())) == 5, "reader sees every tenant")
    expect_status(lambda: rc.upsert_item({"id": "y", "TenantId": "contoso", "UserId": "z", "SessionId": "s"}), 403)

    # Deleting the permission retires its token.
    user.delete_permission("contoso-all")
    expect_status(lambda: c.read_item("contoso-bob", partition_key=["contoso", "bob", "s1"]), 401)
    print("ok")
finally:
    admin.delete_database(db.id)
