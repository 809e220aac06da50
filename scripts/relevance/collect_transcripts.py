#!/usr/bin/env python3
"""Collect ranking dumps from a third source: real agent transcripts never used for fitting.

The held-out sessions of `fixtures/heldout/` (aider spans, Claude Code sessions, OpenHands and
SWE-agent trajectories, SWE-agent 1.x runs), each beside the patch it applied (`NAME.patch`;
`swe-agent-runs/` also `NAME.gold.patch`, its task's gold fix), are grouped by repository. Within
a group each transcript in turn is the query: its first user request searches a memory (a user
of its own, filled with `precedent import FILES --user-id U --server URL`) holding the group's
other transcripts:

- `earlier`: aider spans and Claude Code sessions, whose order is known (span number, first
  timestamp): only the earlier ones;
- `same_task`: SWE-agent runs of the same task (other models, other action formats), beside the
  runs of the repository's other tasks with an earlier issue number;
- `other_task`: only the runs of the repository's other tasks with an earlier issue number.

With `--pooled`, each of these memories is also searched beside every transcript of the other
repositories (`pooled_CONDITION`: one user who worked on all of them, 43-50 sessions), and a
transcript with no memory in its own group searches the other repositories alone
(`pooled_other_repo`). A query whose memory holds no candidate of grade >= 1 goes to
`CONDITION_nogold` (an empty answer is right there; it counts for the empty share only).

Every candidate is graded with the dev benchmark's rule from the patches (`build_bench.py`, as `githist.py`): 2 = a changed
definition in common, 1 = a non-test source file in common, 0 otherwise; the SWE-agent 1.x runs
by their task's gold patch (the dev rule: task-level, from gold patches; the grade from the
applied patches is kept as `grade_applied`). Elixir and Pony count as source files here
(`--extra-source-ext`), which the dev benchmark never met; they get no grade 2 (no definition
parser).

Each query is sent to `POST /v1/search/explain` and `POST /search` as `collect.py` does; two
dumps in `collect.py`'s format are written, one with the whole first request (`--out`, like the
dev queries) and one with its first line (`--out-short`; `task_line` for the SWE-agent 1.x runs),
so `floor.py` and `fit.py` read them. Each record also holds the query text and the memory's
transcripts with their tasks (`memory`), for an outside reference (`bm25_transcripts.py`).
Sessions of one task count once (`instance_id` is the task: the SWE-agent runs of one issue).

    python3 scripts/relevance/collect_transcripts.py --bin target/release/precedent \\
        --url http://127.0.0.1:18461 --pooled --out dumps/transcripts.jsonl.gz \\
        --out-short dumps/transcripts-short.jsonl.gz

Standard-library Python; imports `build_bench` from `--eval-dir` (default `../shared/eval`).
"""
import argparse
import collections
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from collect import answer_sessions, post  # noqa: E402

FORMATS = ("aider", "claude-code", "openhands", "swe-agent", "swe-agent-runs")
ORDERED = ("aider", "claude-code")
# Absolute paths of a Claude Code patch: made relative to the session's work tree.
DEFAULT_STRIP = r"^/?home/[^/]+/projects/[^/]+/[^/]+/"


# --------------------------------------------------------------------------- the transcripts

def first_request_aider(path):
    """The first block of `#### ` lines that is not a slash command."""
    blocks, block = [], []
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("####"):
            block.append(line[4:].strip())
        elif block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    for block in blocks:
        text = "\n".join(block).strip()
        if text and not text.startswith("/"):
            return text
    return ""


def first_request_claude(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") != "user" or record.get("isMeta"):
            continue
        content = record.get("message", {}).get("content")
        if isinstance(content, list):
            content = "\n".join(x.get("text", "") for x in content if isinstance(x, dict) and x.get("type") == "text")
        if not content or content.lstrip().startswith(("<command", "<local-command", "<task-notification", "[Request")):
            continue
        return content.strip()
    return ""


ISSUE_MARKERS = (
    re.compile(r"<pr_description>\s*(.*?)\s*</pr_description>", re.S),
    re.compile(r"<issue_description>\s*(.*?)\s*</issue_description>", re.S),
    re.compile(r"ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", re.S),
)


def message_text(content):
    if isinstance(content, list):
        return "\n".join(x.get("text", "") for x in content if isinstance(x, dict))
    return content if isinstance(content, str) else ""


def first_request_trajectory(path):
    """The issue of the first user message of a SWE-agent / OpenHands trajectory."""
    data = json.load(open(path, encoding="utf-8", errors="replace"))
    history = data.get("history") or []
    for message in history:
        if not isinstance(message, dict) or message.get("is_demo"):
            continue  # a demonstration of another task shown in the prompt
        role = message.get("role") or message.get("source")
        if role != "user":
            continue
        text = message_text(message.get("content") or message.get("message") or "")
        if not text and isinstance(message.get("args"), dict):
            text = message["args"].get("content", "")
        for marker in ISSUE_MARKERS:
            found = marker.findall(text)
            if found:  # the last: a prompt may show a demonstration's issue first
                return found[-1].strip()
        if text.strip():
            return text.strip()
    return ""


def first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def first_timestamp(path):
    stamps = []
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            stamp = json.loads(line).get("timestamp")
        except ValueError:
            continue
        if stamp:
            stamps.append(stamp)
    return min(stamps) if stamps else ""


def transcripts(root):
    """[{name, path, format, repo, task, order, query, query_short, patch, gold_patch}]"""
    out = []
    for fmt in FORMATS:
        for meta_path in sorted(glob.glob(os.path.join(root, fmt, "*.meta.json"))):
            path = meta_path[: -len(".meta.json")]
            meta = json.load(open(meta_path))
            base = os.path.basename(path)
            item = {"name": f"{fmt}/{base}", "path": path, "format": fmt, "meta": meta,
                    "patch": path + ".patch",
                    "gold_patch": path + ".gold.patch" if os.path.exists(path + ".gold.patch") else None}
            if fmt == "aider":
                # "car-game: .aider.chat.history.md", spans NAME-K.chat.history.md in chat order
                item["repo"] = meta["source"].split(":", 1)[0]
                item["task"] = base
                item["order"] = int(re.search(r"-(\d+)\.chat\.history\.md$", base).group(1))
                item["query"] = first_request_aider(path)
            elif fmt == "claude-code":
                item["repo"] = meta["source"].split(":", 1)[0]
                item["task"] = base
                item["order"] = first_timestamp(path)
                item["query"] = first_request_claude(path)
            else:
                source = meta["source"].split(":", 1)[-1] if fmt != "openhands" else base
                task = os.path.basename(source.strip())
                task = re.sub(r"\.(traj|json)$", "", task)
                item["task"] = task
                item["repo"], _, number = task.rpartition("-")
                item["order"] = int(number) if number.isdigit() else None
                item["query"] = first_request_trajectory(path)
            item["query_short"] = meta.get("task_line") or first_line(item["query"])
            out.append(item)
    return out


# --------------------------------------------------------------------------- grading

def edits_of(build_bench, patch_path, strip):
    text = open(patch_path, encoding="utf-8", errors="replace").read()
    if strip:
        # `diff --git a/X b/X`, `--- a/X`, `+++ b/X` with X absolute: relative to the work tree
        text = re.sub(r"(?m)^(diff --git a/)(\S+) b/(\S+)$",
                      lambda m: f"{m.group(1)}{re.sub(strip, '', m.group(2))} b/{re.sub(strip, '', m.group(3))}", text)
        text = re.sub(r"(?m)^((?:---|\+\+\+) [ab]/)(\S+)", lambda m: m.group(1) + re.sub(strip, "", m.group(2)), text)
    return build_bench.task_edits({"patch": text})


# --------------------------------------------------------------------------- queries

def plan(items, pooled=False):
    """[(query item, condition, [memory items])]; same_task / other_task for task-based sources."""
    groups = collections.defaultdict(list)
    for item in items:
        groups[(item["format"] if item["format"] in ORDERED else "task", item["repo"])].append(item)
    jobs = []
    for (kind, repo), members in sorted(groups.items()):
        for query in members:
            others = [m for m in members if m is not query]
            if kind != "task":
                memory = [m for m in others if m["order"] < query["order"]]
                if memory:
                    jobs.append((query, "earlier", memory))
                continue
            same = [m for m in others if m["task"] == query["task"]]
            earlier_tasks = [m for m in others if m["task"] != query["task"] and m["order"] is not None
                             and query["order"] is not None and m["order"] < query["order"]]
            if same:
                jobs.append((query, "same_task", same + earlier_tasks))
            if earlier_tasks:
                jobs.append((query, "other_task", earlier_tasks))
    if pooled:
        # the same memories beside every transcript of the other repositories (one user who
        # worked on all of them); a transcript with no memory in its own group: `other_repo`
        in_group = {id(query) for query, _, _ in jobs}
        out = list(jobs)
        for query, condition, memory in jobs:
            others = [m for m in items if m["repo"] != query["repo"]]
            out.append((query, "pooled_" + condition, memory + others))
        for query in items:
            if id(query) not in in_group:
                out.append((query, "pooled_other_repo", [m for m in items if m["repo"] != query["repo"]]))
        jobs = out
    return jobs


def import_sessions(binary, url, user, paths):
    done = subprocess.run([binary, "import", *paths, "--user-id", user, "--server", url, "--json"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"import failed for {user}: {done.stderr[-800:]}")
    return json.loads(done.stdout)


def list_sessions(url, user):
    import urllib.parse
    import urllib.request
    ids, cursor = [], None
    while True:
        query = {"user_id": user, "limit": 500}
        if cursor:
            query["cursor"] = cursor
        with urllib.request.urlopen(f"{url}/v1/sessions?{urllib.parse.urlencode(query)}", timeout=60) as response:
            page = json.loads(response.read())
        ids += [s["session_id"] for s in page["data"]]
        cursor = page.get("next_cursor")
        if not cursor:
            return ids


def search(url, user, text):
    payload = {"query": text, "user_id": user, "top_k": 100}
    explained = post(url, "/v1/search/explain", payload)
    started = time.perf_counter()
    answer = post(url, "/search", payload)
    search_ms = (time.perf_counter() - started) * 1000.0
    return explained, answer_sessions(answer), search_ms


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--root", default=os.path.join(HERE, "../../fixtures/heldout"))
    parser.add_argument("--eval-dir", default=os.path.join(HERE, "../../../shared/eval"))
    parser.add_argument("--extra-source-ext", default="ex,exs,pony",
                        help="extensions counted as source files beside the dev benchmark's")
    parser.add_argument("--strip", default=DEFAULT_STRIP, help="regex removed from absolute patch paths")
    parser.add_argument("--prefix", default="tr", help="user ids PREFIX-...")
    parser.add_argument("--pooled", action="store_true",
                        help="also every memory beside the other repositories' transcripts (`pooled_*`)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--out-short")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.eval_dir))
    import build_bench  # noqa: E402
    build_bench.SOURCE_EXTENSIONS = build_bench.SOURCE_EXTENSIONS | frozenset(
        e for e in args.extra_source_ext.split(",") if e)

    items = transcripts(os.path.abspath(args.root))
    by_name = {item["name"]: item for item in items}
    for item in items:
        item["edits"] = edits_of(build_bench, item["patch"], args.strip)
        item["gold_edits"] = edits_of(build_bench, item["gold_patch"], args.strip) if item["gold_patch"] else None

    # each transcript's session ids, from an import of it alone
    session_of = {}
    for index, item in enumerate(items):
        user = f"{args.prefix}-map-{index}"
        import_sessions(args.bin, args.url, user, [item["path"]])
        for sid in list_sessions(args.url, user):
            session_of[sid] = item["name"]
    print(f"{len(items)} transcripts, {len(session_of)} sessions", file=sys.stderr)

    jobs = plan(items, args.pooled)
    dumps = {"full": [], "short": []}
    for number, (query, condition, memory) in enumerate(jobs):
        user = f"{args.prefix}-{condition}-{query['name'].replace('/', '-')}"
        import_sessions(args.bin, args.url, user, [m["path"] for m in memory])
        grades, grades_applied = {}, {}
        for m in memory:
            if m["repo"] != query["repo"]:  # another repository: never relevant (as in the dev benchmark)
                grades[m["name"]] = grades_applied[m["name"]] = 0
                continue
            grades_applied[m["name"]] = build_bench.relevance_grade(m["edits"], query["edits"])
            if query["gold_edits"] is not None and m["gold_edits"] is not None:
                grades[m["name"]] = build_bench.relevance_grade(m["gold_edits"], query["gold_edits"])
            else:
                grades[m["name"]] = grades_applied[m["name"]]
        instance = lambda m: m["task"]
        gold_instances = {}
        for m in memory:
            if grades[m["name"]] > 0:
                gold_instances[instance(m)] = max(gold_instances.get(instance(m), 0), grades[m["name"]])
        full_condition = condition if gold_instances else condition + "_nogold"
        for variant, text in (("full", query["query"]), ("short", query["query_short"])):
            if variant == "short" and not args.out_short:
                continue
            explained, answer, search_ms = search(args.url, user, text)
            candidates = []
            for candidate in explained["candidates"]:
                candidate = dict(candidate)
                name = session_of.get(candidate["session_id"])
                m = by_name.get(name)
                candidate["transcript"] = name
                candidate["instance_id"] = instance(m) if m else candidate["session_id"]
                candidate["session_repo"] = m["repo"] if m else None
                candidate["kind"] = m["format"] if m else None
                candidate["grade"] = grades.get(name, 0)
                candidate["grade_applied"] = grades_applied.get(name, 0)
                candidates.append(candidate)
            dumps[variant].append({
                "query_id": f"{query['name']}:{condition}",
                "condition": full_condition,
                "repo": query["repo"],
                "format": query["format"],
                "user_id": user,
                "instance_id": query["task"],
                "query": text,
                "gold": {s: grades[n] for s, n in session_of.items() if n in grades and grades[n] > 0},
                "gold_instances": gold_instances,
                "grades_applied": {m["name"]: grades_applied[m["name"]] for m in memory},
                "memory": {m["name"]: instance(m) for m in memory},
                "query_language": explained["query"].get("language"),
                "num_sessions": explained.get("num_sessions"),
                "num_scope_sessions": len(memory),
                "candidates": candidates,
                "answer": answer,
                "search_ms": search_ms,
            })
        print(f"  [{number + 1}/{len(jobs)}] {query['name']} {full_condition}: memory {len(memory)},"
              f" gold {sum(1 for g in grades.values() if g)}, candidates {len(dumps['full'][-1]['candidates'])},"
              f" answer {len(dumps['full'][-1]['answer'])}", file=sys.stderr)
    for variant, path in (("full", args.out), ("short", args.out_short)):
        if not path:
            continue
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            for record in dumps[variant]:
                handle.write(json.dumps(record) + "\n")
        print(f"{len(dumps[variant])} queries -> {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
