"""End-to-end check of `precedent mcp` with the official Python MCP SDK.

Usage: python tests/mcp/check.py BINARY

It starts `BINARY mcp` over stdio as a coding agent would, from inside a
throw-away git repository (so the user scope comes from its `origin`
remote), lists the tools and calls each one; then starts `BINARY serve` on
the same data directory and checks that `precedent mcp --server URL` sees the
same memory, and that opening a directory a server holds in-process
(`--no-server`) is refused with a clear message. Exits non-zero on the
first failed check.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "sessions" / "resolution-rust-ripgrep-954.json"
SCOPE = "github.com/example/project"
TOOLS = {"search_memory", "record_experience", "list_sessions", "get_session"}


def check(condition: bool, what: str, detail: object = "") -> None:
    if not condition:
        print(f"FAIL: {what}" + (f"\n  {detail}" if detail != "" else ""), file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def structured(result) -> dict:
    value = result.structured_content
    if value is None:
        # Clients may see only the text block; ours is JSON unless it is search text.
        value = json.loads(result.content[0].text)
    return value


async def local_session(binary: str, repo: Path, data_dir: Path, fixture: dict) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--data-dir", str(data_dir)],
        cwd=str(repo),
        env={"RUST_LOG": "warn"},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "precedent", "initialize names the server", init.server_info)
            check(SCOPE in (init.instructions or ""), "the scope comes from the git remote", init.instructions)

            listed = await session.list_tools()
            names = {tool.name for tool in listed.tools}
            check(names == TOOLS, "tools/list offers the four tools", names)
            for tool in listed.tools:
                check(tool.input_schema.get("type") == "object", f"{tool.name} has an object schema")
                check(bool(tool.description), f"{tool.name} has a description")

            session_id = fixture["source"]["session_id"]
            recorded = await session.call_tool(
                "record_experience", {"session_id": session_id, "messages": fixture["messages"]}
            )
            check(not recorded.is_error, "record_experience stores a trajectory", recorded.content)
            answer = structured(recorded)
            check(answer.get("success") is True and answer.get("session_id") == session_id,
                  "record_experience answers like Add", answer)

            noted = await session.call_tool(
                "record_experience",
                {"session_id": "note-1", "note": "Release builds need `cargo build --release --locked`."},
            )
            check(not noted.is_error, "record_experience stores a note", noted.content)
            again = await session.call_tool(
                "record_experience",
                {"session_id": "note-1", "note": "Release builds need `cargo build --release --locked`."},
            )
            check(not again.is_error, "the same note recorded again is accepted", again.content)

            listed_sessions = structured(await session.call_tool("list_sessions", {}))
            ids = {row["session_id"] for row in listed_sessions["data"]}
            check(ids == {session_id, "note-1"}, "list_sessions lists both sessions", ids)
            check(listed_sessions.get("next_cursor") is None, "one page holds both", listed_sessions)
            note_row = next(row for row in listed_sessions["data"] if row["session_id"] == "note-1")
            check(note_row["num_messages"] == 1, "the same note twice is stored once", note_row)
            check(note_row["task"].startswith("Release builds need"), "a note is its own task", note_row)
            first = structured(await session.call_tool("list_sessions", {"limit": 1}))
            check(len(first["data"]) == 1 and isinstance(first.get("next_cursor"), str),
                  "list_sessions with limit 1 gives one session and a cursor", first)
            second = structured(await session.call_tool(
                "list_sessions", {"limit": 1, "cursor": first["next_cursor"]}))
            check([row["session_id"] for row in first["data"] + second["data"]]
                  == [row["session_id"] for row in listed_sessions["data"]]
                  and second.get("next_cursor") is None,
                  "the cursor gives the other session, and the last page says so", second)
            refused = await session.call_tool("list_sessions", {"limit": 0})
            check(refused.is_error, "list_sessions refuses limit 0", refused.content)

            task = fixture["messages"][0]["content"]
            found = await session.call_tool("search_memory", {"query": task, "top_k": 3})
            check(not found.is_error, "search_memory answers", found.content)
            items = structured(found)["data"]
            check(len(items) >= 1 and items[0]["session_id"] == session_id,
                  "search_memory ranks the recorded trajectory first",
                  [item["session_id"] for item in items])
            text = found.content[0].text
            check(text.startswith("[1] ") and session_id in text, "search_memory's text names its sources", text[:200])

            explained = structured(await session.call_tool("search_memory", {"query": task, "explain": True}))
            candidates = explained.get("candidates", [])
            check(len(candidates) >= 1 and candidates[0]["session_id"] == session_id,
                  "search_memory with explain lists candidates with features", explained.keys())

            detail = structured(await session.call_tool("get_session", {"session_id": session_id}))
            check("src/" in json.dumps(detail.get("files_changed")) and detail.get("evidence"),
                  "get_session returns the record with files and evidence",
                  {key: detail.get(key) for key in ("files_changed", "symbols_changed")})

            missing = await session.call_tool("get_session", {"session_id": "no-such-session"})
            check(missing.is_error and "no session" in missing.content[0].text,
                  "get_session of an unknown session is a clear tool error", missing.content)

            bad = await session.call_tool("search_memory", {"query": task, "top_k": 0})
            check(bad.is_error and "top_k" in bad.content[0].text,
                  "an out-of-range argument is a clear tool error", bad.content)


async def remote_session(binary: str, url: str, session_id: str) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--server", url, "--user-id", SCOPE],
        env={"RUST_LOG": "warn"},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            rows = structured(await session.call_tool("list_sessions", {}))["data"]
            check(session_id in {row["session_id"] for row in rows},
                  "through --server, list_sessions sees what the local run stored", rows)
            detail = structured(await session.call_tool("get_session", {"session_id": session_id}))
            check(detail.get("task"), "through --server, get_session reads the record")
            noted = await session.call_tool("record_experience", {"session_id": "note-2", "note": "kept via the server"})
            check(not noted.is_error, "through --server, record_experience stores", noted.content)
            found = structured(await session.call_tool("search_memory", {"query": "kept via the server"}))
            check(any(item["session_id"] == "note-2" for item in found["data"]),
                  "through --server, what was just recorded is searchable", found)


def stop_local_server(data_dir: Path) -> None:
    """Stops the server `precedent mcp` started on first use, by its record."""
    record = data_dir / "server.json"
    if not record.exists():
        return
    pid = json.loads(record.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    check(False, "the local server stops on SIGTERM", pid)


def start_server(binary: str, data_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir)],
        stderr=log.open("w"),
    )
    for _ in range(300):
        match = re.search(r"listening on (http://[0-9.:]+)", log.read_text())
        if match:
            return process, match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    check(False, "the server starts", log.read_text())
    raise AssertionError


def main() -> None:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    binary = str(Path(sys.argv[1]).resolve())
    fixture = json.loads(FIXTURE.read_text())
    with tempfile.TemporaryDirectory(prefix="precedent-mcp-") as scratch:
        scratch = Path(scratch)
        repo = scratch / "project"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "remote", "add", "origin",
                        "https://token@github.com/example/project.git"], check=True)
        data_dir = scratch / "data"

        asyncio.run(local_session(binary, repo, data_dir, fixture))
        check((data_dir / "server.json").exists(), "without --server, mcp started the local server")
        stop_local_server(data_dir)

        server, url = start_server(binary, data_dir, scratch / "server.log")
        try:
            refused = subprocess.run([binary, "mcp", "--no-server", "--data-dir", str(data_dir), "--user-id", SCOPE],
                                     stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            check(refused.returncode != 0 and "without --no-server" in refused.stderr,
                  "opening a data directory a server holds in-process is refused, pointing to the local server",
                  refused.stderr.strip())
            asyncio.run(remote_session(binary, url, fixture["source"]["session_id"]))
        finally:
            server.terminate()
            server.wait(timeout=30)
        outside = subprocess.run([binary, "mcp", "--data-dir", str(data_dir)], cwd="/",
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                                 env={**os.environ, "GIT_CEILING_DIRECTORIES": "/"})
        check(outside.returncode != 0 and "--user-id" in outside.stderr,
              "outside a git repository without --user-id, a clear error", outside.stderr.strip())
    print("MCP check passed")


if __name__ == "__main__":
    main()
