"""The official Python SDK retries 429s transparently (honouring x-ms-retry-after-ms)."""
from azure.cosmos import PartitionKey

from common import check, client

c = client()
db = c.create_database("thr")
cont = db.create_container("c", partition_key=PartitionKey(path="/pk"), offer_throughput=400)
for i in range(250):
    cont.create_item({"id": f"i{i}", "pk": "hot", "pad": "x" * 200})
n = list(cont.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="hot"))
check(n == [250], n)
print("ok")
