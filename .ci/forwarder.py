#!/usr/bin/env python3
"""Two or more nodes behind one address: a round-robin TCP forwarder.

Each client connection goes to the next backend in turn and its bytes are
copied both ways unchanged; a client that opens one connection per request
(urllib, as the contract suite does) has its requests alternated between
the nodes. Standard library only.

    forwarder.py --listen 127.0.0.1:0 HOST:PORT HOST:PORT ...

Prints "listening on http://HOST:PORT" once bound; on SIGTERM, prints how
many connections each backend took and exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import socket
import sys
import threading


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def serve(client: socket.socket, backend: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(backend, timeout=10)
        upstream.settimeout(None)
    except OSError as error:
        print(f"forwarder: {backend[0]}:{backend[1]}: {error}", file=sys.stderr)
        client.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:0", type=address)
    parser.add_argument("backends", nargs="+", type=address)
    args = parser.parse_args()

    listener = socket.create_server(args.listen)
    host, port = listener.getsockname()[:2]
    taken = [0] * len(args.backends)

    def report(*_: object) -> None:
        counts = ", ".join(
            f"{b[0]}:{b[1]} {n}" for b, n in zip(args.backends, taken)
        )
        print(f"forwarder: connections per backend: {counts}", file=sys.stderr, flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    print(f"forwarder listening on http://{host}:{port}", file=sys.stderr, flush=True)
    turns = itertools.cycle(range(len(args.backends)))
    while True:
        client, _ = listener.accept()
        index = next(turns)
        taken[index] += 1
        threading.Thread(
            target=serve, args=(client, args.backends[index]), daemon=True
        ).start()


if __name__ == "__main__":
    sys.exit(main())
