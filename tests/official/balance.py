"""A round-robin TCP balancer for running the official suite against several strata
processes: each new connection to 127.0.0.1:PORT goes to the next backend port in turn
(TLS passes through untouched). Prints one line per connection: the backend it went to.

    python balance.py PORT BACKEND_PORT [BACKEND_PORT ...]
"""

import asyncio
import itertools
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main():
    port, backends = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
    turn = itertools.cycle(backends)

    async def handle(client_reader, client_writer):
        backend = next(turn)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", backend)
        except OSError:
            client_writer.close()
            return
        print(f"connection -> {backend}", flush=True)
        await asyncio.gather(pipe(client_reader, writer), pipe(reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
