#!/usr/bin/env python3
"""Collect the ranking features of every candidate of every benchmark query.

Ingests a benchmark's scopes into a running precedent server (the same Adds,
chunking and request ids as `amlbench.py run`, under the benchmark's own
user ids, so a second run is a series of idempotent retries), then for each
query calls `POST /v1/search/explain` (every candidate with its features)
and `POST /search` (the answer as served, for the size of each session's
items), and writes one JSON line per query:

    {"query_id", "condition", "repo", "user_id", "instance_id", "query_language",
     "num_sessions", "candidates": [{"session_id", "instance_id", "grade",
     "language", "outcome", "features", "score", "dropped", ...}],
     "answer": [{"session_id", "chars", "score"}]}

Standard-library Python; imports `amlbench` from the evaluation directory
(`--eval-dir`, default `../shared/eval`). Usage:

    python3 scripts/relevance/collect.py --url http://127.0.0.1:8080 \
        --bench ../shared/eval/data/dev [--scopes short-scopes.jsonl] \
        [--ingest] --out dumps/full.jsonl.gz
"""

import argparse
import concurrent.futures
import gzip
import json
import os
import sys
import time
import urllib.request


def load_amlbench(eval_dir):
    sys.path.insert(0, eval_dir)
    import amlbench  # noqa: E402

    return amlbench


def post(url, path, payload, timeout=120.0):
    body = json.dumps(payload).encode("utf-8")
    for attempt in range(5):
        request = urllib.request.Request(
            url + path, data=body, headers={"content-type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except Exception as error:  # transport error or 5xx: retry like the harness
            if attempt == 4:
                raise
            print(f"retry {path}: {error}", file=sys.stderr)
            time.sleep(0.5 * 2**attempt)
    return None


def answer_sessions(answer):
    """A Search answer's sessions in the order they first appear, each with
    the characters its items hold and its first item's score."""
    chars, scores, order = {}, {}, []
    for item in answer.get("data", []):
        session_id = item.get("session_id")
        chars[session_id] = chars.get(session_id, 0) + len(item["content"])
        scores.setdefault(session_id, item.get("score"))
        if session_id not in order:
            order.append(session_id)
    return [{"session_id": s, "chars": chars[s], "score": scores[s]} for s in order]


def ingest(amlbench, url, bench, workers):
    adapter = amlbench.HttpAdapter(url, "none", "/add", "/search")

    def one(scope):
        for request in amlbench.add_requests(scope, bench, scope.user_id):
            adapter.add(request)
        return len(scope.session_ids)

    started = time.time()
    done = amlbench.parallel_map(one, bench.scopes, workers)
    violations = adapter.violations()
    print(f"ingested {len(bench.scopes)} scopes, {sum(done)} sessions in {time.time() - started:.0f} s,"
          f" {len(violations)} violations", file=sys.stderr)


def load_scopes(amlbench, path):
    """The scopes of a scopes file (the bench's own or a copy with other queries)."""
    scopes = []
    for record in amlbench._read_jsonl(path):
        queries = tuple(
            amlbench.Query(q["query_id"], q["instance_id"], q["query"], dict(q["gold"]))
            for q in record["queries"]
        )
        scopes.append(amlbench.Scope(record["user_id"], record["condition"], record.get("repo", ""),
                                     tuple(record["session_ids"]), queries))
    return scopes


def collect(url, bench, scopes, workers):
    jobs = [(scope, query) for scope in scopes for query in scope.queries]

    def one(job):
        scope, query = job
        payload = {"query": query.text, "user_id": scope.user_id, "top_k": 100}
        explained = post(url, "/v1/search/explain", payload)
        started = time.perf_counter()
        answer = post(url, "/search", payload)
        search_ms = (time.perf_counter() - started) * 1000.0
        candidates = []
        for candidate in explained["candidates"]:
            session_id = candidate["session_id"]
            session = bench.sessions.get(session_id)
            candidate = dict(candidate)
            candidate["instance_id"] = session.instance_id if session else None
            candidate["session_repo"] = session.repo if session else None
            candidate["kind"] = session.kind if session else None
            candidate["grade"] = query.gold.get(session_id, 0)
            candidates.append(candidate)
        return {
            "query_id": query.query_id,
            "condition": scope.condition,
            "repo": scope.repo,
            "user_id": scope.user_id,
            "instance_id": query.instance_id,
            "gold": query.gold,
            "gold_instances": {bench.sessions[s].instance_id: g for s, g in query.gold.items() if s in bench.sessions},
            "query_language": explained["query"].get("language"),
            "num_sessions": explained.get("num_sessions"),
            "num_scope_sessions": len(scope.session_ids),
            "candidates": candidates,
            "answer": answer_sessions(answer),
            "search_ms": search_ms,
        }

    return [r for r in concurrent.futures.ThreadPoolExecutor(max_workers=workers).map(one, jobs)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--bench", default="../shared/eval/data/dev")
    parser.add_argument("--scopes", help="a scopes file to query instead of the bench's own (same user ids)")
    parser.add_argument("--eval-dir", default="../shared/eval")
    parser.add_argument("--ingest", action="store_true", help="send every Add first (idempotent)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    amlbench = load_amlbench(args.eval_dir)
    bench = amlbench.load_bench(args.bench)
    if args.ingest:
        ingest(amlbench, args.url, bench, args.workers)
    scopes = load_scopes(amlbench, args.scopes) if args.scopes else bench.scopes
    started = time.time()
    records = collect(args.url, bench, scopes, args.workers)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    print(f"{len(records)} queries in {time.time() - started:.0f} s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
