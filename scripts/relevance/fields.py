#!/usr/bin/env python3
"""Field-split and feedback features over a query's candidates, for fit.py.

Measured before building: what BM25 over a session's fields (BM25F-style)
and pseudo-relevance feedback over code identifiers (RM3-style) add to the
ranking, on both sources. Each candidate session is split into three fields:

- `task`: its first user message (dev) or its commit message (git history);
- `code`: the identifier words of its diff lines (added, removed, context and
  hunk headers of every diff it shows, test files included);
- `all`: every word of its text.

Statistics (document frequency, average length) are over the query's
candidates, as `rank` would see them. Features per candidate:

- `f_task`, `f_code`: Okapi BM25 of the query's words over that field alone;
- `bm25f`: BM25F, the fields' term frequencies weighted (task 3, code 2,
  all 1) and length-normalized per field before one saturation;
- `rm3_code`: the query expanded from the code of its best five candidates
  by session BM25 (each term's weight in their code, weighted by their
  BM25 relative to the best; the 20 heaviest terms not in the query), BM25
  of those terms, weighted, over each candidate's code field.

Writes `{query_id: {session_id: {name: value}}}` per dump:

    python3 scripts/relevance/fields.py --bench DEV --dump full.jsonl.gz --out full-fields.json
    python3 scripts/relevance/fields.py --githist githist-fd.jsonl.gz --git FD.git \\
        [--githist ... --git ...] --out githist-fields.json

Standard-library Python only; imports `localization.words` (identifier
parts) and, for git history, `githist.commit_docs` from the evaluation
directory.
"""

import argparse
import collections
import gzip
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from localization import words  # noqa: E402

K1 = 1.2
B = 0.75
FIELD_WEIGHTS = {"task": 3.0, "code": 2.0, "all": 1.0}
FEEDBACK_DOCS = 5
FEEDBACK_TERMS = 20
DIFF_LINE = re.compile(r"^(?:[+-](?![+-]{2} )|@@)")


def diff_words(text):
    counts = collections.Counter()
    for line in text.split("\n"):
        if DIFF_LINE.match(line):
            counts.update(words(line.split("@@")[-1] if line.startswith("@@") else line[1:]))
    return counts


def session_texts(session):
    """A benchmark session's task (its first user message) and its whole
    text (every message, a structured content as JSON)."""
    messages = session["messages"]
    if isinstance(messages, str):
        messages = json.loads(messages)
    texts = []
    for message in messages:
        content = message.get("content") or ""
        texts.append(content if isinstance(content, str) else json.dumps(content))
    task = next((t for m, t in zip(messages, texts) if m.get("role") == "user"), "")
    return task, "\n".join(texts)


def session_fields(session):
    task, text = session_texts(session)
    return {"task": collections.Counter(words(task)), "code": diff_words(text),
            "all": collections.Counter(words(text))}


def commit_fields(message, diff):
    return {"task": collections.Counter(words(message)), "code": diff_words(diff),
            "all": collections.Counter(words(message + "\n" + diff))}


def query_features(query_text, documents):
    """{session_id: features} for one query over its candidates' fields."""
    terms = set(words(query_text))
    n = len(documents)
    if not n or not terms:
        return {}
    df = collections.Counter(t for fields in documents.values() for t in terms if t in fields["all"])
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    lengths = {s: {f: sum(c.values()) for f, c in fields.items()} for s, fields in documents.items()}
    average = {f: (sum(l[f] for l in lengths.values()) / n) or 1.0 for f in FIELD_WEIGHTS}

    def bm25(counts, length, avg, weights):
        score = 0.0
        for term, weight in weights.items():
            tf = counts.get(term, 0)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))
        return score

    out = {}
    for s, fields in documents.items():
        bm25f = 0.0
        for term, weight in idf.items():
            tf = sum(w * fields[f].get(term, 0) / (1 - B + B * lengths[s][f] / average[f])
                     for f, w in FIELD_WEIGHTS.items())
            if tf:
                bm25f += weight * tf / (K1 + tf)
        out[s] = {
            "f_task": bm25(fields["task"], lengths[s]["task"], average["task"], idf),
            "f_code": bm25(fields["code"], lengths[s]["code"], average["code"], idf),
            "bm25f": bm25f,
        }
    # RM3-style feedback over code: the best candidates by whole-text BM25.
    by_all = sorted(documents, key=lambda s: -bm25(documents[s]["all"], lengths[s]["all"], average["all"], idf))
    top = by_all[:FEEDBACK_DOCS]
    best = bm25(documents[top[0]]["all"], lengths[top[0]]["all"], average["all"], idf) or 1.0
    expansion = collections.Counter()
    for s in top:
        code = documents[s]["code"]
        total = sum(code.values())
        if not total:
            continue
        relevance = bm25(documents[s]["all"], lengths[s]["all"], average["all"], idf) / best
        for term, count in code.items():
            if term not in terms:
                expansion[term] += relevance * count / total
    chosen = dict(expansion.most_common(FEEDBACK_TERMS))
    code_df = collections.Counter(t for fields in documents.values() for t in chosen if t in fields["code"])
    weights = {t: w * math.log(1 + (n - code_df[t] + 0.5) / (code_df[t] + 0.5)) for t, w in chosen.items()}
    for s, fields in documents.items():
        out[s]["rm3_code"] = bm25(fields["code"], lengths[s]["code"], average["code"], weights)
    return out


def first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", help="the dev benchmark directory (sessions.jsonl.gz, scopes.jsonl)")
    parser.add_argument("--dump", help="a collect.py dump of that benchmark")
    parser.add_argument("--short", action="store_true", help="the dump's queries are first lines")
    parser.add_argument("--githist", action="append", default=[], help="a collect_githist.py dump")
    parser.add_argument("--git", action="append", default=[], help="its repository's git directory")
    parser.add_argument("--eval-dir", default=os.path.join(os.path.dirname(__file__), "../../../shared/eval"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = {}
    if args.dump:
        texts = {}
        with open(os.path.join(args.bench, "scopes.jsonl"), encoding="utf-8") as handle:
            for line in handle:
                for query in json.loads(line)["queries"]:
                    texts[query["query_id"]] = first_line(query["query"]) if args.short else query["query"]
        fields = {}
        with gzip.open(os.path.join(args.bench, "sessions.jsonl.gz"), "rt", encoding="utf-8") as handle:
            for line in handle:
                session = json.loads(line)
                fields[session["session_id"]] = session_fields(session)
        with gzip.open(args.dump, "rt", encoding="utf-8") as handle:
            for line in handle:
                query = json.loads(line)
                documents = {c["session_id"]: fields[c["session_id"]] for c in query["candidates"]
                             if c["session_id"] in fields}
                out[query["query_id"]] = query_features(texts[query["query_id"]], documents)
    if args.githist:
        sys.path.insert(0, os.path.abspath(args.eval_dir))
        import githist  # noqa: E402
        tasks = {}
        with open(os.path.join(args.eval_dir, "data/githist-dev-tasks.jsonl"), encoding="utf-8") as handle:
            for line in handle:
                task = json.loads(line)
                tasks[task["instance_id"]] = task
        for dump, gitdir in zip(args.githist, args.git):
            with gzip.open(dump, "rt", encoding="utf-8") as handle:
                queries = [json.loads(line) for line in handle]
            if not queries:
                continue
            newest = max((tasks[q["instance_id"]] for q in queries),
                         key=lambda t: len(githist.first_parent(gitdir, t["base_commit"])))["base_commit"]
            docs = githist.commit_docs(gitdir, newest)
            cache = {}
            for query in queries:
                documents = {}
                for c in query["candidates"]:
                    commit = c["instance_id"]
                    if commit in docs:
                        if commit not in cache:
                            cache[commit] = commit_fields(*docs[commit])
                        documents[c["session_id"]] = cache[commit]
                out[query["query_id"]] = query_features(tasks[query["instance_id"]]["problem_statement"], documents)
            print(f"{dump}: {len(queries)} queries", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(out, handle)


if __name__ == "__main__":
    main()
