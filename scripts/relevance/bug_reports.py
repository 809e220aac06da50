#!/usr/bin/env python3
"""Real bug reports over real git history: is the fix in the hook's context?

The issue texts of the git-history tasks of dev repositories
(`../shared/eval/data/githist-dev-tasks.jsonl`: a real issue, the base
commit it was filed against and the patch that fixed it) are searched
against each repository's whole first-parent history, imported once
(`precedent import GITDIR --server URL`), as the UserPromptSubmit hook
searches with a prompt: top_k 5 and a budget of 4,000 characters (the hook's
defaults). The fix is the first first-parent commit after the base whose
diff adds the patch's most distinctive added line (a merged pull request is
its merge commit, as import stores it); a task whose fix is not found so is
left out and counted.

Reported per task, on the same history:
- answer (printed as hook): the rank of the fix among the commits the answer hands over (the
  hook's context), or nothing;
- session BM25: the rank by the candidates' `text_bm25` feature
  (`/v1/search/explain`, nothing dropped);
- `git log -p` BM25: Okapi BM25 over every commit's message and diff.

The target: the fix in the hook's context for at least as many reports as
`git log -p` BM25 puts it in its top 3.

    python3 scripts/relevance/bug_reports.py --bin target/release/precedent \\
        --git sharkdp/fd=/path/fd.git --git BurntSushi/ripgrep=/path/rg.git \\
        [--git tokio-rs/tokio=...] [--per-repo N] [--json-out F]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK_TOP_K = 5
HOOK_BUDGET = 4000


def distinctive_lines(patch):
    """The patch's added lines (file, text) worth looking for: code outside
    tests first, longest first; never a changelog's or a document's (a later
    release note repeats them)."""
    lines, current = [], None
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            current = line[6:]
        elif line.startswith("+") and not line.startswith("+++") and current:
            text = line[1:].strip()
            if len(text) >= 20 and re.search(r"[A-Za-z_]{4}", text):
                lines.append((current, text))
    prose = re.compile(r"(CHANGELOG|\.md$|\.rst$|\.txt$|^doc)", re.IGNORECASE)
    tests = re.compile(r"(^|/)(tests?|testing)(/|_)|_test\.|test_", re.IGNORECASE)
    lines = [entry for entry in lines if not prose.search(entry[0])]
    return sorted(lines, key=lambda entry: (bool(tests.search(entry[0])), -len(entry[1])))


def find_fix(git, gitdir, task):
    """The first-parent commit after the base that adds one of the patch's
    most distinctive lines, or None."""
    history = git(gitdir, "rev-list", "--first-parent", "--reverse", f"{task['base_commit']}..HEAD").split()
    if not history:
        return None
    position = {commit: index for index, commit in enumerate(history)}
    for path, text in distinctive_lines(task["patch"])[:3]:
        found = git(gitdir, "log", "--first-parent", "--diff-merges=first-parent", "--format=%H",
                    "-S", text, f"{task['base_commit']}..HEAD", "--", path).split()
        found = [commit for commit in found if commit in position]
        if found:
            return min(found, key=position.get)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--git", action="append", default=[], help="OWNER/NAME=GITDIR, once per repository")
    parser.add_argument("--eval-dir", default=os.path.join(HERE, "../../../shared/eval"))
    parser.add_argument("--per-repo", type=int, default=0, help="tasks per repository at most (0: all)")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.eval_dir))
    import githist  # noqa: E402
    from amlbench import Bm25Index  # noqa: E402
    sys.path.insert(0, HERE)
    import advisories  # noqa: E402

    gits = dict(entry.split("=", 1) for entry in args.git)
    tasks = [json.loads(line) for line in open(os.path.join(args.eval_dir, "data/githist-dev-tasks.jsonl"))]
    tasks = [task for task in tasks if task["repo"] in gits]
    if not tasks:
        raise SystemExit("no task of the repositories given (--git OWNER/NAME=GITDIR)")

    work = tempfile.mkdtemp(prefix="bug-reports-")
    proc, url = githist.start_server(args.bin, os.path.join(work, "data"))
    rows, not_found = [], []
    try:
        for repo, gitdir in gits.items():
            user = "bugs-" + repo.replace("/", "-")
            imported = subprocess.run([args.bin, "import", gitdir, "--user-id", user, "--server", url, "--json"],
                                      capture_output=True, text=True)
            if imported.returncode != 0:
                raise SystemExit(f"import failed for {repo}: {imported.stderr[-500:]}")
            docs = githist.commit_docs(gitdir, "HEAD")
            history = [c for c in githist.first_parent(gitdir, "HEAD") if c in docs]
            index, ids = Bm25Index(), []
            for commit in history:
                message, diff = docs[commit]
                index.add(message + "\n" + diff)
                ids.append(commit)
            repo_tasks = [task for task in tasks if task["repo"] == repo]
            if args.per_repo:
                repo_tasks = repo_tasks[:args.per_repo]
            for task in repo_tasks:
                fix = find_fix(githist.git, gitdir, task)
                if fix is None:
                    not_found.append(task["instance_id"])
                    continue
                ranked = advisories.commit_rankings(githist, url, user, task["problem_statement"], index, ids,
                                                    top_k=HOOK_TOP_K, max_chars=HOOK_BUDGET)
                row = {"id": task["instance_id"], "repo": repo, "fix": fix[:10], "history": len(history),
                       **advisories.fix_ranks(ranked, fix)}
                rows.append(row)
                print(f"  {row}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    if not rows:
        raise SystemExit(f"no fix found ({len(not_found)} tasks)")
    in_context = sum(1 for row in rows if row["answer"] is not None)
    git_top3 = sum(1 for row in rows if row["git_log_bm25"] is not None and row["git_log_bm25"] <= 3)
    session_top3 = sum(1 for row in rows if row["session_bm25"] is not None and row["session_bm25"] <= 3)
    print(f"{len(rows)} bug reports ({len(not_found)} left out: fix not found on the first-parent history)")
    print(f"fix in the hook's context:        {in_context}")
    print(f"fix in git log -p BM25's top 3:   {git_top3}")
    print(f"fix in session BM25's top 3:      {session_top3}")
    print(f"hook's context: {sum(r['answer_items'] for r in rows) / len(rows):.1f} items, "
          f"{sum(r['answer_chars'] for r in rows) / len(rows):.0f} characters on average")
    print(f"{'report':<28} {'hook':>5} {'session':>8} {'git log':>8}  chars")
    for row in rows:
        show = lambda r: "-" if r is None else str(r)
        print(f"{row['id']:<28} {show(row['answer']):>5} {show(row['session_bm25']):>8} "
              f"{show(row['git_log_bm25']):>8}  {row['answer_chars']}")
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump({"rows": rows, "not_found": not_found, "in_context": in_context,
                       "git_log_top3": git_top3, "session_bm25_top3": session_top3}, handle, indent=1)


if __name__ == "__main__":
    main()
