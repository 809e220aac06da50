#!/usr/bin/env python3
"""Two or more nodes behind one address: a round-robin TCP forwarder.

Each client connection goes to the next backend in turn and its bytes are
copied both ways unchanged; a client that opens one connection per request
(urllib, as the contract suite does) has its requests alternated between
the nodes. Standard library only.

    forwarder.py [--hash-user] --listen 127.0.0.1:0 HOST:PORT HOST:PORT ...

With --hash-user it is the reference of precedent's routing rule: a
connection's first request goes to the backend chosen by rendezvous
hashing of its X-Precedent-User header (the highest SHA-256 of user and
backend; round robin without the header), sent with "Connection: close"
so that each request is routed on its own.

Prints "listening on http://HOST:PORT" once bound; on SIGTERM, prints how
many connections each backend took (and with --hash-user, how many users
each saw and how many users reached more than one) and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
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


USER_HEADER = b"x-precedent-user"


def read_head(client: socket.socket) -> bytes | None:
    """The bytes of the client's first request up to the end of its head
    (and whatever followed in the same reads); None if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 1 << 20:
            return None
    return data


def routed(data: bytes) -> tuple[bytes, str | None]:
    """The request with "Connection: close" in place of any Connection
    header, and its X-Precedent-User value."""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    user = None
    kept = [lines[0]]
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == USER_HEADER:
            user = value.strip().decode("utf-8", "replace")
        if name != b"connection":
            kept.append(line)
    kept.append(b"Connection: close")
    return b"\r\n".join(kept) + b"\r\n\r\n" + rest, user


def rendezvous(user: str, backends: list[tuple[str, int]]) -> int:
    """The backend whose SHA-256 of (user, backend) is highest."""
    def score(index: int) -> bytes:
        host, port = backends[index]
        return hashlib.sha256(f"{user}\n{host}:{port}".encode()).digest()

    return max(range(len(backends)), key=score)


def serve(
    client: socket.socket, backend: tuple[str, int], first: bytes = b""
) -> None:
    try:
        upstream = socket.create_connection(backend, timeout=10)
        upstream.settimeout(None)
    except OSError as error:
        print(f"forwarder: {backend[0]}:{backend[1]}: {error}", file=sys.stderr)
        client.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    if first:
        try:
            upstream.sendall(first)
        except OSError:
            pass
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:0", type=address)
    parser.add_argument(
        "--hash-user",
        action="store_true",
        help="route by rendezvous hashing of X-Precedent-User",
    )
    parser.add_argument("backends", nargs="+", type=address)
    args = parser.parse_args()

    listener = socket.create_server(args.listen)
    host, port = listener.getsockname()[:2]
    taken = [0] * len(args.backends)
    users: list[set[str]] = [set() for _ in args.backends]
    lock = threading.Lock()

    def report(*_: object) -> None:
        counts = ", ".join(
            f"{b[0]}:{b[1]} {n}" for b, n in zip(args.backends, taken)
        )
        print(f"forwarder: connections per backend: {counts}", file=sys.stderr, flush=True)
        if args.hash_user:
            with lock:
                per_backend = ", ".join(
                    f"{b[0]}:{b[1]} {len(u)}" for b, u in zip(args.backends, users)
                )
                seen: dict[str, int] = {}
                for backend_users in users:
                    for user in backend_users:
                        seen[user] = seen.get(user, 0) + 1
                split = sorted(user for user, n in seen.items() if n > 1)
            print(f"forwarder: users per backend: {per_backend}", file=sys.stderr)
            print(
                f"forwarder: users on several backends: {len(split)}"
                + (f" ({', '.join(split)})" if split else ""),
                file=sys.stderr,
                flush=True,
            )
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    print(f"forwarder listening on http://{host}:{port}", file=sys.stderr, flush=True)
    turns = itertools.cycle(range(len(args.backends)))

    def route(client: socket.socket) -> None:
        """--hash-user: reads the first request's head, then forwards."""
        try:
            data = read_head(client)
        except OSError:
            data = None
        if data is None:
            client.close()
            return
        request, user = routed(data)
        with lock:
            if user is None:
                index = next(turns)
            else:
                index = rendezvous(user, args.backends)
                users[index].add(user)
            taken[index] += 1
        serve(client, args.backends[index], request)

    while True:
        client, _ = listener.accept()
        if args.hash_user:
            threading.Thread(target=route, args=(client,), daemon=True).start()
            continue
        index = next(turns)
        taken[index] += 1
        threading.Thread(
            target=serve, args=(client, args.backends[index]), daemon=True
        ).start()


if __name__ == "__main__":
    sys.exit(main())
