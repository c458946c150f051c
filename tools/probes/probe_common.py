"""What the probes share: start strata on a free port, read its RSS, an official SDK client."""
import os, sys, time, json, subprocess, socket
from azure.cosmos import CosmosClient, PartitionKey
KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
BIN = os.environ.get("STRATA_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "release", "strata"))

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(*extra):
    port = free_port()
    p = subprocess.Popen([BIN, "--in-memory", "--port", str(port), "--log", "warn", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); break
        except OSError: time.sleep(0.05)
    return p, f"http://127.0.0.1:{port}/"

def rss(p):
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) // 1024
    return -1

def client(url):
    return CosmosClient(url, KEY, connection_timeout=600)
