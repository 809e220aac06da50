#!/usr/bin/env python3
"""The floor: precedent's answer beside plain session BM25 on the same memory.

Reads dumps written by `collect.py` (the dev benchmark, four conditions)
and `collect_githist.py` (real git history, condition `githist`) and scores,
per source and condition, over the same candidates:

- `answer`: what `POST /search` returned (the served ranking and gate);
- `no gate`: every candidate in the served ranking order, nothing dropped;
- `bm25`: every candidate by its session BM25 over the whole text (the
  `text_bm25` feature of `/v1/search/explain`), nothing dropped: the
  reference every ranking change is judged against;
- `git log -p` (githist only): Okapi BM25 over every commit's message and
  diff, `githist.py`'s reference.

Metrics per query, averaged: HR@1/5/10 (a gold task among the first k),
R@5 (share of the gold tasks among the first 5), MRR, nDCG@10 (graded) and
the empty share. Tasks count once (several sessions of one task are one
instance). The floor holds where the answer's R@5 and MRR are at least
bm25's; a row where it does not is marked `BELOW`.

    python3 scripts/relevance/floor.py dumps/full.jsonl.gz dumps/githist-*.jsonl.gz [--json-out F]
"""
import argparse
import collections
import gzip
import json
import math
import sys

NDCG_DEPTH = 10


def read_dump(path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def distinct(instances):
    seen, out = set(), []
    for instance in instances:
        if instance not in seen:
            seen.add(instance)
            out.append(instance)
    return out


def instance_of(query, session_id):
    for candidate in query["candidates"]:
        if candidate["session_id"] == session_id:
            return candidate.get("instance_id") or session_id
    return session_id


def rankings(query):
    """{system: [instance, ...] best first} over this query's candidates."""
    candidates = query["candidates"]
    inst = lambda c: c.get("instance_id") or c["session_id"]
    out = {
        "answer": distinct(instance_of(query, a["session_id"]) for a in query.get("answer", [])),
        "no gate": distinct(inst(c) for c in sorted(candidates, key=lambda c: -c["score"])),
        "bm25": distinct(inst(c) for c in sorted(candidates, key=lambda c: -c["features"]["text_bm25"])),
    }
    if "bm25_git_log" in query:
        out["git log -p"] = distinct(query["bm25_git_log"])
    if VARIANTS:
        by_score = sorted(candidates, key=lambda c: -c["score"])
        by_text = sorted(candidates, key=lambda c: -c["features"]["text_bm25"])
        rrf = collections.defaultdict(float)
        for order in (by_score, by_text):
            for position, c in enumerate(order):
                rrf[c["session_id"]] += 1.0 / (RRF_K + position + 1)
        out["rrf"] = distinct(inst(c) for c in sorted(candidates, key=lambda c: -rrf[c["session_id"]]))
        out["answer+standout"] = distinct(instance_of(query, s) for s in with_standout(query))
        for name, restored in RESTORE.items():
            out[name] = distinct(instance_of(query, s) for s in kept_without(query, restored))
        out["conf->top1"] = distinct(instance_of(query, s) for s in kept_without(query, {"not_confident"})[:1]) \
            if any(reason_of(c.get("dropped")) == "not_confident" for c in candidates) else out["answer"]
        for k in PROTECT_TOP:
            out[f"protect bm25 top{k}"] = distinct(instance_of(query, s) for s in kept_without(
                query, {"far_below_best", "below_floor"}, protect_top=k))
    return out


PROTECT_TOP = (1, 3, 5)
PROTECT_MIN_TEXT_REL = 0.15


def reason_of(dropped):
    return dropped if isinstance(dropped, str) or dropped is None else next(iter(dropped))


# Gate simulations: the served verdicts with some drop reasons undone.
RESTORE = {
    "-conf": {"not_confident"},
    "-far": {"far_below_best"},
    "-far-floor": {"far_below_best", "below_floor"},
    "-far-floor-conf": {"far_below_best", "below_floor", "not_confident"},
}


def kept_without(query, restored, protect_top=None):
    """Candidates the served gate kept, plus those dropped only for a reason in `restored` (with
    `protect_top`: only those among the first k by session BM25), in score order, ten at most."""
    by_text = sorted(query["candidates"], key=lambda c: -c["features"]["text_bm25"])
    top = {c["session_id"] for c in by_text[:protect_top]
           if c["features"].get("text_rel", 1.0) >= PROTECT_MIN_TEXT_REL} if protect_top else None
    kept = [c for c in query["candidates"] if c.get("dropped") is None or (
        reason_of(c["dropped"]) in restored and (top is None or c["session_id"] in top))]
    kept.sort(key=lambda c: -c["score"])
    return [c["session_id"] for c in kept[:10]]


VARIANTS = False
RRF_K = 60
STANDOUT_MARGIN = 2.0


def standout(query):
    """The candidate whose session BM25 is at least STANDOUT_MARGIN times the next one's."""
    by_text = sorted(query["candidates"], key=lambda c: -c["features"]["text_bm25"])
    if not by_text or by_text[0]["features"]["text_bm25"] <= 0:
        return None
    second = by_text[1]["features"]["text_bm25"] if len(by_text) > 1 else 0.0
    return by_text[0] if by_text[0]["features"]["text_bm25"] >= STANDOUT_MARGIN * second else None


def with_standout(query):
    """The served answer, with a standing-out candidate the gate dropped put back in score order."""
    answer = [a["session_id"] for a in query.get("answer", [])]
    best = standout(query)
    if best is None or best["session_id"] in answer:
        return answer
    score = {c["session_id"]: c["score"] for c in query["candidates"]}
    answer.append(best["session_id"])
    return sorted(answer, key=lambda s: -score.get(s, 0.0))


def metrics(ranked, gold):
    result = {"empty": 0.0 if ranked else 1.0}
    if ranked:
        result["noise"] = sum(1 for i in ranked[:10] if i not in gold) / len(ranked[:10])
    if not gold:
        return result
    hits = [1 if i in gold else 0 for i in ranked]
    first = next((k for k, h in enumerate(hits, 1) if h), None)
    result["mrr"] = 1.0 / first if first else 0.0
    # The answer holds ten sessions at most: MRR@10 compares it with an
    # unbounded baseline list on equal terms.
    result["mrr@10"] = 1.0 / first if first and first <= 10 else 0.0
    for k in (1, 5, 10):
        result[f"hr@{k}"] = 1.0 if any(hits[:k]) else 0.0
    result["r@5"] = sum(hits[:5]) / len(gold)
    dcg = sum(gold.get(i, 0) / math.log2(k + 1) for k, i in enumerate(ranked[:NDCG_DEPTH], 1))
    ideal = sorted(gold.values(), reverse=True)[:NDCG_DEPTH]
    idcg = sum(g / math.log2(k + 1) for k, g in enumerate(ideal, 1))
    result["ndcg@10"] = dcg / idcg if idcg else 0.0
    return result


METRICS = ("hr@1", "hr@5", "hr@10", "r@5", "mrr", "mrr@10", "ndcg@10", "noise", "empty")


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def report(queries):
    """{condition: {system: {metric: mean}}}, with the number of queries."""
    by_condition = collections.defaultdict(lambda: collections.defaultdict(list))
    for query in queries:
        gold = query.get("gold_instances") or {}
        for system, ranked in rankings(query).items():
            by_condition[query["condition"]][system].append(metrics(ranked, gold))
    out = {}
    for condition, systems in by_condition.items():
        out[condition] = {}
        for system, rows in systems.items():
            out[condition][system] = {m: mean([r.get(m) for r in rows]) for m in METRICS}
            out[condition][system]["queries"] = len(rows)
    return out


def print_report(title, summary):
    print(f"\n{title}")
    print(f"  {'condition':<11} {'system':<16} {'queries':>7} " + " ".join(f"{m:>7}" for m in METRICS))
    order = ("relevant", "noisy", "noise_only", "repo", "githist")
    for condition in sorted(summary, key=lambda c: order.index(c) if c in order else 99):
        systems = summary[condition]
        base = systems.get("bm25", {})
        for system, values in systems.items():
            fmt = lambda v: "      -" if v is None else f"{v:7.3f}"
            mark = ""
            if system == "answer" and condition != "noise_only":
                below = [m for m in ("r@5", "mrr") if values.get(m) is not None and base.get(m) is not None
                         and values[m] < base[m] - 1e-9]
                if below:
                    mark = "  BELOW bm25 on " + ", ".join(below)
            print(f"  {condition:<11} {system:<16} {values['queries']:>7} " + " ".join(fmt(values.get(m)) for m in METRICS) + mark)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("--by-repo", action="store_true", help="also one table per repository")
    parser.add_argument("--json-out")
    parser.add_argument("--variants", action="store_true",
                        help="also simulate: RRF of the served and BM25 orders; the answer with a standing-out candidate kept")
    parser.add_argument("--margin", type=float, default=2.0)
    args = parser.parse_args()
    global VARIANTS, STANDOUT_MARGIN
    VARIANTS, STANDOUT_MARGIN = args.variants, args.margin
    queries = [q for path in args.dumps for q in read_dump(path)]
    summary = report(queries)
    print_report("all repositories", summary)
    result = {"all": summary}
    if args.by_repo:
        for repo in sorted({q["repo"] for q in queries}):
            result[repo] = report([q for q in queries if q["repo"] == repo])
            print_report(repo, result[repo])
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
