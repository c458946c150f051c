"""Query advice through the official SDK, as its own end-to-end test asks it
(`test_populate_query_advice` in azure-cosmos's tests/test_query.py, skipped there because
the official emulator gives no advice): each query's first page carries the rule it breaks,
which the SDK decodes into `x-ms-cosmos-query-advice` ("QA1002: ... STARTSWITH ...")."""
import uuid

from azure.cosmos import PartitionKey

from common import check, client, fresh_database

c = client()
db = fresh_database(c, "advice")
cont = db.create_container("c", partition_key=PartitionKey(path="/pk"))
cont.create_item({"pk": "pk", "id": str(uuid.uuid4()), "name": "test document",
                  "tags": [{"name": "python"}, {"name": "cosmos"}],
                  "timestamp": "2099-01-01T00:00:00Z", "ticks": 0, "ts": 0})
for query, rule, words in [
    ('SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, {"name": "python"}, true)', "QA1000", "EXISTS"),
    ('SELECT * FROM c WHERE CONTAINS(c.name, "test")', "QA1002", "STARTSWITH"),
    ('SELECT * FROM c WHERE STARTSWITH(c.name, "test", true)', "QA1003", "LOWER"),
    ('SELECT * FROM c WHERE ENDSWITH(c.name, "document", true)', "QA1004", "REVERSE"),
    ("SELECT * FROM c WHERE c.timestamp < GetCurrentDateTime()", "QA1007", "GetCurrentDateTimeStatic"),
    ("SELECT * FROM c WHERE c.ticks < GetCurrentTicks()", "QA1008", "GetCurrentTicksStatic"),
    ("SELECT * FROM c WHERE c.ts < GetCurrentTimestamp()", "QA1009", "GetCurrentTimestampStatic"),
]:
    # Drained as the SDK's test drains it (the 2099 timestamp matches no row: advice comes
    # with an empty page too).
    list(cont.query_items(query, partition_key="pk", populate_query_advice=True))
    advice = cont.client_connection.last_response_headers.get("x-ms-cosmos-query-advice")
    check(advice is not None and rule in advice and words in advice, (query, advice))
# Without asking, no advice.
list(cont.query_items('SELECT * FROM c WHERE CONTAINS(c.name, "test")', partition_key="pk"))
check(cont.client_connection.last_response_headers.get("x-ms-cosmos-query-advice") is None,
      cont.client_connection.last_response_headers)
c.delete_database(db)
print("ok")
