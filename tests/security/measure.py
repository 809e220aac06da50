#!/usr/bin/env python3
"""Measures two hardening targets against a precedent binary on loopback.

    python3 tests/security/measure.py target/release/precedent

1. Odd methods: 10,000 requests whose method is 4,000 random capital
   letters; reports the size of /metrics and the server's RSS before and
   after (target: /metrics under 100 KB, RSS within 20 MB of before), and
   after a second batch of as many (bounded, not growing).
2. Stalled uploads: with 300 connections that declared a 100,000-byte body
   and sent none, Adds and Searches from one client; reports p50/p99 and
   failures (target: p99 under 100 ms).

Traffic goes to 127.0.0.1 only; every loop is bounded.
"""

import http.client
import json
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time


def start(binary, data_dir):
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        line = process.stderr.readline()
        match = re.search(r"listening on http://([0-9.]+):([0-9]+)", line)
        if match:
            threading.Thread(target=lambda: process.stderr.read(), daemon=True).start()
            return process, match.group(1), int(match.group(2))
    process.kill()
    raise SystemExit("server did not start")


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def raw(host, port, data):
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def get(host, port, path):
    connection = http.client.HTTPConnection(host, port, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def odd_methods(host, port, pid, count=10_000, threads=8):
    for _ in range(20):
        get(host, port, "/health")
    get(host, port, "/metrics")
    before = rss_mb(pid)
    statuses = {}
    lock = threading.Lock()

    def worker(share, seed, odd=True):
        rng = random.Random(seed)
        for _ in range(share):
            method = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4000)) if odd else "GET"
            answer = raw(host, port, f"{method} /health HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
            status = answer.split(b" ", 2)[1].decode() if answer else "none"
            with lock:
                statuses[status] = statuses.get(status, 0) + 1

    # As many ordinary requests first, over as many connections: what the
    # server holds after any such traffic (allocator and thread caches) is
    # counted apart from what odd methods would add.
    cold = rss_mb(pid)
    warm_up = [threading.Thread(target=worker, args=(count // threads, 1000 + seed, False)) for seed in range(threads)]
    for thread in warm_up:
        thread.start()
    for thread in warm_up:
        thread.join()
    before = rss_mb(pid)
    statuses.clear()
    started = time.time()
    after_each = []
    for batch in range(2):
        workers = [
            threading.Thread(target=worker, args=(count // threads, batch * threads + seed))
            for seed in range(threads)
        ]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        after_each.append(round(rss_mb(pid), 1))
    elapsed = time.time() - started
    status, metrics = get(host, port, "/metrics")
    after = after_each[0]
    return {
        "requests": count,
        "statuses": statuses,
        "seconds": round(elapsed, 1),
        "metrics_status": status,
        "metrics_bytes": len(metrics),
        "rss_cold_mb": round(cold, 1),
        "rss_before_mb (after as many GET /health)": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_growth_mb": round(after - before, 1),
        "rss_after_second_batch_mb": after_each[1],
    }


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def stalled_uploads(host, port, stalled=300, rounds=200):
    sockets = []
    for _ in range(stalled):
        sock = socket.create_connection((host, port), timeout=30)
        sock.sendall(
            f"POST /search HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n".encode()
        )
        sockets.append(sock)
    time.sleep(0.5)
    connection = http.client.HTTPConnection(host, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    timings = {"add": [], "search": []}
    failures = {"add": 0, "search": 0}
    for index in range(rounds):
        add = {
            "request_id": f"stall-{index}",
            "user_id": "stall-user",
            "session_id": f"s{index % 20}",
            "messages": [
                {"role": "user", "content": f"Fix the flaky test number {index} in tests/test_io.py"},
                {"role": "assistant", "content": "Patched the retry loop in src/io.py; tests pass."},
            ],
        }
        search = {"query": f"flaky test {index} in tests/test_io.py", "user_id": "stall-user", "top_k": 10}
        for kind, path, body in (("add", "/add", add), ("search", "/search", search)):
            started = time.perf_counter()
            connection.request("POST", path, json.dumps(body), headers)
            response = connection.getresponse()
            response.read()
            timings[kind].append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                failures[kind] += 1
    still_open = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            still_open += 1 if sock.recv(1) is None else 0
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
        sock.close()
    return {
        "stalled_connections": stalled,
        "stalled_still_open_at_end": still_open,
        **{
            f"{kind}_{name}_ms": round(percentile(values, fraction), 1)
            for kind, values in timings.items()
            for name, fraction in (("p50", 0.5), ("p99", 0.99))
        },
        "add_failures": failures["add"],
        "search_failures": failures["search"],
        "requests_each": rounds,
    }


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory() as work:
        process, host, port = start(sys.argv[1], f"{work}/data")
        try:
            report = {
                "odd_methods": odd_methods(host, port, process.pid),
                "stalled_uploads": stalled_uploads(host, port),
            }
        finally:
            process.terminate()
            process.wait(timeout=60)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
