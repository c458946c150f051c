"""Anchors of `strata-bench --suite fulltext`, on the documents the suite wrote:

    python fulltext_anchors.py DIR CLIENTS SECONDS

DIR holds docs.tsv (id TAB text) and queries.json (for 1, 2 and 3 words, a list of queries,
each a list of words). Prints one JSON line per measurement: per engine its load ("kind":
"index": documents/s, index bytes) and, per query kind ("contains": every word, top 10;
"bm25": ranked by relevance, top 10) and word count, qps and p50/p99 at CLIENTS threads
each sending one query at a time.

* PostgreSQL 15 (Debian's postgresql-15), a throwaway cluster in a temporary folder (as the
  `postgres` user when run as root): a stored `to_tsvector('english', text)` column with a
  GIN index; `contains` is `tsv @@ plainto_tsquery(...)` (every word), `bm25` is
  `tsv @@ q ORDER BY ts_rank(tsv, q) DESC LIMIT 10` with the words OR-ed (PostgreSQL ranks
  with ts_rank, not BM25: the ranking a PostgreSQL user gets). One connection per thread.
* tantivy (PyPI), in process: English stemming tokenizer, BM25; `contains` all words
  required, `bm25` any word, top 10.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, threading, time

d, clients, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
queries = json.load(open(os.path.join(d, "queries.json")))
docs_path = os.path.join(d, "docs.tsv")


def emit(**kw):
    print(json.dumps(kw), flush=True)


def load_test(name, make_search, bodies):
    """q/s and latency percentiles with `clients` threads; `make_search()` gives each thread
    its own search function (its own connection)."""
    lat, lock = [], threading.Lock()
    warm_until = time.time() + 2
    stop = warm_until + seconds

    def worker(k):
        search = make_search()
        mine, i = [], k
        while True:
            t = time.time()
            if t >= stop:
                break
            search(bodies[i % len(bodies)])
            i += clients
            if t >= warm_until:
                mine.append(time.time() - t)
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lat.sort()
    if not lat:
        return 0.0, 0.0, 0.0
    return len(lat) / seconds, lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    return os.path.join("/usr/lib/postgresql/15/bin", name)


def postgres():
    import psycopg2

    root = tempfile.mkdtemp(prefix="strata-bench-pg-")
    data, sock = os.path.join(root, "data"), os.path.join(root, "sock")
    os.makedirs(sock)
    as_pg = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        os.chmod(d, 0o755)
        os.chmod(docs_path, 0o644)
        as_pg = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    try:
        subprocess.run(as_pg + [pg_bin("initdb"), "-D", data, "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True)
        opts = f"-p {port} -k {sock} -c listen_addresses='' -c shared_buffers=512MB -c max_connections=200"
        subprocess.run(as_pg + [pg_bin("pg_ctl"), "-D", data, "-o", opts, "-w", "-l",
                                os.path.join(root, "log"), "start"], check=True, capture_output=True)
        connect = lambda: psycopg2.connect(host=sock, port=port, user="postgres", dbname="postgres")
        c = connect()
        c.autocommit = True
        cur = c.cursor()
        cur.execute("CREATE TABLE docs (id int PRIMARY KEY, text text NOT NULL, "
                    "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)")
        t = time.time()
        with open(docs_path) as f:
            cur.copy_expert("COPY docs (id, text) FROM STDIN", f)
        cur.execute("CREATE INDEX docs_tsv ON docs USING gin (tsv)")
        cur.execute("VACUUM ANALYZE docs")
        took = time.time() - t
        cur.execute("SELECT count(*) FROM docs")
        n = cur.fetchone()[0]
        cur.execute("SELECT pg_relation_size('docs_tsv')")
        gin = cur.fetchone()[0]
        emit(engine="postgresql", kind="index", load_per_s=n / took, index_bytes=gin,
             note="COPY + GIN build over to_tsvector('english'); index = the GIN index's bytes")
        for terms, qs in enumerate(queries, start=1):
            for kind in ("contains", "bm25"):
                if kind == "contains":
                    sql = "SELECT id FROM docs WHERE tsv @@ plainto_tsquery('english', %s) LIMIT 10"
                    bodies = [" ".join(q) for q in qs]
                else:
                    sql = ("SELECT id FROM docs, to_tsquery('english', %s) q WHERE tsv @@ q "
                           "ORDER BY ts_rank(tsv, q) DESC LIMIT 10")
                    bodies = [" | ".join(q) for q in qs]

                def make():
                    conn = connect()
                    cur = conn.cursor()

                    def search(b):
                        cur.execute(sql, (b,))
                        cur.fetchall()
                    return search
                qps, p50, p99 = load_test(f"pg-{kind}-{terms}", make, bodies)
                emit(engine="postgresql", kind=kind, terms=terms, qps=qps, p50_ms=p50, p99_ms=p99)
        c.close()
    finally:
        subprocess.run(as_pg + [pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def tantivy_anchor():
    import tantivy

    root = tempfile.mkdtemp(prefix="strata-bench-tantivy-")
    try:
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("id", stored=True, indexed=True)
        sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
        schema = sb.build()
        index = tantivy.Index(schema, path=root)
        w = index.writer(heap_size=512 * 1024 * 1024)
        t = time.time()
        n = 0
        with open(docs_path) as f:
            for line in f:
                i, text = line.rstrip("\n").split("\t", 1)
                w.add_document(tantivy.Document(id=int(i), text=text))
                n += 1
        w.commit()
        w.wait_merging_threads()
        took = time.time() - t
        index.reload()
        size = sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(root) for f in fs)
        emit(engine="tantivy", kind="index", load_per_s=n / took, index_bytes=size,
             note="in process, en_stem tokenizer; index = the index folder's bytes")
        for terms, qs in enumerate(queries, start=1):
            for kind in ("contains", "bm25"):
                joiner = " AND " if kind == "contains" else " "
                bodies = [joiner.join(q) for q in qs]

                def make():
                    searcher = index.searcher()

                    def search(b):
                        q = index.parse_query(b, ["text"])
                        searcher.search(q, 10).hits
                    return search
                qps, p50, p99 = load_test(f"tantivy-{kind}-{terms}", make, bodies)
                emit(engine="tantivy", kind=kind, terms=terms, qps=qps, p50_ms=p50, p99_ms=p99)
    finally:
        shutil.rmtree(root, ignore_errors=True)


for anchor in (postgres, tantivy_anchor):
    try:
        anchor()
    except Exception as e:  # an anchor that cannot run is reported, the others still run
        print(f"{anchor.__name__}: {e}", file=sys.stderr)
