#!/usr/bin/env python3
"""Real advisories over real git history: is the fix found?

For each advisory of `advisories.json` (public advisories of dev repositories,
each with the commit that fixed it on the first-parent history), the
repository's first-parent history up to and including the fix is imported
under a user of its own (`precedent import GITDIR --rev FIX --server URL`),
and the advisory's text is searched. The rank of the fix commit is reported
for three systems on the same history:

- the answer (`POST /search`, top_k 10): what the agent is handed;
- session BM25: the candidates by their `text_bm25` feature
  (`POST /v1/search/explain`), nothing dropped;
- `git log -p` BM25: Okapi BM25 over every commit's message and diff
  (`githist.py`'s reference).

    python3 scripts/relevance/advisories.py --bin target/release/precedent \
        --git tokio-rs/tokio=/path/to/tokio.git --git BurntSushi/ripgrep=/path/rg.git \
        [--json-out F]

Prints HR@1/3/5/10 and MRR@10 per system, and each advisory's ranks.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def commit_rankings(githist, url, user, text, index, ids, top_k, max_chars=None):
    """The commits of `user`'s memory for `text`, best first, by three
    systems: the answer (`POST /search`), session BM25 (the explained
    candidates by `text_bm25`, nothing dropped) and `git log -p` BM25
    (`index` over the commits `ids`); with the answer's item and character
    counts."""
    payload = {"query": text, "user_id": user, "top_k": top_k}
    if max_chars is not None:
        payload["max_chars"] = max_chars
    answer = githist.post(url + "/search", payload)
    explained = githist.post(url + "/v1/search/explain", {"query": text, "user_id": user, "top_k": 100})
    commit_of = lambda sid: sid.rsplit(":", 1)[-1] if sid else sid
    answered = []
    for item in answer.get("data", []):
        commit = commit_of(item.get("session_id"))
        if commit not in answered:
            answered.append(commit)
    return {
        "answer": answered,
        "answer_items": len(answer.get("data", [])),
        "answer_chars": sum(len(item.get("content", "")) for item in answer.get("data", [])),
        "session_bm25": [commit_of(c["session_id"]) for c in
                         sorted(explained["candidates"], key=lambda c: -c["features"]["text_bm25"])],
        "git_log_bm25": [ids[d] for d, _ in index.search(text, 100)],
    }


def fix_ranks(ranked, fix):
    """The rank of `fix` by each system of `commit_rankings` (None: not
    ranked), with the answer's item and character counts."""
    rank = lambda system: next((i + 1 for i, c in enumerate(ranked[system]) if c == fix), None)
    return {"answer": rank("answer"), "answer_items": ranked["answer_items"],
            "answer_chars": ranked["answer_chars"], "session_bm25": rank("session_bm25"),
            "git_log_bm25": rank("git_log_bm25")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--git", action="append", default=[], help="OWNER/NAME=GITDIR, once per repository")
    parser.add_argument("--eval-dir", default=os.path.join(HERE, "../../../shared/eval"))
    parser.add_argument("--set", default=os.path.join(HERE, "advisories.json"))
    parser.add_argument("--json-out")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.eval_dir))
    import githist  # noqa: E402
    from amlbench import Bm25Index  # noqa: E402

    gits = dict(entry.split("=", 1) for entry in args.git)
    advisories = [a for a in json.load(open(args.set))["advisories"] if a["repo"] in gits]
    if not advisories:
        raise SystemExit("no advisory of the repositories given (--git OWNER/NAME=GITDIR)")

    work = tempfile.mkdtemp(prefix="advisories-")
    proc, url = githist.start_server(args.bin, os.path.join(work, "data"))
    rows = []
    try:
        for advisory in advisories:
            gitdir = gits[advisory["repo"]]
            fix = githist.git(gitdir, "rev-parse", advisory["fix"]).strip()
            docs = githist.commit_docs(gitdir, fix)
            history = [c for c in githist.first_parent(gitdir, fix) if c in docs]
            user = "advisory-" + advisory["id"]
            imported = subprocess.run(
                [args.bin, "import", gitdir, "--user-id", user, "--rev", fix, "--server", url, "--json"],
                capture_output=True, text=True)
            if imported.returncode != 0:
                raise SystemExit(f"import failed for {advisory['id']}: {imported.stderr[-500:]}")
            index, ids = Bm25Index(), []
            for c in history:
                message, diff = docs[c]
                index.add(message + "\n" + diff)
                ids.append(c)
            ranked = commit_rankings(githist, url, user, advisory["text"], index, ids, top_k=10)
            row = {"id": advisory["id"], "repo": advisory["repo"], "fix": fix[:10], "history": len(history),
                   **fix_ranks(ranked, fix)}
            rows.append(row)
            print(f"  {row}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    systems = ["answer", "session_bm25", "git_log_bm25"]
    print(f"{'system':<14} {'HR@1':>5} {'HR@3':>5} {'HR@5':>5} {'HR@10':>6} {'MRR@10':>7}   ({len(rows)} advisories)")
    summary = {}
    for system in systems:
        ranks = [row[system] for row in rows]
        hr = lambda k: sum(1 for r in ranks if r is not None and r <= k) / len(ranks)
        mrr = sum(1.0 / r for r in ranks if r is not None and r <= 10) / len(ranks)
        summary[system] = {"hr@1": hr(1), "hr@3": hr(3), "hr@5": hr(5), "hr@10": hr(10), "mrr@10": mrr}
        print(f"{system:<14} {hr(1):5.3f} {hr(3):5.3f} {hr(5):5.3f} {hr(10):6.3f} {mrr:7.3f}")
    print(f"{'advisory':<20} {'answer':>7} {'session':>8} {'git log':>8}  chars")
    for row in rows:
        show = lambda r: "-" if r is None else str(r)
        print(f"{row['id']:<20} {show(row['answer']):>7} {show(row['session_bm25']):>8} {show(row['git_log_bm25']):>8}  {row['answer_chars']}")
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump({"summary": summary, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
