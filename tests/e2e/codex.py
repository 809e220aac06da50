#!/usr/bin/env python3
"""End to end: the real Codex CLI (`codex exec`), wired to precedent by one
command, `precedent setup --agent codex` (hooks and MCP server), against
a scripted mock of the OpenAI Responses API on loopback (codex_mock.py, which
logs every request body), as a custom model provider in a throwaway HOME.

    python3 tests/e2e/codex.py --precedent target/debug/precedent --codex PATH/TO/codex

The same checks as claude_code.py, from what reached the model or the store:
  1. session 1's edit (an apply_patch run through Codex's shell tool, in a
     throwaway git repository) is recorded at Stop;
  2. session 2's related prompt carries that fix in a request body;
  3. a prompt that names no task ("thanks, commit and push") carries nothing
     from memory;
  4. a session in another repository carries nothing from the first;
  5. Codex starts `precedent mcp` and offers its tools to the model (Codex's
     `mcp list` shows configuration, not a connection), and the model's MCP
     search call gets session 1's fix back.
Then prints the hooks' overhead per turn as figures only.

Codex runs a hook only once it is trusted (/hooks in its TUI);
`--dangerously-bypass-hook-trust` stands for that step here. Exits 1, naming
the failed check, on any failure. Python 3.11 standard library.
"""
import json
import re
import sys
import time

from common import (FIX, HEADING, Rig, body_text, carries_memory, check, git, main, make_repos,
                    report_overhead, strings_of, wait_recorded)


class CodexRig(Rig):
    MOCK = "codex_mock.py"
    AGENT = "codex"

    def agent_env(self):
        return {"OPENAI_API_KEY": "test"}

    def write_config(self):
        """The mock as Codex's model provider (config.toml, which `codex mcp
        add` then extends)."""
        config = self.home / ".codex" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'''model = "gpt-5-codex"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{self.mock_url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
''')

    def turn(self, scenario, prompt, cwd, extra=()):
        """One `codex exec` turn: the mock's log entries of it, those of the
        model calls, and its wall time."""
        offset = self.begin_turn(scenario)
        started = time.monotonic()
        done = self.run([self.args.agent, "exec", "--json", "--dangerously-bypass-hook-trust",
                         "--dangerously-bypass-approvals-and-sandbox",
                         # precedent's MCP tools answer without a prompt.
                         "-c", 'mcp_servers.precedent.default_tools_approval_mode="approve"',
                         *extra, prompt], cwd, timeout=180)
        wall = time.monotonic() - started
        events = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not any('"turn.completed"' in e for e in events):
            sys.exit(f"codex exec ({scenario}) exited {done.returncode}\nstdout: {done.stdout[-4000:]}\n"
                     f"stderr: {done.stderr[-4000:]}")
        started_event = next((json.loads(e) for e in events if '"thread.started"' in e), {})
        self.session_id = started_event.get("thread_id", "")
        entries = self.mock_entries_since(offset)
        model_calls = [e for e in entries if str(e.get("reply_kind", "")).startswith("main")]
        if not model_calls:
            sys.exit(f"codex exec ({scenario}) made no model call; log: {entries!r:.2000}")
        return entries, model_calls, wall


def developer_context(entry):
    """precedent's context in a request: Codex hands a hook's
    additionalContext to the model as a developer message."""
    texts = []
    for item in (entry.get("body") or {}).get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "developer":
            texts += [t for t in strings_of(item.get("content")) if HEADING in t]
    return "\n".join(texts)


def hook_answers(rig, event):
    return re.findall(rf" {event} (.*)", rig.hooks_since_turn())


def run_checks(rig):
    args = rig.args
    rig.start_mock()
    rig.start_server()
    rig.write_config()
    version = rig.run([args.agent, "--version"], rig.work)
    print(f"codex: {version.stdout.strip()}  precedent: {args.precedent}")
    print(f"mock model API at {rig.mock_url}, precedent serve at {rig.server_url}")

    inventory, weather = make_repos(rig.work)

    # Wiring, as a user does it: one command, hooks and MCP server at once.
    done = rig.setup(inventory)
    if done.returncode != 0:
        sys.exit(f"precedent setup failed: {done.stdout}{done.stderr}")
    print(done.stdout.strip())

    # 1. Session 1 fixes a bug; its Stop hook records it.
    _, calls1, _ = rig.turn("fix", "total_value in inventory/stock.py raises KeyError: 'price' for "
                            "items that have no price. Fix it.", inventory)
    check(FIX in (inventory / "inventory/stock.py").read_text(),
          "session 1's apply_patch changed inventory/stock.py (the agent ran the tool)")
    wait_recorded(rig, inventory, rig.session_id)

    # 5a. Codex started precedent mcp and offers its tools to the model.
    tools = (calls1[0].get("body") or {}).get("tools") or []
    namespace = next((t for t in tools if t.get("name") == "mcp__precedent"), {})
    names = [t.get("name") for t in namespace.get("tools") or []]
    check("search_memory" in names, "Codex connects to precedent mcp and offers its tools to the model",
          f"tools offered: {[t.get('name') for t in tools]}")

    # Sessions 2 and 3 start on a clean checkout (session 1's edit put
    # aside): SessionStart has nothing to go on, so whatever reaches the
    # model comes from the prompt.
    git(inventory, "stash", "-q")

    # 2. A related task: the first request carries session 1's fix, from
    # the prompt's hook.
    _, calls2, _ = rig.turn("related", "total_value in inventory/stock.py also raises KeyError: 'qty' "
                            "when an item has no qty. How should it be handled?", inventory)
    given = developer_context(calls2[0])
    prompt_hook = hook_answers(rig, "UserPromptSubmit")
    check(FIX in given and any(a.startswith("answered") for a in prompt_hook),
          "session 2's related prompt carries session 1's fix to the model (UserPromptSubmit)",
          f"context sent: {given[:1500]!r}\nhooks.log of session 2:\n{rig.hooks_since_turn()}")

    # 3. A prompt that names no task carries nothing from memory.
    entries3, _, _ = rig.turn("chat", "thanks, commit and push", inventory)
    prompt_hook = hook_answers(rig, "UserPromptSubmit")
    check(bool(prompt_hook) and not any(a.startswith("answered") for a in prompt_hook),
          "its UserPromptSubmit hook ran and answered nothing", f"hooks.log: {prompt_hook}")
    carried = carries_memory(entries3)
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
    _, calls5, _ = rig.turn("mcp", "Search precedent's memory for the total_value KeyError.", inventory)
    start_hook = hook_answers(rig, "SessionStart")
    check(FIX in developer_context(calls5[0]) and any(a.startswith("answered") for a in start_hook),
          "a session started on the edited checkout carries the fix (SessionStart)",
          f"hooks.log:\n{rig.hooks_since_turn()}")
    outputs = [item for e in calls5 for item in (e["body"].get("input") or [])
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    text = "\n".join(strings_of(outputs))
    # The tool's answer is JSON text: the fix appears with its quotes escaped.
    check(json.dumps(FIX)[1:-1] in text, "the model's precedent MCP search returns session 1's fix",
          f"tool outputs: {text[:1500]!r}")

    report_overhead(rig, inventory)


if __name__ == "__main__":
    main(__doc__, CodexRig, run_checks, "codex", "the codex binary (@openai/codex)")
