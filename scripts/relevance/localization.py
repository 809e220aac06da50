#!/usr/bin/env python3
"""Localization from the user's own code, as candidate features for fit.py.

For each query, the sessions of its scope (the user's memory) give one
document per changed source file: the identifiers of every hunk line of
every diff that touched it (context, removed and added lines, the hunk
header), split into words as the ranking splits them, plus the words of its
path. BM25 of the query's words over those file documents says which files
the task would touch, from code the memory has seen. Each candidate then
gets:

- `loc_rel`: the best score among the files it changed, relative to the best
  file of the scope (1: it changed the most likely file);
- `loc_cov`: the share of the query's file-vocabulary weight (summed IDF of
  its words found in any file document) that its best file holds;
- `loc_other`: `loc_rel` from the same files' documents without this
  session's own code (what the *other* sessions say about its files);
- `loc_bin`: the share of the query's file-vocabulary weight its own changed
  code holds.

    python3 scripts/relevance/localization.py --bench DEV --out-full full.json \\
        --out-short short.json
    python3 scripts/relevance/fit.py --full full.jsonl.gz --short short.jsonl.gz --loro \\
        --extra-full full.json --extra-short short.json --extra-features loc_rel,loc_cov

Short queries are each query's first line, as `short_queries.py` makes them.
Standard-library Python only; no network.
"""

import argparse
import collections
import gzip
import json
import math
import re

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
FILE_HEADER = re.compile(r"^\+\+\+ b/(\S+)|^diff --git a/\S+ b/(\S+)")
TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_|_test\.")
STOP_WORDS = set(
    "the and for not with this that from def class self return import none true false else elif "
    "pass raise try except while yield lambda async await let mut pub impl struct enum use crate "
    "super const static if in is of to be it as or fn var function new int str string bool void "
    "null undefined".split()
)
K1 = 1.2
B = 0.75


def words(text):
    """Identifier parts (camelCase and snake_case split, lowercased, three
    characters or more) and each compound identifier whole."""
    out = []
    for identifier in IDENTIFIER.findall(text):
        parts = [part.lower() for piece in identifier.split("_") for part in CAMEL_PART.findall(piece)]
        out.extend(part for part in parts if len(part) >= 3 and part not in STOP_WORDS)
        whole = identifier.lower()
        if len(parts) > 1 and whole not in STOP_WORDS:
            out.append(whole)
    return out


def changed_code(session):
    """Per changed source file, the word counts of its diffs' hunk lines."""
    files = collections.defaultdict(collections.Counter)
    for message in session["messages"]:
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        if "+++ " not in content and "diff --git" not in content:
            continue
        current = None
        for line in content.split("\n"):
            header = FILE_HEADER.match(line)
            if header:
                current = header.group(1) or header.group(2)
                continue
            if current is None:
                continue
            if line.startswith("@@"):
                files[current].update(words(line.split("@@")[-1]))
            elif line[:1] in ("+", "-", " ") and not line.startswith(("+++", "---")):
                files[current].update(words(line[1:]))
    return {path: counts for path, counts in files.items() if not TEST_PATH.search(path)}


def bm25(document, length, average, idf):
    score = 0.0
    for term, weight in idf.items():
        tf = document.get(term, 0)
        if tf > 0:
            score += weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
    return score


def scope_features(scope, code, query_text):
    documents = collections.defaultdict(collections.Counter)
    for session_id in scope:
        for path, counts in code.get(session_id, {}).items():
            documents[path].update(counts)
            documents[path].update(words(path.replace("/", " ").replace(".", " ")))
    if not documents:
        return {}
    query_words = set(words(query_text))
    frequencies = collections.Counter(
        term for document in documents.values() for term in query_words if term in document
    )
    n = len(documents)
    idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequencies.items()}
    lengths = {path: sum(document.values()) for path, document in documents.items()}
    average = sum(lengths.values()) / n or 1.0
    scores = {path: bm25(documents[path], lengths[path], average, idf) for path in documents}
    best = max(scores.values())
    vocabulary_weight = sum(idf.values()) or 1.0
    features = {}
    for session_id in scope:
        own = code.get(session_id, {})
        paths = [path for path in own if path in documents]
        best_own = max((scores[path] for path in paths), default=0.0)
        others = 0.0
        for path in paths:
            rest = documents[path] - own[path]
            others = max(others, bm25(rest, sum(rest.values()) or 1, average, idf))
        features[session_id] = {
            "loc_rel": best_own / best if best > 0 else 0.0,
            "loc_cov": max(
                (sum(w for term, w in idf.items() if term in documents[path]) / vocabulary_weight
                 for path in paths),
                default=0.0,
            ),
            "loc_other": others / best if best > 0 else 0.0,
            "loc_bin": max(
                (sum(w for term, w in idf.items() if term in own[path]) / vocabulary_weight for path in paths),
                default=0.0,
            ),
        }
    return features


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="../shared/eval/data/dev")
    parser.add_argument("--out-full", required=True)
    parser.add_argument("--out-short", required=True)
    args = parser.parse_args()
    with gzip.open(f"{args.bench}/sessions.jsonl.gz", "rt", encoding="utf-8") as handle:
        code = {}
        for line in handle:
            session = json.loads(line)
            code[session["session_id"]] = changed_code(session)
    full, short = {}, {}
    with open(f"{args.bench}/scopes.jsonl", encoding="utf-8") as handle:
        for line in handle:
            scope = json.loads(line)
            for query in scope["queries"]:
                text = query["query"]
                full[query["query_id"]] = scope_features(scope["session_ids"], code, text)
                first_line = next((line for line in text.splitlines() if line.strip()), "")
                short[query["query_id"]] = scope_features(scope["session_ids"], code, first_line)
    for path, values in ((args.out_full, full), (args.out_short, short)):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(values, handle)


if __name__ == "__main__":
    main()
