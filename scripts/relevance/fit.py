#!/usr/bin/env python3
"""Fit the relevance model of the noise gate, honestly: leave one repository out.

Reads the dumps `collect.py` wrote (every candidate of every benchmark query
with its features and its gold grade), fits a logistic regression of
"this candidate is relevant" (grade >= 1) and simulates the gate and the
ranking of `rank::rank` and the answer's size of `rank::assemble` to compute
the benchmark's metrics per condition (R@5, nDCG@10, noise share, empty
share, as `amlbench.py` scores them).

    python3 scripts/relevance/fit.py --full dumps/full.jsonl.gz --short dumps/short.jsonl.gz \
        [--loro] [--rust]

--loro: for each repository, fit the model and choose the gate thresholds on
the other repositories, score the held one; report the mean over queries
and the worst repository per condition. Without it: in-sample figures.
--rust: print the weights table of the model fitted on everything, as Rust.
--write: fit on everything given and ship it: write model.json (weights,
thresholds, what they were fitted on) and its region of
crates/precedent-rank/src/relevance.rs. --render writes the region from model.json alone
(no dumps); --check exits 1 when the two disagree (a Rust test checks it
too).
--githist DUMP...: git-history dumps (`collect_githist.py`), a second source
the ranking is fitted on too.
--normalize MODE: features normalized within a query's candidates before
the weights (see `normalize_rows`).
--generalize MODES: the ranking alone, judged leaving one source out and
leaving one repository out, each MODE beside session BM25 and the served
order (see `generalization`).
--validate REPORT: compare the simulation of the served model (the
candidates' own scores and verdicts) with an `amlbench.py run --json-out`
report.
--extra-full FILE / --extra-short FILE / --extra-githist FILE --extra-features a,b [--extra-gate c]:
candidate features computed outside the server (for example by
`localization.py`), `{query_id: {session_id: {name: value}}}`, added to the
ranking features (and, with --extra-gate, to the gate, with the query's best
value beside each): to measure a candidate feature before building it.

Standard-library Python only; no network.
"""

import argparse
import collections
import gzip
import json
import math
import os
import sys

CONDITIONS = ("relevant", "noisy", "noise_only", "repo")
NDCG_DEPTH = 10
BUDGET_CHARS = 12_000
MIN_ITEM_CHARS = 600
MAX_KEPT = 10

# The features the model reads, in the order of the Rust table. Each is
# computed by `features()` below and by `rank::relevance` in Rust alike.
FEATURES = (
    "bias",
    "text_rel",
    "text_coverage",
    "term_coverage",
    "symbols_changed",
    "symbols_referenced",
    "paths",
    "stems",
    "location_words",
    "file_support",
    "errors",
    "tests",
    "no_files",
    "failed",
    "other_language",
    "best_text_coverage",
    "best_term_coverage",
    "text_rank",
    "query_weight",
)
# Features the server does not compute, from --extra-* (see main()).
EXTRA_FEATURES = []
EXTRA_VALUES = {}
GATE_EXTRA = []


def read_dump(path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def language_family(language):
    if language in ("c", "cpp", "objective-c"):
        return "c-family"
    if language in ("javascript", "typescript"):
        return "javascript"
    return language


def query_language(query, by_text):
    """The query's language, else the clear vote of the ten candidates most
    similar by text (weighted by relative text similarity)."""
    if query.get("query_language"):
        return language_family(query["query_language"])
    votes = collections.defaultdict(float)
    for candidate in by_text[:10]:
        if candidate.get("language"):
            votes[language_family(candidate["language"])] += candidate["features"]["text_rel"]
    ranked = sorted(votes.items(), key=lambda item: (-item[1], item[0]))
    if not ranked:
        return None
    if len(ranked) == 1 or ranked[0][1] >= 2.0 * ranked[1][1]:
        return ranked[0][0]
    return None


def squash(value):
    """log(1 + x): counts and IDF sums grow without bound; their first units
    say the most."""
    return math.log1p(max(0.0, value))


def features(query):
    """One feature vector per candidate of a query (candidates in the dump's
    order)."""
    candidates = query["candidates"]
    by_text = sorted(candidates, key=lambda c: -c["features"]["text_bm25"])
    text_rank = {c["session_id"]: position for position, c in enumerate(by_text)}
    language = query_language(query, by_text)
    best_text_coverage = max((c["features"]["text_coverage"] for c in candidates), default=0.0)
    best_term_coverage = max((c["features"].get("term_coverage", 0.0) for c in candidates), default=0.0)
    query_weight = 0.0
    for c in candidates:
        f = c["features"]
        if f["text_coverage"] > 0:
            query_weight = f["text_bm25"] / f["text_coverage"]
            break
    rows = []
    for c in candidates:
        f = c["features"]
        other = (
            language is not None
            and c.get("language") is not None
            and language_family(c["language"]) != language
        )
        rows.append([
            1.0,
            f["text_rel"],
            min(f["text_coverage"], 2.0),
            f.get("term_coverage", 0.0),
            squash(f["symbols_changed"]),
            squash(f["symbols_referenced"]),
            squash(f["paths"]),
            squash(f["stems"]),
            squash(f["location_words"]),
            squash(f["file_support"]),
            squash(f["errors"]),
            squash(f["tests"]),
            1.0 if f["no_files"] else 0.0,
            1.0 if c.get("outcome") == "failed" else 0.0,
            1.0 if other else 0.0,
            min(best_text_coverage, 2.0),
            best_term_coverage,
            squash(text_rank[c["session_id"]]),
            squash(query_weight),
        ] + [EXTRA_VALUES.get(query["_dump"], {}).get(query["query_id"], {}).get(c["session_id"], {}).get(name, 0.0)
             for name in EXTRA_FEATURES])
    return rows


# Features normalized within a query's candidates (`--normalize`): what a
# candidate holds relative to the query's other candidates, so that a
# structured match lifts a candidate when the query names code and, when it
# names none (every candidate 0), costs nothing; and a feature whose level
# differs between sources (file support over a thousand commits against a
# dozen sessions) is read on one scale. The flags, the text rank and the
# query-level features are left as they are.
NORMALIZED = (
    "text_rel",
    "text_coverage",
    "term_coverage",
    "symbols_changed",
    "symbols_referenced",
    "paths",
    "stems",
    "location_words",
    "file_support",
    "errors",
    "tests",
)
# The code features alone (`max-code`, `rank-code`): the text features keep
# their cross-query scale.
NORMALIZED_CODE = NORMALIZED[3:]
NORMALIZE_MODES = ("none", "max", "minmax", "rank", "max-code", "rank-code", "max+raw")
# With `max+raw`, the code features max-normalized follow every row, beside
# their raw values: the fit weighs both scales. How many columns that adds.
APPENDED = [0]


def appended_columns():
    """The code features the ranking reads, whose normalized copies `max+raw` appends."""
    return [FEATURES.index(name) for name in NORMALIZED_CODE if FEATURES.index(name) in RANK_FEATURES]


def normalize_rows(rows, mode):
    """`rows` (one query's candidates) with the NORMALIZED columns (and the
    extra features) put on the query's own scale: `max` divides by the
    query's best value, `minmax` maps [worst, best] to [0, 1], `rank` is the
    share of the other candidates with a lower value; a column that is the
    same for every candidate becomes 0. `-code`: the code features only."""
    if mode == "none" or not rows:
        return rows
    if mode == "max+raw":
        columns = appended_columns()
        highs = [max(row[i] for row in rows) for i in columns]
        return [row + [row[i] / high if high > 0 else 0.0 for i, high in zip(columns, highs)] for row in rows]
    names = NORMALIZED_CODE if mode.endswith("-code") else NORMALIZED
    mode = mode.removesuffix("-code")
    columns = [FEATURES.index(name) for name in names] + list(
        range(len(FEATURES), len(FEATURES) + len(EXTRA_FEATURES)))
    out = [row[:] for row in rows]
    n = len(rows)
    for i in columns:
        column = [row[i] for row in rows]
        high, low = max(column), min(column)
        for row, value in zip(out, column):
            if mode == "max":
                row[i] = value / high if high > 0 else 0.0
            elif mode == "minmax":
                row[i] = (value - low) / (high - low) if high > low else 0.0
            elif mode == "rank":
                row[i] = sum(1 for other in column if other < value) / (n - 1) if high > low else 0.0
            else:
                raise ValueError(mode)
    return out


def prepare(queries, dump="full", normalize="none"):
    APPENDED[0] = len(appended_columns()) if normalize == "max+raw" else 0
    for query in queries:
        query["_dump"] = dump
        query["x_raw"] = features(query)
        query["x"] = normalize_rows(query["x_raw"], normalize)
        query["y"] = [1.0 if c["grade"] >= 1 else 0.0 for c in query["candidates"]]
    return queries


def renormalize(queries, mode):
    APPENDED[0] = len(appended_columns()) if mode == "max+raw" else 0
    for query in queries:
        query["x"] = normalize_rows(query["x_raw"], mode)


# --------------------------------------------------------------------------- model

def solve(matrix, vector):
    """Gaussian elimination with partial pivoting."""
    n = len(vector)
    a = [row[:] + [vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        if abs(a[col][col]) < 1e-12:
            continue
        for r in range(n):
            if r != col and a[r][col] != 0.0:
                factor = a[r][col] / a[col][col]
                row_r, row_c = a[r], a[col]
                for k in range(col, n + 1):
                    row_r[k] -= factor * row_c[k]
    return [a[i][n] / a[i][i] if abs(a[i][i]) > 1e-12 else 0.0 for i in range(n)]


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def fit_logistic(rows, labels, weights, l2=1.0, iterations=12, start=None):
    """L2-regularised logistic regression by Newton's method (the bias is
    not penalised)."""
    n = len(rows[0])
    w = list(start) if start else [0.0] * n
    for _ in range(iterations):
        gradient = [0.0] * n
        hessian = [[0.0] * n for _ in range(n)]
        for x, y, weight in zip(rows, labels, weights):
            p = sigmoid(sum(wi * xi for wi, xi in zip(w, x)))
            g = weight * (p - y)
            h = weight * p * (1.0 - p)
            for i in range(n):
                xi = x[i]
                if xi == 0.0:
                    continue
                gradient[i] += g * xi
                hxi = h * xi
                row = hessian[i]
                for j in range(i, n):
                    if x[j] != 0.0:
                        row[j] += hxi * x[j]
        for i in range(n):
            for j in range(i):
                hessian[i][j] = hessian[j][i]
        for i in range(1, n):
            gradient[i] += l2 * w[i]
            hessian[i][i] += l2
        hessian[0][0] += 1e-6
        step = solve(hessian, gradient)
        w = [wi - si for wi, si in zip(w, step)]
        if max(abs(s) for s in step) < 1e-6:
            break
    return w


def training_set(queries, held_repo=None):
    rows, labels, weights = [], [], []
    for query in queries:
        if held_repo is not None and query["repo"] == held_repo:
            continue
        for x, y, c in zip(query["x"], query["y"], query["candidates"]):
            if held_repo is not None and c.get("session_repo") == held_repo:
                continue
            rows.append(x)
            labels.append(y)
            weights.append(1.0)
    return rows, labels, weights


# --------------------------------------------------------------------------- simulation

def room(best, score, decay):
    return math.exp(-decay * max(0.0, best - score))


class CharsModel:
    """Characters a kept session's items hold, from its room (0..1): fitted
    on the answers the collector saw (`answer`), by least squares on
    [1, room, room if room >= 0.5]."""

    def __init__(self, coefficients=(250.0, 1500.0, 2500.0)):
        self.coefficients = coefficients

    @classmethod
    def fit(cls, queries, decay=6.0):
        rows, targets = [], []
        for query in queries:
            answer = query.get("answer") or []
            if not answer:
                continue
            best = answer[0]["score"]
            for entry in answer:
                r = room(best, entry["score"], decay)
                rows.append([1.0, r, r if r >= 0.5 else 0.0])
                targets.append(entry["chars"])
        if len(rows) < 10:
            return cls()
        xtx = [[sum(a[i] * a[j] for a in rows) for j in range(3)] for i in range(3)]
        xty = [sum(a[i] * t for a, t in zip(rows, targets)) for i in range(3)]
        return cls(tuple(solve(xtx, xty)))

    def chars(self, r):
        a, b, c = self.coefficients
        return max(60.0, a + b * r + (c * r if r >= 0.5 else 0.0))


STANDOUT_MARGIN = 2.0     # rank::gate::STANDOUT_MARGIN
BASELINE_PROTECTED = 5    # rank::gate::BASELINE_PROTECTED
MIN_COVERAGE_IN_COMMON = 0.01  # rank::gate::MIN_COVERAGE_IN_COMMON


def baseline_facts(query):
    """Per candidate: its place by session BM25 (1 the best) and whether it stands out
    (its BM25 at least STANDOUT_MARGIN times every other's), as `rank` computes them."""
    bm25 = [c["features"]["text_bm25"] for c in query["candidates"]]
    by_text = sorted(range(len(bm25)), key=lambda i: -bm25[i])
    place = {index: position + 1 for position, index in enumerate(by_text)}
    best = bm25[by_text[0]] if by_text else 0.0
    second = bm25[by_text[1]] if len(by_text) > 1 else 0.0
    stands_out = [False] * len(bm25)
    for position, index in enumerate(by_text):
        others = second if position == 0 else best
        stands_out[index] = others > 0 and bm25[index] >= STANDOUT_MARGIN * others
    return place, stands_out


def answer_of(query, scored, params, chars_model):
    """The simulated answer: [(instance_id, chars)] best first. `scored` is
    (fitted scores, gate probabilities[, answer scores]) per candidate: the
    gate walks them by fitted score, the kept are ordered by answer score."""
    scores, probabilities = scored[0], scored[1]
    answer_key = scored[2] if len(scored) > 2 else scores
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], -query["candidates"][i]["features"]["text_bm25"]))
    other_language = FEATURES.index("other_language")
    place, stands_out = baseline_facts(query)
    protected = lambda i: place[i] <= BASELINE_PROTECTED
    def floor(c):
        f = c["features"]
        return c["evidence"] < 0.1 and (
            f["text_rel"] < 0.15 and max(f["text_coverage"], f.get("term_coverage", 0.0)) < params.get("floor", 0.0))
    def nothing_in_common(c):
        f = c["features"]
        return c["evidence"] < 0.1 and max(f["text_coverage"], f.get("term_coverage", 0.0)) < MIN_COVERAGE_IN_COMMON
    kept_order = [i for i in order if stands_out[i] or (
                  not nothing_in_common(query["candidates"][i])
                  and (protected(i) or (probabilities[i] >= params["keep"] and not floor(query["candidates"][i])))
                  and not (query["x"][i][other_language] and query["candidates"][i]["evidence"] < 0.5
                           and not (protected(i) and not query.get("query_language"))
                           and query["candidates"][i]["features"]["text_coverage"] < 0.6))]
    if not kept_order:
        return []
    best = scores[kept_order[0]]
    kept, seen = [], set()
    for i in kept_order:
        score = scores[i]
        if best - score > params["below_best"] and not stands_out[i] and not protected(i):
            continue
        instance = query["candidates"][i]["instance_id"] or query["candidates"][i]["session_id"]
        if instance in seen:
            # A kept run stands for its task's dropped runs (`rank::stand_for_duplicates`).
            kept = [(k, s, max(a, answer_key[i]) if k == instance else a) for k, s, a in kept]
            continue
        seen.add(instance)
        kept.append((instance, score, answer_key[i]))
        if len(kept) >= min(MAX_KEPT, BUDGET_CHARS // MIN_ITEM_CHARS):
            break
    kept.sort(key=lambda entry: -entry[2])
    answer, used = [], 0.0
    for instance, score, _ in kept:
        chars = chars_model.chars(room(best, score, params["decay"]))
        if used + chars > BUDGET_CHARS:
            chars = BUDGET_CHARS - used
            if answer and chars < 300:
                break
        answer.append((instance, chars))
        used += chars
    return answer


def metrics(query, answer):
    gold = query["gold_instances"]
    ranked = [instance for instance, _ in answer]
    total = sum(chars for _, chars in answer)
    noise = sum(chars for instance, chars in answer if instance not in gold)
    result = {"noise_share": noise / total if total else 0.0, "empty": 0.0 if answer else 1.0,
              "items": len(answer), "chars": total}
    if gold:
        result["recall@5"] = sum(1 for i in ranked[:5] if i in gold) / len(gold)
        dcg = sum(gold.get(i, 0) / math.log2(k + 1) for k, i in enumerate(ranked[:NDCG_DEPTH], 1))
        ideal = sorted(gold.values(), reverse=True)[:NDCG_DEPTH]
        idcg = sum(g / math.log2(k + 1) for k, g in enumerate(ideal, 1))
        result["ndcg@10"] = dcg / idcg if idcg else 0.0
    return result


def evaluate(queries, scorer, params, chars_model):
    """Per-query metrics of every query."""
    out = []
    for query in queries:
        scores = scorer(query)
        m = metrics(query, answer_of(query, scores, params, chars_model))
        m["condition"] = query["condition"]
        m["repo"] = query["repo"]
        out.append(m)
    return out


def summarize(records):
    by_condition = {}
    for condition in CONDITIONS:
        selected = [r for r in records if r["condition"] == condition]
        if not selected:
            continue
        summary = {"queries": len(selected)}
        for metric in ("recall@5", "ndcg@10", "noise_share", "empty", "items", "chars"):
            values = [r[metric] for r in selected if metric in r]
            summary[metric] = sum(values) / len(values) if values else None
        per_repo = collections.defaultdict(list)
        for r in selected:
            per_repo[r["repo"]].append(r)
        worst = {}
        for metric, pick in (("recall@5", min), ("ndcg@10", min), ("noise_share", max), ("empty", min)):
            values = {}
            for repo, rs in per_repo.items():
                vs = [r[metric] for r in rs if metric in r]
                if vs:
                    values[repo] = sum(vs) / len(vs)
            if values:
                repo = pick(values, key=lambda k: values[k])
                worst[metric] = (values[repo], repo)
        summary["worst"] = worst
        summary["per_repo"] = {repo: len(rs) for repo, rs in per_repo.items()}
        by_condition[condition] = summary
    return by_condition


def objective(summary_full, summary_short):
    """What the thresholds are chosen for: the targets, as one number."""
    total = 0.0
    for summary, weight in ((summary_full, 1.0), (summary_short, 0.6)):
        if not summary:
            continue
        noisy, repo, only, relevant = (summary.get(c, {}) for c in ("noisy", "repo", "noise_only", "relevant"))
        total += weight * (
            (noisy.get("ndcg@10") or 0) - 0.5 * max(0.0, (noisy.get("noise_share") or 0) - 0.15)
            + (repo.get("ndcg@10") or 0) - 0.5 * max(0.0, (repo.get("noise_share") or 0) - 0.45)
            + 0.4 * (only.get("empty") or 0)
            - 6.0 * max(0.0, 0.99 - (relevant.get("recall@5") or 0))
        )
    return total


def linear_scorer(w):
    """One pointwise model: ranks and gates by the same probability."""
    def score(query):
        p = [sigmoid(sum(wi * xi for wi, xi in zip(w, x))) for x in query["x"]]
        return p, p
    return score


# Ranking features: per candidate, no bias (a query's ranking is all that
# matters); indices into FEATURES.
# Only features whose sign an engineer can defend: a fit on a few hundred
# queries otherwise learns quirks of the dev data (on it, sessions without
# a diff and shared error types came out as signs against relevance the
# wrong way round, which a held-out set would not share).
RANK_FEATURES = tuple(FEATURES.index(name) for name in (
    "text_rel", "text_coverage", "term_coverage", "symbols_changed", "symbols_referenced", "paths",
    "stems", "location_words", "file_support", "failed", "other_language", "text_rank"))
# With --extra-features, the extra ones follow (their indices past FEATURES).
GATE_FEATURES = ("bias", "rank_score", "below_best", "best_rank_score", "query_weight", "other_language",
                 "num_candidates")


def rank_indices():
    return RANK_FEATURES + tuple(range(len(FEATURES), len(FEATURES) + len(EXTRA_FEATURES) + APPENDED[0]))


def rank_scores(query, w_rank):
    return [sum(w * x[i] for w, i in zip(w_rank, rank_indices())) for x in query["x"]]


def gate_rows(query, scores):
    if not scores:
        return []
    best = max(scores)
    index = {name: FEATURES.index(name) for name in FEATURES}
    rows = []
    for x, s in zip(query["x"], scores):
        extra = [len(FEATURES) + EXTRA_FEATURES.index(name) for name in GATE_EXTRA]
        rows.append([1.0, s, best - s, best, x[index["query_weight"]], x[index["other_language"]],
                     squash(len(scores))] + [x[i] for i in extra]
                    + [max(other[i] for other in query["x"]) for i in extra])
    return rows


def fit_pairwise(queries, held_repo=None, l2=1.0, max_pairs=300, start=None, iterations=12, balance=False):
    """A ranking of the candidates of one query: logistic regression on the
    differences of (more relevant, less relevant) pairs of one query. With
    `held_repo`, that repository's queries and candidate sessions are left
    out. With `balance`, each source (`query["source"]`) weighs the same in
    total, however many pairs it has."""
    import random
    rng = random.Random(7)
    rows, sources = [], []
    for query in queries:
        if held_repo is not None and query["repo"] == held_repo:
            continue
        cands = [(c["grade"], [x[i] for i in rank_indices()]) for x, c in zip(query["x"], query["candidates"])
                 if held_repo is None or c.get("session_repo") != held_repo]
        pairs = [(a, b) for a in cands for b in cands if a[0] > b[0]]
        if len(pairs) > max_pairs:
            pairs = rng.sample(pairs, max_pairs)
        for (ga, xa), (gb, xb) in pairs:
            # Without a bias, (a - b, 1) and (b - a, 0) are the same term of
            # the likelihood: one row of weight 2 stands for both.
            rows.append([u - v for u, v in zip(xa, xb)])
            sources.append(query.get("source", "dev"))
    counts = collections.Counter(sources)
    if balance and counts:
        weights = [2.0 * len(rows) / (len(counts) * counts[source]) for source in sources]
    else:
        weights = [2.0] * len(rows)
    # fit_logistic treats feature 0 as an unpenalised bias: prepend a zero column.
    w = fit_logistic([[0.0] + r for r in rows], [1.0] * len(rows), weights, l2=l2, iterations=iterations,
                     start=[0.0] + start if start else None)
    return w[1:]


def fit_gate(queries, w_rank, held_repo=None, l2=1.0, start=None, iterations=12):
    rows, labels, weights = [], [], []
    for query in queries:
        if held_repo is not None and query["repo"] == held_repo:
            continue
        g = gate_rows(query, rank_scores(query, w_rank))
        for row, y, c in zip(g, query["y"], query["candidates"]):
            if held_repo is not None and c.get("session_repo") == held_repo:
                continue
            rows.append(row)
            labels.append(y)
            weights.append(1.0)
    return fit_logistic(rows, labels, weights, l2=l2, iterations=iterations, start=start)


STRUCTURE = ("symbols_changed", "symbols_referenced", "paths", "stems", "location_words", "file_support")
MAX_STRUCTURE = 3.0  # rank::relevance::MAX_STRUCTURE


def answer_scores(query, w_rank):
    """The answer score (`rank::relevance::answer_score`): relative BM25 scaled
    up by the saturated structure, at most twice."""
    names = [FEATURES[i] if i < len(FEATURES) else None for i in rank_indices()]
    text_rel = FEATURES.index("text_rel")
    keys = []
    for x in query["x"]:
        s = sum(w * x[i] for w, i, name in zip(w_rank, rank_indices(), names) if name in STRUCTURE)
        saturated = MAX_STRUCTURE * s / (s + MAX_STRUCTURE) if s > 0 else 0.0
        keys.append(x[text_rel] * (1.0 + saturated / MAX_STRUCTURE))
    return keys


def two_stage_scorer(w_rank, w_gate):
    def score(query):
        s = rank_scores(query, w_rank)
        p = [sigmoid(sum(wi * xi for wi, xi in zip(w_gate, row))) for row in gate_rows(query, s)]
        return s, p, answer_scores(query, w_rank)
    return score


def param_grid():
    for keep in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4):
        for below_best in (2.0, 4.0, 1e9):
            for decay in (6.0,):
                for floor in (0.08,):
                    yield {"keep": keep, "below_best": below_best, "decay": decay, "floor": floor}


def choose_params(full, short, scorer, chars_model):
    """The thresholds that serve the objective best on these queries; the
    scores are computed once."""
    cache_full = [(q, scorer(q)) for q in full]
    cache_short = [(q, scorer(q)) for q in short]
    best, best_value = None, -1e9
    for params in param_grid():
        records_full = []
        for q, s in cache_full:
            m = metrics(q, answer_of(q, s, params, chars_model))
            m["condition"], m["repo"] = q["condition"], q["repo"]
            records_full.append(m)
        records_short = []
        for q, s in cache_short:
            m = metrics(q, answer_of(q, s, params, chars_model))
            m["condition"], m["repo"] = q["condition"], q["repo"]
            records_short.append(m)
        value = objective(summarize(records_full), summarize(records_short) if short else None)
        if value > best_value:
            best, best_value = params, value
    return best


# --------------------------------------------------------------------------- generalization

def ranked_instances(query, scores):
    """Distinct instances of a query's candidates by `scores` (ties: session BM25)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], -query["candidates"][i]["features"]["text_bm25"]))
    seen, out = set(), []
    for i in order:
        c = query["candidates"][i]
        instance = c.get("instance_id") or c["session_id"]
        if instance not in seen:
            seen.add(instance)
            out.append(instance)
    return out


def floor_module():
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import floor  # noqa: E402  (the floor's metrics, so both reports count alike)
    return floor


RANKING_METRICS = ("hr@1", "r@5", "mrr", "ndcg@10")


def score_orders(queries, orders, system, out):
    """Adds the floor's metrics of `orders` ({query_id-ish index: ranked}) to `out`."""
    floor = floor_module()
    for query, ranked in zip(queries, orders):
        gold = query.get("gold_instances") or {}
        if not gold:
            continue
        key = (query["set"], query["condition"])
        out[key][system].append(floor.metrics(ranked, gold))


def generalization(sources, modes, l2, balance, max_pairs, loro_iterations, by_repo=False):
    """Ranking only (no gate): per set and condition, session BM25, the served
    order, the served answer, and for each normalization mode a ranking fitted
    leaving one source out (LOSO: fitted on the other source, scored on this
    one) and leaving one repository out (LORO: fitted on both sources without
    the repository's queries and sessions)."""
    everything = [q for queries in sources.values() for q in queries]
    floor = floor_module()
    tables = {"LOSO": collections.defaultdict(lambda: collections.defaultdict(list)),
              "LORO": collections.defaultdict(lambda: collections.defaultdict(list))}
    per_repo = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for table in tables.values():
        score_orders(everything, [ranked_instances(q, [c["features"]["text_bm25"] for c in q["candidates"]])
                                  for q in everything], "session BM25", table)
        score_orders(everything, [ranked_instances(q, [c["score"] for c in q["candidates"]]) for q in everything],
                     "served, no gate", table)
        score_orders(everything, [floor.rankings(q)["answer"] for q in everything], "served answer", table)
    weights = {}
    for mode in modes:
        renormalize(everything, mode)
        name = f"fit, {mode}"
        w_all = fit_pairwise(everything, l2=l2, max_pairs=max_pairs, balance=balance)
        weights[mode] = w_all
        for source, queries in sources.items():
            train = [q for other, qs in sources.items() if other != source for q in qs]
            w = fit_pairwise(train, l2=l2, max_pairs=max_pairs, balance=balance)
            score_orders(queries, [ranked_instances(q, rank_scores(q, w)) for q in queries], name, tables["LOSO"])
            print(f"  LOSO {mode} without {source}: " + " ".join(f"{v:.2f}" for v in w), file=sys.stderr)
        for repo in sorted({q["repo"] for q in everything}):
            w = fit_pairwise(everything, held_repo=repo, l2=l2, max_pairs=max_pairs, balance=balance,
                             start=w_all, iterations=loro_iterations)
            held = [q for q in everything if q["repo"] == repo]
            orders = [ranked_instances(q, rank_scores(q, w)) for q in held]
            score_orders(held, orders, name, tables["LORO"])
            if by_repo:
                score_orders(held, orders, name, per_repo[repo])
        print(f"  {mode}: all-data weights " + " ".join(f"{v:.2f}" for v in w_all), file=sys.stderr)
    if by_repo:
        for q in everything:
            score_orders([q], [ranked_instances(q, [c["features"]["text_bm25"] for c in q["candidates"]])],
                         "session BM25", per_repo[q["repo"]])
            score_orders([q], [ranked_instances(q, [c["score"] for c in q["candidates"]])],
                         "served, no gate", per_repo[q["repo"]])
    return tables, per_repo, weights


SET_ORDER = ("dev", "dev-short", "githist")
CONDITION_ORDER = ("relevant", "noisy", "repo", "githist")


def print_generalization(title, table, markdown=False):
    """Mean metrics per set, condition and system; `<bm25` / `<served` mark an
    R@5 or MRR under session BM25's or the served order's."""
    print(f"\n{title}")
    if markdown:
        print("| source | condition | queries | system | HR@1 | R@5 | MRR | nDCG@10 | floor |")
        print("|---|---|---:|---|---:|---:|---:|---:|---|")
    keys = sorted(table, key=lambda k: (SET_ORDER.index(k[0]) if k[0] in SET_ORDER else 9,
                                        CONDITION_ORDER.index(k[1]) if k[1] in CONDITION_ORDER else 9))
    verdicts = collections.defaultdict(list)
    for key in keys:
        systems = table[key]
        means = {system: {m: sum(r[m] for r in rows) / len(rows) for m in RANKING_METRICS}
                 for system, rows in systems.items()}
        for system, values in means.items():
            marks = []
            for reference, label in (("session BM25", "<bm25"), ("served, no gate", "<served")):
                if system.startswith("fit") and any(values[m] < means[reference][m] - 1e-9 for m in ("r@5", "mrr")):
                    marks.append(label)
            if system.startswith("fit"):
                verdicts[system].append(not marks)
            n = len(systems[system])
            if markdown:
                print(f"| {key[0]} | {key[1]} | {n} | {system} | " + " | ".join(f"{values[m]:.3f}" for m in RANKING_METRICS)
                      + f" | {' '.join(marks)} |")
            else:
                print(f"  {key[0]:<10} {key[1]:<9} {n:>4} {system:<18} " + " ".join(f"{m} {values[m]:.3f}" for m in RANKING_METRICS)
                      + ("  " + " ".join(marks) if marks else ""))
    for system, ok in verdicts.items():
        print(f"  {system}: at least session BM25 and the served order on R@5 and MRR in {sum(ok)} of {len(ok)} cells")


def print_summary(title, summary):
    print(f"\n{title}")
    print(f"  {'condition':<11} {'queries':>7} {'R@5':>6} {'nDCG@10':>8} {'noise':>6} {'empty':>6} {'items':>6} {'chars':>7}   worst repository (R@5 / nDCG / noise / empty)")
    for condition in CONDITIONS:
        s = summary.get(condition)
        if not s:
            continue
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        worst = s["worst"]
        worst_text = "  ".join(
            f"{metric.split('@')[0]} {value:.3f} ({repo})" for metric, (value, repo) in worst.items()
            if not (condition == "noise_only" and metric in ("recall@5", "ndcg@10"))
        )
        print(f"  {condition:<11} {s['queries']:>7} {fmt(s['recall@5']):>6} {fmt(s['ndcg@10']):>8} {fmt(s['noise_share']):>6} "
              f"{fmt(s['empty']):>6} {s['items']:>6.1f} {s['chars']:>7.0f}   {worst_text}")


# --------------------------------------------------------------------------- the shipped model

MODEL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.json")
RUST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crates/precedent-rank/src/relevance.rs")
REGION_BEGIN = "// BEGIN written by `scripts/relevance/fit.py --render` from model.json: do not edit."
REGION_END = "// END written by fit.py."


def model_of(w_rank, w_gate, params, fitted_on):
    """The model file's content for these weights and thresholds."""
    names = FEATURES + tuple(EXTRA_FEATURES) + tuple(f"{FEATURES[i]}_in_query" for i in appended_columns())
    gate_names = GATE_FEATURES + tuple(GATE_EXTRA) + tuple(f"best_{name}" for name in GATE_EXTRA)
    return {
        "about": "The shipped relevance model. Written by `scripts/relevance/fit.py --write` with the dumps it "
                 "was fitted on; `fit.py --render` writes its region of crates/precedent-rank/src/relevance.rs; a test in that "
                 "file fails when the two disagree.",
        "fitted_on": fitted_on,
        "rank_inputs": [names[i] for i in rank_indices()],
        "rank": [round(float(v), 5) for v in w_rank],
        "gate_inputs": list(gate_names),
        "gate": [round(float(v), 5) for v in w_gate],
        "keep_probability": params["keep"],
        "max_below_best": params["below_best"],
        "room_decay": params["decay"],
    }


def render_region(model):
    """The Rust text between the region's markers."""
    def table(name, size, names, weights, doc):
        lines = [f"/// {doc}", f"const {name}: [f32; {size}] = ["]
        width = max(len(f"{w:.5f},") for w in weights)
        lines += [f"    {f'{w:.5f},':<{width}} // {n}" for n, w in zip(names, weights)]
        return lines + ["];"]
    def names(name, size, values):
        return ["#[cfg(test)]", f"const {name}: [&str; {size}] = ["] + [f"    {json.dumps(v)}," for v in values] + ["];"]
    lines = [REGION_BEGIN]
    lines += table("RANK", "NUM_RANK_INPUTS", model["rank_inputs"], model["rank"],
                   "Ranking weights, in the order of [`rank_inputs`].")
    lines += names("RANK_INPUTS", "NUM_RANK_INPUTS", model["rank_inputs"])
    lines.append("")
    lines += table("GATE", "NUM_GATE_INPUTS", model["gate_inputs"], model["gate"],
                   "Gate weights, in the order of [`gate_inputs`].")
    lines += names("GATE_INPUTS", "NUM_GATE_INPUTS", model["gate_inputs"])
    lines.append("")
    lines += ["/// A candidate less likely relevant than this is dropped.",
              f"pub const KEEP_PROBABILITY: f32 = {model['keep_probability']!r};",
              "/// A kept session ranks at most this far below the best one.",
              f"pub(crate) const MAX_BELOW_BEST: f32 = {model['max_below_best']!r};",
              "/// Per unit of ranking score below the best, a session's room in the",
              "/// answer shrinks by e^-this (see `assemble::room`).",
              f"pub(crate) const ROOM_DECAY: f32 = {model['room_decay']!r};",
              f"const NUM_RANK_INPUTS: usize = {len(model['rank'])};",
              f"const NUM_GATE_INPUTS: usize = {len(model['gate'])};",
              REGION_END]
    return "\n".join(lines)


def rust_with_region(text, model):
    """`text` (relevance.rs) with its region written from `model`."""
    begin, end = text.find(REGION_BEGIN), text.find(REGION_END)
    if begin < 0 or end < begin:
        raise SystemExit(f"{RUST_PATH} has no region between {REGION_BEGIN!r} and {REGION_END!r}")
    return text[:begin] + render_region(model) + text[end + len(REGION_END):]


def render(check):
    """Writes (or, with `check`, compares) the region of relevance.rs from model.json."""
    with open(MODEL_PATH, encoding="utf-8") as handle:
        model = json.load(handle)
    with open(RUST_PATH, encoding="utf-8") as handle:
        text = handle.read()
    wanted = rust_with_region(text, model)
    if check:
        if wanted != text:
            raise SystemExit(f"{RUST_PATH} disagrees with {MODEL_PATH}: run fit.py --render")
        print("relevance.rs agrees with model.json")
    elif wanted != text:
        with open(RUST_PATH, "w", encoding="utf-8") as handle:
            handle.write(wanted)
        print(f"wrote {RUST_PATH}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", help="the dev dump (collect.py); needed unless --render or --check")
    parser.add_argument("--render", action="store_true", help="write relevance.rs's region from model.json")
    parser.add_argument("--check", action="store_true", help="exit 1 when relevance.rs disagrees with model.json")
    parser.add_argument("--write", action="store_true",
                        help="fit on everything given, write model.json and relevance.rs's region")
    parser.add_argument("--short")
    parser.add_argument("--loro", action="store_true")
    parser.add_argument("--rust", action="store_true")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--served", action="store_true", help="simulate the served scores and verdicts")
    parser.add_argument("--extra-full", help="extra candidate features of the full queries (JSON)")
    parser.add_argument("--extra-short", help="extra candidate features of the short queries (JSON)")
    parser.add_argument("--extra-githist", help="extra candidate features of the git-history queries (JSON)")
    parser.add_argument("--extra-features", default="", help="names of extra features the ranking reads")
    parser.add_argument("--extra-gate", default="", help="names of extra features the gate reads too")
    parser.add_argument("--githist", nargs="*", default=[], help="git-history dumps (collect_githist.py): a second source")
    parser.add_argument("--normalize", choices=NORMALIZE_MODES, default="none",
                        help="features normalized within a query's candidates (fit, --loro, --rust)")
    parser.add_argument("--generalize", default="",
                        help="normalization modes (comma-separated) to judge by ranking alone, LOSO and LORO")
    parser.add_argument("--rank-features", default="",
                        help="ranking features (comma-separated names) instead of the default set")
    parser.add_argument("--balance", action="store_true", help="each source weighs the same in the ranking fit")
    parser.add_argument("--max-pairs", type=int, default=300, help="pairs per query in the ranking fit")
    parser.add_argument("--loro-iterations", type=int, default=4)
    parser.add_argument("--by-repo", action="store_true", help="with --generalize: LORO per repository too")
    parser.add_argument("--markdown", action="store_true", help="with --generalize: tables in Markdown")
    args = parser.parse_args()
    if args.render or args.check:
        render(check=args.check)
        return
    if not args.full:
        parser.error("--full is required")
    if args.rank_features:
        global RANK_FEATURES
        RANK_FEATURES = tuple(FEATURES.index(name) for name in args.rank_features.split(","))
    EXTRA_FEATURES.extend(name for name in args.extra_features.split(",") if name)
    GATE_EXTRA.extend(name for name in args.extra_gate.split(",") if name)
    for name in GATE_EXTRA:
        if name not in EXTRA_FEATURES:
            parser.error(f"--extra-gate {name} is not in --extra-features")
    for dump, path in (("full", args.extra_full), ("short", args.extra_short), ("githist", args.extra_githist)):
        if path:
            with open(path, encoding="utf-8") as handle:
                EXTRA_VALUES[dump] = json.load(handle)
    if EXTRA_FEATURES and not args.extra_full:
        parser.error("--extra-features needs --extra-full")
    full = prepare(read_dump(args.full), "full", args.normalize)
    short = prepare(read_dump(args.short), "short", args.normalize) if args.short else []
    githist = prepare([q for path in args.githist for q in read_dump(path)], "githist", args.normalize)
    for queries, source, name in ((full, "dev", "dev"), (short, "dev", "dev-short"), (githist, "githist", "githist")):
        for query in queries:
            query["source"], query["set"] = source, name
    chars_model = CharsModel.fit(full + short)
    print(f"chars model: {chars_model.coefficients}", file=sys.stderr)

    if args.served:
        def served(query):
            s = [c["score"] for c in query["candidates"]]
            p = [0.0 if c["dropped"] else 1.0 for c in query["candidates"]]
            return s, p
        params = {"answer": 0.5, "keep": 0.5, "below_best": 1e9, "decay": 6.0}
        print_summary("served (simulated)", summarize(evaluate(full, served, params, chars_model)))
        if short:
            print_summary("served, short queries (simulated)", summarize(evaluate(short, served, params, chars_model)))
        return

    if args.generalize:
        modes = args.generalize.split(",")
        sources = {"dev": full + short}
        if githist:
            sources["githist"] = githist
        tables, per_repo, _ = generalization(sources, modes, args.l2, args.balance, args.max_pairs,
                                             args.loro_iterations, args.by_repo)
        print_generalization("leave one source out (ranking alone, no gate)", tables["LOSO"], args.markdown)
        print_generalization("leave one repository out (ranking alone, no gate)", tables["LORO"], args.markdown)
        for repo, table in sorted(per_repo.items()):
            print_generalization(f"LORO: {repo}", table, args.markdown)
        return

    everything = full + short + githist
    w_rank_all = fit_pairwise(everything, l2=args.l2, balance=args.balance)
    w_gate_all = fit_gate(everything, w_rank_all, l2=args.l2)
    scorer_all = two_stage_scorer(w_rank_all, w_gate_all)
    params_all = choose_params(full, short, scorer_all, chars_model)
    print(f"in-sample thresholds: {params_all}", file=sys.stderr)
    print_summary("in-sample, full queries", summarize(evaluate(full, scorer_all, params_all, chars_model)))
    if short:
        print_summary("in-sample, short queries", summarize(evaluate(short, scorer_all, params_all, chars_model)))

    if args.loro:
        repos = sorted({q["repo"] for q in full})
        held_full, held_short = [], []
        for repo in repos:
            w_rank = fit_pairwise(everything, held_repo=repo, l2=args.l2, start=w_rank_all, iterations=4)
            w_gate = fit_gate(everything, w_rank, held_repo=repo, l2=args.l2, start=w_gate_all, iterations=4)
            scorer = two_stage_scorer(w_rank, w_gate)
            train_full = [q for q in full if q["repo"] != repo]
            train_short = [q for q in short if q["repo"] != repo]
            params = choose_params(train_full, train_short, scorer, chars_model)
            held_full += evaluate([q for q in full if q["repo"] == repo], scorer, params, chars_model)
            held_short += evaluate([q for q in short if q["repo"] == repo], scorer, params, chars_model)
            print(f"  fold {repo}: {params}", file=sys.stderr)
        print_summary("LORO, full queries", summarize(held_full))
        if short:
            print_summary("LORO, short queries", summarize(held_short))

    if args.rust:
        print(render_region(model_of(w_rank_all, w_gate_all, params_all, "this run")))
    if args.write:
        fitted_on = ", ".join(path for path in [args.full, args.short] + args.githist if path)
        with open(MODEL_PATH, "w", encoding="utf-8") as handle:
            json.dump(model_of(w_rank_all, w_gate_all, params_all, fitted_on), handle, indent=2)
            handle.write("\n")
        render(check=False)


if __name__ == "__main__":
    main()
