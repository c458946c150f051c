"""Throughput buckets and priority through the official Python SDK: its `throughput_bucket`
(client and request) and `priority` options reach the server as headers; writes past their
bucket's share are answered 429 / 3212, which the SDK retries transparently; a bucket id
outside 1-5 is a 400. The buckets are set on the offer as the SDK reads and replaces it."""
from azure.cosmos import PartitionKey

from common import check, client, expect_status

c = client()
db = c.create_database("buckets")
cont = db.create_container("c", partition_key=PartitionKey(path="/pk"), offer_throughput=1000)
# The SDK has no first-class setter for buckets: replace the offer it reads, as its own
# replace_throughput does, with content.throughputBuckets added.
offer = list(c.client_connection.QueryOffers("SELECT * FROM root r"))[0]
offer["content"]["throughputBuckets"] = [{"id": 1, "maxThroughputPercentage": 10}]
c.client_connection.ReplaceOffer(offer["_self"], offer)
offer = list(c.client_connection.QueryOffers("SELECT * FROM root r"))[0]
check(offer["content"]["throughputBuckets"] == [{"id": 1, "maxThroughputPercentage": 10}], offer)

sent = []
hook = lambda response: sent.append(response.http_request.headers.get("x-ms-cosmos-throughput-bucket"))
# 60 writes of ~6 RU in bucket 1 (100 RU/s): throttled on the way, retried by the SDK.
for i in range(60):
    cont.create_item({"id": f"b{i}", "pk": "k"}, throughput_bucket=1, priority="Low")
n = list(cont.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="k"))
check(n == [60], n)
# A client-wide bucket applies to every request it sends.
bucketed = client(throughput_bucket=2).get_database_client("buckets").get_container_client("c")
bucketed.read_item("b0", partition_key="k", raw_response_hook=hook)
check(sent == ["2"], sent)
expect_status(lambda: cont.read_item("b0", partition_key="k", throughput_bucket=9), 400)
expect_status(lambda: cont.read_item("b0", partition_key="k", priority="Urgent"), 400)
print("ok")
