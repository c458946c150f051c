"""An application failing over between regions, with the official Python SDK unchanged (the
"Regions and failover" example of docs/regions.md). strata serves "West US" and "East US" on two ports
over one store (`--regions "West US,East US"`); STRATA_ENDPOINT is West US. The application
prefers East US for reads. East US goes down: reads move to West US. Then the write region
fails over to East US: the SDK's write to West US gets 403/3, it re-reads the account and
writes in East US."""
import base64
import hashlib
import hmac
import json
import urllib.parse
import urllib.request
from email.utils import formatdate

from azure.cosmos import PartitionKey

from common import ENDPOINT, KEY, check, client, fresh_database


def control(method, path, body=None):
    """A request to strata's own endpoints (/_strata/...), signed with the account key as
    the SDKs sign theirs: an odd number of path segments is a feed, an even one a resource."""
    segs = [urllib.parse.unquote(s) for s in path.strip("/").split("/")]
    kind, link = (segs[-1], "/".join(segs[:-1])) if len(segs) % 2 else (segs[-2], "/".join(segs))
    date = formatdate(usegmt=True)
    text = f"{method.lower()}\n{kind.lower()}\n{link}\n{date.lower()}\n\n"
    sig = base64.b64encode(hmac.new(base64.b64decode(KEY), text.encode(), hashlib.sha256).digest())
    req = urllib.request.Request(
        ENDPOINT.rstrip("/") + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"x-ms-date": date, "x-ms-version": "2020-07-15",
                 "authorization": urllib.parse.quote(f"type=master&ver=1.0&sig={sig.decode()}")})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


regions = {r["name"]: r["port"] for r in control("GET", "/_strata/regions")["regions"]}

served = []
def where(response):
    """The port of the region that served a request (its Content-Location)."""
    served.append(urllib.parse.urlparse(response.http_response.headers["Content-Location"]).port)

admin = client()
db = fresh_database(admin, "regions")
db.create_container("orders", partition_key=PartitionKey(path="/customer"))
app = client(preferred_locations=["East US", "West US"])
orders = app.get_database_client(db.id).get_container_client("orders")
orders.create_item({"id": "1", "customer": "contoso"}, raw_response_hook=where)
check(served[-1] == regions["West US"], f"writes go to the write region: {served}")
orders.read_item("1", "contoso", raw_response_hook=where)
check(served[-1] == regions["East US"], f"reads go to the preferred region: {served}")

# East US goes down: the read is retried in West US, the next preferred region.
control("PUT", "/_strata/regions/East%20US", {"kind": "unavailable"})
orders.read_item("1", "contoso", raw_response_hook=where)
check(served[-1] == regions["West US"], f"the read failed over to West US: {served}")
control("PUT", "/_strata/regions/East%20US", {})

# The write region moves to East US: West US refuses writes (403/3), the SDK re-reads the
# account and writes in East US.
control("POST", "/_strata/regions/East%20US/failover")
orders.upsert_item({"id": "2", "customer": "contoso"}, raw_response_hook=where)
check(served[-1] == regions["East US"], f"the write failed over to East US: {served}")
check(orders.read_item("2", "contoso")["id"] == "2", "the write is there")
print("ok")
