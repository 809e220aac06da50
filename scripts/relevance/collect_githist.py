#!/usr/bin/env python3
"""Collect ranking dumps from a second source: real git history.

For each task of a dev repository (`../shared/eval/data/githist-dev-tasks.jsonl`),
the repository's first-parent history up to the task's base commit is
imported under a user of its own (`precedent import GITDIR --rev BASE
--server URL`), the issue text is sent to `POST /v1/search/explain` and
`POST /search`, and every candidate commit is graded against the task's
gold patch with the benchmark's own grading (`githist.py`: 2 = a changed
definition in common, 1 = a non-test source file in common). The dump has
the format of `collect.py` (condition `githist`), so `fit.py` and
`floor.py` read both sources alike. It also records the reference of
`githist.py`, Okapi BM25 over every commit's message + diff (`git log -p`),
as `bm25_git_log` (the commits it ranks first).

    python3 scripts/relevance/collect_githist.py --bin target/release/precedent \
        --repo sharkdp/fd --git /path/to/fd.git --out dumps/githist-fd.jsonl.gz [--max-tasks N]

Dev repositories only: held-out ones stay unseen.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect import answer_sessions  # noqa: E402

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--git", required=True)
    parser.add_argument("--eval-dir", default=os.path.join(os.path.dirname(__file__), "../../../shared/eval"))
    parser.add_argument("--tasks")
    parser.add_argument("--max-tasks", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.eval_dir))
    import githist  # noqa: E402  (the shared harness: grading, BM25, server start)
    import build_bench  # noqa: E402
    from amlbench import Bm25Index  # noqa: E402

    tasks_path = args.tasks or os.path.join(args.eval_dir, "data/githist-dev-tasks.jsonl")
    tasks = [json.loads(line) for line in open(tasks_path)]
    tasks = [t for t in tasks if t["repo"] == args.repo and t.get("base_commit")]
    tasks = [t for t in tasks if subprocess.run(
        ["git", "--git-dir", args.git, "cat-file", "-e", t["base_commit"] + "^{commit}"],
        capture_output=True).returncode == 0]
    tasks.sort(key=lambda t: t["instance_id"])
    if args.max_tasks:
        tasks = tasks[: args.max_tasks]
    if not tasks:
        raise SystemExit("no task of that repository has its base commit in the repository")
    newest = max(tasks, key=lambda t: len(githist.first_parent(args.git, t["base_commit"])))["base_commit"]
    docs = githist.commit_docs(args.git, newest)
    print(f"{args.repo}: {len(tasks)} tasks, {len(docs)} commits", file=sys.stderr)

    work = tempfile.mkdtemp(prefix="githist-collect-")
    proc, url = githist.start_server(args.bin, os.path.join(work, "data"))
    records = []
    try:
        for task in tasks:
            history = [c for c in githist.first_parent(args.git, task["base_commit"]) if c in docs]
            query_edits = build_bench.task_edits(task)
            grades = {}
            for c in history:
                g = githist.grade(docs[c][1], query_edits)
                if g:
                    grades[c] = g
            if not grades:
                continue
            user = "gh-" + task["instance_id"]
            imported = subprocess.run(
                [args.bin, "import", args.git, "--user-id", user, "--rev", task["base_commit"], "--server", url, "--json"],
                capture_output=True, text=True)
            if imported.returncode != 0:
                raise SystemExit(f"import failed for {task['instance_id']}: {imported.stderr[-500:]}")
            payload = {"query": task["problem_statement"], "user_id": user, "top_k": 100}
            explained = githist.post(url + "/v1/search/explain", payload)
            started = time.perf_counter()
            answer = githist.post(url + "/search", payload)
            search_ms = (time.perf_counter() - started) * 1000.0
            commit_of = lambda sid: sid.rsplit(":", 1)[-1] if sid and sid.startswith("git:") else sid
            candidates = []
            for candidate in explained["candidates"]:
                candidate = dict(candidate)
                commit = commit_of(candidate["session_id"])
                candidate["instance_id"] = commit
                candidate["session_repo"] = args.repo
                candidate["kind"] = "commit"
                candidate["grade"] = grades.get(commit, 0)
                candidates.append(candidate)
            index, ids = Bm25Index(), []
            for c in history:
                message, diff = docs[c]
                index.add(message + "\n" + diff)
                ids.append(c)
            records.append({
                "query_id": task["instance_id"],
                "condition": "githist",
                "repo": args.repo,
                "user_id": user,
                "instance_id": task["instance_id"],
                "gold": {f"commit:{c}": g for c, g in grades.items()},
                "gold_instances": grades,
                "query_language": explained["query"].get("language"),
                "num_sessions": explained.get("num_sessions"),
                "num_scope_sessions": len(history),
                "candidates": candidates,
                "answer": answer_sessions(answer),
                "bm25_git_log": [ids[d] for d, _ in index.search(task["problem_statement"], 10)],
                "search_ms": search_ms,
            })
            print(f"  {task['instance_id']}: history {len(history)}, gold {len(grades)}, candidates {len(candidates)}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    print(f"{len(records)} queries -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
