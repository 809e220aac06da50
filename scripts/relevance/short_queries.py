#!/usr/bin/env python3
"""Write a copy of a scopes file whose queries are only each task's first
non-empty line (the short-query condition). Same user ids, gold and scopes,
so it runs against the same ingested memory:

    python3 scripts/relevance/short_queries.py ../shared/eval/data/dev/scopes.jsonl > short/scopes.jsonl
"""

import json
import sys


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            for query in record["queries"]:
                query["query"] = first_line(query["query"])
            sys.stdout.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
