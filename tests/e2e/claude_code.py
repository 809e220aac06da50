#!/usr/bin/env python3
"""End to end: the real Claude Code CLI, wired to precedent by precedent's own
`hooks install` and by `claude mcp add`, against a scripted mock of the model's
Messages API on loopback (claude_code_mock.py, which logs every request body).

    python3 tests/e2e/claude_code.py --precedent target/debug/precedent --claude PATH/TO/claude

Checks, each from what really reached the model or the store:
  1. session 1's edit (in a throwaway git repository) is recorded at Stop;
  2. session 2's related prompt carries that fix in a request body;
  3. a prompt that names no task ("thanks, commit and push") carries nothing
     from memory;
  4. a session in another repository carries nothing from the first;
  5. `claude mcp list` shows precedent connected, and the model's MCP search
     call gets session 1's fix back.
Then prints the hooks' overhead per turn (hook timings from hooks.log, and
the wall time of turns with and without the hooks, alternated) as figures
only: nothing is asserted on time.

Exits 1, naming the failed check, on any failure. Python 3.11 standard library.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The heading precedent puts over the context it hands an agent (src/hooks/mod.rs).
HEADING = "Relevant past experience from precedent"
# Session 1's fix, as it appears in its Edit (and so in what it recorded).
FIX = 'item.get("price", 0)'

STOCK_PY = '''"""Stock levels and their value."""


def total_value(items):
    """The value of the stock: the sum of price times quantity."""
    total = 0
    for item in items:
        total += item["price"] * item["qty"]
    return total


def low_stock(items, threshold=5):
    return [item["sku"] for item in items if item["qty"] < threshold]
'''

WEATHER_PY = '''"""Reads a station's readings and averages them."""


def mean_temperature(readings):
    values = [r["celsius"] for r in readings if r.get("celsius") is not None]
    return sum(values) / len(values)
'''

failures = []


def check(ok, what, detail=""):
    print(("PASS  " if ok else "FAIL  ") + what + (f"\n      {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)
    return ok


GIT_IDENTITY = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
                "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid"}


def git(repo, *args):
    # Commits and stashes need an identity, which a fresh CI machine lacks.
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                   env=dict(os.environ, **GIT_IDENTITY))


def make_repo(path, files, subject):
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", subject)
    return path


def wait_for_line(log_path, pattern, proc, what, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = Path(log_path).read_text(errors="replace") if Path(log_path).exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start-up:\n{text}")
        time.sleep(0.1)
    sys.exit(f"{what} did not start within {seconds} s:\n{text}")


def strings_of(value):
    """Every string inside a JSON value, decoded (so quotes read as quotes)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


def body_text(entry):
    return "\n".join(strings_of(entry.get("body") or {}))


def hook_context(entry, event):
    """What a hook for `event` added to a request: Claude Code sends each hook's
    additionalContext as a text part "<event> hook additional context: ..."."""
    marker = f"{event} hook additional context:"
    return "\n".join(t[t.index(marker):] for t in strings_of(entry.get("body") or {}) if marker in t)


class Rig:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.home = work / "home"
        self.home.mkdir()
        self.data = work / "data"
        self.mock_log = work / "mock.jsonl"
        self.mock_log.touch()
        self.scenario_file = work / "scenario"
        self.procs = []

    # -- processes ---------------------------------------------------------
    def start_mock(self):
        out = self.work / "mock.out"
        env = dict(os.environ, MOCK_PORT="0", MOCK_LOG=str(self.mock_log),
                   MOCK_SCENARIO_FILE=str(self.scenario_file))
        with open(out, "w") as f:
            proc = subprocess.Popen([sys.executable, str(HERE / "claude_code_mock.py")], stdout=f,
                                    stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        m = wait_for_line(out, r"listening on (http://127\.0\.0\.1:\d+)", proc, "the mock")
        self.mock_url = m.group(1)

    def start_server(self):
        log = self.work / "server.log"
        with open(log, "w") as f:
            proc = subprocess.Popen([self.args.precedent, "serve", "--listen", "127.0.0.1:0",
                                     "--data-dir", str(self.data)], stdout=f, stderr=subprocess.STDOUT,
                                    env=dict(os.environ, NO_COLOR="1"))
        self.procs.append(proc)
        m = wait_for_line(log, r"listening on (http://[0-9.:]+)", proc, "precedent serve")
        self.server_url = m.group(1)

    def stop_all(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    # -- the agent ---------------------------------------------------------
    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANTHROPIC_", "CLAUDE_", "PRECEDENT_")) and k.lower() not in
               ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update({
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local/share"),
            "ANTHROPIC_BASE_URL": self.mock_url,
            "ANTHROPIC_API_KEY": "test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # Anything that is not loopback goes to the mock, which refuses it.
            "HTTPS_PROXY": self.mock_url,
            "HTTP_PROXY": self.mock_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "NO_COLOR": "1",
        })
        return env

    def run(self, argv, cwd, timeout=120):
        return subprocess.run(argv, cwd=cwd, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def turn(self, scenario, prompt, cwd, extra=()):
        """One `claude -p` turn; the mock's log entries of it and its wall time."""
        self.scenario_file.write_text(scenario)
        offset = self.mock_log.stat().st_size
        self.hooks_mark = len(self.hooks_log())
        started = time.monotonic()
        done = self.run([self.args.claude, "-p", prompt, "--output-format", "json",
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
        with open(self.mock_log) as f:
            f.seek(offset)
            entries = [json.loads(line) for line in f if line.strip()]
        main = [e for e in entries if str(e.get("reply_kind", "")).startswith("main")]
        if not main:
            sys.exit(f"claude -p ({scenario}) made no main model call; log: {entries!r:.2000}")
        return entries, main, wall

    def hooks_log(self):
        path = self.data / "hooks.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def hooks_since_turn(self):
        """hooks.log lines written since the last turn started."""
        return self.hooks_log()[self.hooks_mark:]

    def sessions(self, repo):
        done = self.run([self.args.precedent, "inspect", "--data-dir", str(self.data), "--json"], repo)
        if done.returncode != 0:
            return None, done.stderr
        return json.loads(done.stdout), done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precedent", required=True, help="the precedent binary")
    ap.add_argument("--claude", required=True, help="the claude binary (@anthropic-ai/claude-code)")
    ap.add_argument("--timing-turns", type=int, default=3,
                    help="turns timed with and without the hooks (figures only)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    args.precedent = str(Path(args.precedent).resolve())
    args.claude = shutil.which(args.claude) or args.claude

    work = Path(tempfile.mkdtemp(prefix="precedent-e2e-"))
    rig = Rig(args, work)
    started = time.monotonic()
    fatal = None
    try:
        run_checks(rig)
    except (SystemExit, Exception) as error:  # a step that could not go on
        fatal = error
    finally:
        rig.stop_all()
    print(f"\ne2e wall time: {time.monotonic() - started:.1f} s")
    if fatal is None and not failures:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print("all checks passed")
        return
    for name in ("server.log", "data/hooks.log"):
        path = work / name
        if path.exists():
            print(f"--- last lines of {path}:")
            print("\n".join(path.read_text(errors="replace").splitlines()[-30:]))
    print(f"work directory kept: {work}")
    if fatal is not None:
        print(f"e2e stopped: {fatal if isinstance(fatal, SystemExit) else f'{type(fatal).__name__}: {fatal}'}")
    if failures:
        print(f"{len(failures)} check(s) failed: " + "; ".join(failures))
    sys.exit(1)


def run_checks(rig):
    args = rig.args
    rig.start_mock()
    rig.start_server()
    version = rig.run([args.claude, "--version"], rig.work)
    print(f"claude: {version.stdout.strip()}  precedent: {args.precedent}")
    print(f"mock model API at {rig.mock_url}, precedent serve at {rig.server_url}")

    inventory = make_repo(rig.work / "inventory", {
        "inventory/__init__.py": "",
        "inventory/stock.py": STOCK_PY,
        "README.md": "# inventory\n\nStock keeping for a small shop.\n",
    }, "Initial import")
    weather = make_repo(rig.work / "weather", {
        "weather/readings.py": WEATHER_PY,
        "README.md": "# weather\n\nA station's readings.\n",
    }, "Initial import")

    # Wiring, as a user does it: precedent's own installer, and claude mcp add.
    done = rig.run([args.precedent, "hooks", "install", "--agent", "claude-code", "--data-dir",
                    str(rig.data), "--server", rig.server_url], inventory)
    if done.returncode != 0:
        sys.exit(f"precedent hooks install failed: {done.stdout}{done.stderr}")
    print(done.stdout.strip())
    done = rig.run([args.claude, "mcp", "add", "--scope", "user", "precedent", "--", args.precedent,
                    "mcp", "--data-dir", str(rig.data), "--server", rig.server_url], inventory)
    if done.returncode != 0:
        sys.exit(f"claude mcp add failed: {done.stdout}{done.stderr}")

    # 5a. The real client connects to precedent mcp.
    done = rig.run([args.claude, "mcp", "list"], inventory, timeout=90)
    line = next((l for l in done.stdout.splitlines() if l.startswith("precedent")), "")
    check("Connected" in line and "Failed" not in line, "claude mcp list shows precedent connected",
          f"exit {done.returncode}: {done.stdout}{done.stderr}")

    # 1. Session 1 fixes a bug; its Stop hook records it.
    _, main1, _ = rig.turn("fix", "total_value in inventory/stock.py raises KeyError: 'price' for "
                           "items that have no price. Fix it.", inventory)
    edited = FIX in (inventory / "inventory/stock.py").read_text()
    check(edited, "session 1's Edit changed inventory/stock.py (the agent ran the tool)")
    # The Stop hook hands the import to a background process, which logs
    # what it stored; the store then lists the session with the edited file.
    stop, deadline = None, time.monotonic() + 60
    while stop is None and time.monotonic() < deadline:
        stop = re.search(r" Stop imported ([1-9]\d*) message", rig.hooks_since_turn())
        time.sleep(0.2)
    recorded, raw = None, ""
    while recorded is None and time.monotonic() < deadline:
        listing, raw = rig.sessions(inventory)
        if listing and "stock.py" in raw:
            recorded = raw
        time.sleep(0.2)
    check(stop is not None, "session 1's Stop hook imported its messages",
          f"hooks.log of session 1:\n{rig.hooks_since_turn()}")
    check(recorded is not None, "session 1 is recorded in precedent (inspect lists it, with stock.py)",
          f"inspect: {raw!r:.1500}")

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
    carried = [e for e in entries3 if HEADING in body_text(e) or FIX in body_text(e)]
    prompt_hook = re.findall(r" UserPromptSubmit (.*)", rig.hooks_since_turn())
    check(bool(prompt_hook) and not any(l.startswith("answered") for l in prompt_hook),
          "its UserPromptSubmit hook ran and answered nothing", f"hooks.log: {prompt_hook}")
    check(not carried, "a prompt that names no task carries nothing from memory",
          f"{len(carried)} request(s) carried memory:\n{body_text(carried[0])[:3000] if carried else ''}")
    git(inventory, "stash", "pop", "-q")

    # 4. Another repository: the same symptom carries nothing from the first.
    entries4, _, _ = rig.turn("other", "total_value raises KeyError: 'price' for items without a "
                              "price. Fix it.", weather)
    carried = [e for e in entries4 if HEADING in body_text(e) or FIX in body_text(e)]
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


def hook_timings(log_text):
    """{event: [ms, ...]} from hooks.log lines `<time> <event> <what> (N ms)`.
    Stop and SessionEnd hand the import to a background process (the agent
    waits for the hand-off only); that process's own line is counted apart."""
    timings = {}
    for line in log_text.splitlines():
        m = re.match(r"\S+ (\S+) (.*)\((\d+) ms\)$", line)
        if not m:
            continue
        event, what, ms = m.group(1), m.group(2), int(m.group(3))
        if event in ("Stop", "SessionEnd") and not what.startswith("import handed"):
            event += " (background import)"
        timings.setdefault(event, []).append(ms)
    return timings


def report_overhead(rig, repo):
    args = rig.args
    print("\nhooks' overhead per turn (figures, not assertions):")
    for event, ms in sorted(hook_timings(rig.hooks_log()).items()):
        print(f"  {event:32} n={len(ms):2}  median {statistics.median(ms):5.0f} ms  max {max(ms):5} ms")
    if args.timing_turns <= 0:
        return
    # Turns with and without the hooks, alternated so that the machine's
    # drift falls on both alike.
    times = {True: [], False: []}
    hooks = ["hooks", "--agent", "claude-code", "--data-dir", str(rig.data)]
    for _ in range(args.timing_turns):
        for wired in (True, False):
            done = rig.run([args.precedent, *hooks[:1], "install" if wired else "uninstall", *hooks[1:],
                            *(("--server", rig.server_url) if wired else ())], repo)
            if done.returncode != 0:
                print(f"  (hooks {'install' if wired else 'uninstall'} failed, no comparison: "
                      f"{done.stdout}{done.stderr})")
                return
            times[wired].append(rig.turn("timing", "Read inventory/stock.py.", repo)[2])
    a, b = statistics.median(times[True]), statistics.median(times[False])
    fmt = lambda ts: ", ".join(f"{t:.2f}" for t in ts)
    print(f"  `claude -p` turn wall time, {args.timing_turns} each, alternated: with hooks median "
          f"{a:.2f} s ({fmt(times[True])}), without {b:.2f} s ({fmt(times[False])}); "
          f"difference {1000 * (a - b):+.0f} ms")


if __name__ == "__main__":
    main()
