#!/usr/bin/env python3
"""End to end: the real Claude Code CLI, wired to precedent by one command,
`precedent setup --agent claude-code` (hooks and MCP server), against a scripted mock of the model's
Messages API on loopback (claude_code_mock.py, which logs every request body).

    python3 tests/e2e/claude_code.py --precedent target/debug/precedent --claude PATH/TO/claude

Checks, each from what really reached the model or the store:
  1. session 1's edit (in a throwaway git repository) is recorded at Stop;
  2. session 2's related prompt carries that fix in a request body;
  3. a prompt that names no task ("thanks, commit and push") carries nothing
     from memory;
  4. a session in another repository carries nothing from the first;
  5. `claude mcp list` shows precedent connected, in a repository and in a
     folder that is none, and the model's MCP search call gets session 1's
     fix back.
Then prints the hooks' overhead per turn (hook timings from hooks.log, and
the wall time of turns with and without the hooks, alternated) as figures
only: nothing is asserted on time.

Exits 1, naming the failed check, on any failure. Python 3.11 standard library.
"""
import json
import re
import sys
import time

from common import (FIX, HEADING, Rig, body_text, carries_memory, check, git, main, make_repos,
                    report_overhead, strings_of, wait_recorded)


class ClaudeRig(Rig):
    MOCK = "claude_code_mock.py"
    AGENT = "claude-code"

    def agent_env(self):
        return {
            "ANTHROPIC_BASE_URL": self.mock_url,
            "ANTHROPIC_API_KEY": "test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }

    def turn(self, scenario, prompt, cwd, extra=()):
        """One `claude -p` turn: the mock's log entries of it, those of the
        main agent calls, and its wall time."""
        offset = self.begin_turn(scenario)
        started = time.monotonic()
        done = self.run([self.args.agent, "-p", prompt, "--output-format", "json",
                         "--permission-mode", "acceptEdits", *extra], cwd, timeout=180)
        wall = time.monotonic() - started
        if done.returncode != 0:
            sys.exit(f"claude -p ({scenario}) exited {done.returncode}\nstdout: {done.stdout}\n"
                     f"stderr: {done.stderr}")
        try:
            result = json.loads(done.stdout)
        except json.JSONDecodeError:
            sys.exit(f"claude -p ({scenario}) printed no JSON: {done.stdout!r} {done.stderr!r}")
        if result.get("is_error"):
            sys.exit(f"claude -p ({scenario}) reported an error: {done.stdout}")
        self.session_id = result.get("session_id", "")
        entries = self.mock_entries_since(offset)
        main_calls = [e for e in entries if str(e.get("reply_kind", "")).startswith("main")]
        if not main_calls:
            sys.exit(f"claude -p ({scenario}) made no main model call; log: {entries!r:.2000}")
        return entries, main_calls, wall


def hook_context(entry, event):
    """What a hook for `event` added to a request: Claude Code sends each hook's
    additionalContext as a text part "<event> hook additional context: ..."."""
    marker = f"{event} hook additional context:"
    return "\n".join(t[t.index(marker):] for t in strings_of(entry.get("body") or {}) if marker in t)


def run_checks(rig):
    args = rig.args
    rig.start_mock()
    rig.start_server()
    version = rig.run([args.agent, "--version"], rig.work)
    print(f"claude: {version.stdout.strip()}  precedent: {args.precedent}")
    print(f"mock model API at {rig.mock_url}, precedent serve at {rig.server_url}")

    inventory, weather = make_repos(rig.work)

    # Wiring, as a user does it: one command, hooks and MCP server at once.
    done = rig.setup(inventory)
    if done.returncode != 0:
        sys.exit(f"precedent setup failed: {done.stdout}{done.stderr}")
    print(done.stdout.strip())

    # 5a. The real client connects to precedent mcp.
    done = rig.run([args.agent, "mcp", "list"], inventory, timeout=90)
    line = next((l for l in done.stdout.splitlines() if l.startswith("precedent")), "")
    check("Connected" in line and "Failed" not in line, "claude mcp list shows precedent connected",
          f"exit {done.returncode}: {done.stdout}{done.stderr}")
    # 5b. Registered for every project, it connects in a folder that is no
    # git checkout too.
    plain = rig.work / "not-a-repository"
    plain.mkdir(exist_ok=True)
    done = rig.run([args.agent, "mcp", "list"], plain, timeout=90)
    line = next((l for l in done.stdout.splitlines() if l.startswith("precedent")), "")
    check("Connected" in line and "Failed" not in line,
          "claude mcp list shows precedent connected outside any repository",
          f"exit {done.returncode}: {done.stdout}{done.stderr}")

    # 1. Session 1 fixes a bug; its Stop hook records it.
    _, main1, _ = rig.turn("fix", "total_value in inventory/stock.py raises KeyError: 'price' for "
                           "items that have no price. Fix it.", inventory)
    edited = FIX in (inventory / "inventory/stock.py").read_text()
    check(edited, "session 1's Edit changed inventory/stock.py (the agent ran the tool)")
    # The Stop hook hands the import to a background process, which logs
    # what it stored; the store then lists the session with the edited file.
    wait_recorded(rig, inventory, rig.session_id)

    # Sessions 2 and 3 start on a clean checkout (session 1's edit put
    # aside, as after a commit elsewhere): SessionStart, which searches for
    # the checkout's work in progress, has nothing to go on, so whatever
    # reaches the model comes from the prompt.
    git(inventory, "stash", "-q")

    # 2. Session 2, a related task in the same repository: the context its
    # prompt's hook adds to the first request (before any tool ran) carries
    # session 1's fix.
    _, main2, _ = rig.turn("related", "total_value in inventory/stock.py also raises KeyError: 'qty' "
                           "when an item has no qty. How should it be handled?", inventory)
    given = hook_context(main2[0], "UserPromptSubmit")
    check(HEADING in given and FIX in given,
          "session 2's related prompt carries session 1's fix to the model (UserPromptSubmit)",
          f"UserPromptSubmit context sent: {given[:1500]!r}\nhooks.log of session 2:\n"
          f"{rig.hooks_since_turn()}")

    # 3. A prompt that names no task carries nothing from memory.
    entries3, _, _ = rig.turn("chat", "thanks, commit and push", inventory)
    carried = carries_memory(entries3)
    prompt_hook = re.findall(r" UserPromptSubmit (.*)", rig.hooks_since_turn())
    check(bool(prompt_hook) and not any(l.startswith("answered") for l in prompt_hook),
          "its UserPromptSubmit hook ran and answered nothing", f"hooks.log: {prompt_hook}")
    check(not carried, "a prompt that names no task carries nothing from memory",
          f"{len(carried)} request(s) carried memory:\n{body_text(carried[0])[:3000] if carried else ''}")
    git(inventory, "stash", "pop", "-q")

    # 4. Another repository: the same symptom carries nothing from the first.
    entries4, _, _ = rig.turn("other", "total_value raises KeyError: 'price' for items without a "
                              "price. Fix it.", weather)
    carried = carries_memory(entries4)
    check(not carried, "a session in another repository carries nothing from the first",
          f"{len(carried)} request(s) carried memory:\n{body_text(carried[0])[:3000] if carried else ''}")

    # 5b. Back on the checkout with session 1's edit: SessionStart hands the
    # fix for the work in progress, and the model's MCP search call gets it.
    _, main5, _ = rig.turn("mcp", "Search precedent's memory for the total_value KeyError.", inventory,
                           extra=("--allowedTools", "mcp__precedent__search_memory"))
    given = hook_context(main5[0], "SessionStart")
    check(FIX in given, "a session started on the edited checkout carries the fix (SessionStart)",
          f"SessionStart context sent: {given[:1500]!r}\nhooks.log:\n{rig.hooks_since_turn()}")
    results = [p for e in main5 for m in (e["body"].get("messages") or [])
               if isinstance(m.get("content"), list) for p in m["content"]
               if isinstance(p, dict) and p.get("type") == "tool_result"]
    text = "\n".join(strings_of(results))
    # The tool's answer is JSON text: the fix appears with its quotes escaped.
    check(json.dumps(FIX)[1:-1] in text, "the model's precedent MCP search returns session 1's fix",
          f"tool results: {text[:1500]!r}")

    report_overhead(rig, inventory)


if __name__ == "__main__":
    main(__doc__, ClaudeRig, run_checks, "claude", "the claude binary (@anthropic-ai/claude-code)")
