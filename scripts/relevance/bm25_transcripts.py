#!/usr/bin/env python3
"""An outside reference for `collect_transcripts.py`'s dumps: plain Okapi BM25 over each
transcript's whole text, nothing of precedent's.

For each query of a dump, every transcript of its memory (`memory`: path -> task) is one
document: its text (a JSON transcript's string values, a Markdown chat as it is), lower-cased
words of letters, digits and `_`; k1 1.2, b 0.75, IDF over that memory. The ranking is scored
with `floor.py`'s metrics (tasks counted once) and printed per condition beside precedent's
answer, its order without the gate and its session BM25, with the mean answer size.

    python3 scripts/relevance/bm25_transcripts.py dumps/transcripts.jsonl.gz [--by-repo]
"""
import argparse, collections, json, math, os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../fixtures/heldout")
WORD = re.compile(r"[a-z0-9_]+")


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def text_of(path, cache={}):
    if path not in cache:
        raw = open(path, encoding="utf-8", errors="replace").read()
        if path.endswith((".json", ".traj")):
            raw = "\n".join(strings(json.loads(raw)))
        elif path.endswith(".jsonl"):
            raw = "\n".join(s for line in raw.splitlines() if line.strip() for s in strings(json.loads(line)))
        cache[path] = collections.Counter(WORD.findall(raw.lower()))
    return cache[path]


def bm25(query, docs, k1=1.2, b=0.75):
    """[(doc index, score)] best first."""
    n = len(docs)
    avg = sum(sum(d.values()) for d in docs) / n
    df = collections.Counter(t for d in docs for t in d)
    scores = []
    for i, d in enumerate(docs):
        length, s = sum(d.values()), 0.0
        for t in set(WORD.findall(query.lower())):
            if t in d:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * length / avg))
        scores.append((i, s))
    return sorted(scores, key=lambda x: -x[1])


def summary(queries):
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for q in queries:
        names = list(q["memory"])
        ranked = bm25(q["query"], [text_of(os.path.join(ROOT, n)) for n in names])
        systems = floor.rankings(q)
        systems["bm25 whole text"] = floor.distinct(q["memory"][names[i]] for i, s in ranked if s > 0)
        for system, order in systems.items():
            rows[q["condition"]][system].append(floor.metrics(order, q.get("gold_instances") or {}))
        rows[q["condition"]]["answer"][-1]["items"] = len(q["answer"])
        rows[q["condition"]]["answer"][-1]["chars"] = sum(a["chars"] for a in q["answer"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("--by-repo", action="store_true")
    args = parser.parse_args()
    queries = [q for path in args.dumps for q in floor.read_dump(path)]
    groups = [("all", queries)] + ([(r, [q for q in queries if q["repo"] == r]) for r in sorted({q["repo"] for q in queries})]
                                   if args.by_repo else [])
    metrics = ("hr@1", "hr@5", "hr@10", "r@5", "mrr", "ndcg@10", "empty", "items", "chars")
    for title, subset in groups:
        print(f"\n{title}\n  {'condition':<22} {'system':<16} {'queries':>7} " + " ".join(f"{m:>7}" for m in metrics))
        for condition, systems in sorted(summary(subset).items()):
            for system, values in systems.items():
                means = [floor.mean([v.get(m) for v in values]) for m in metrics]
                print(f"  {condition:<22} {system:<16} {len(values):>7} "
                      + " ".join("      -" if v is None else (f"{v:7.0f}" if v > 50 else f"{v:7.3f}") for v in means))


if __name__ == "__main__":
    main()
