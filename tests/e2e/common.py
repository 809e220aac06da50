"""What the end-to-end tests of the real agents share: the throwaway
repositories, a real `precedent serve`, the mock of the model's API, the
checks' bookkeeping and the hooks' overhead figures. Python 3.11 standard
library only."""
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


class Rig:
    """One agent's test bench; a subclass names its mock (MOCK) and runs its
    turns (env, turn, agent_env)."""

    MOCK = None
    AGENT = None  # precedent hooks install --agent

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
            proc = subprocess.Popen([sys.executable, str(HERE / self.MOCK)], stdout=f,
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

    def env(self):
        """The agent's environment: a throwaway HOME, nothing of the caller's
        agent or precedent settings, anything not on loopback sent to the
        mock (which refuses it)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "PRECEDENT_"))
               and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update({
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local/share"),
            "HTTPS_PROXY": self.mock_url,
            "HTTP_PROXY": self.mock_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "NO_COLOR": "1",
        })
        env.update(self.agent_env())
        return env

    def run(self, argv, cwd, timeout=120):
        return subprocess.run(argv, cwd=cwd, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def mock_entries_since(self, offset):
        with open(self.mock_log) as f:
            f.seek(offset)
            return [json.loads(line) for line in f if line.strip()]

    def begin_turn(self, scenario):
        """Sets the mock's scenario; the mock log's offset."""
        self.scenario_file.write_text(scenario)
        self.hooks_mark = len(self.hooks_log())
        return self.mock_log.stat().st_size

    def setup(self, repo):
        """precedent setup: the hooks and the MCP server, through the server."""
        return self.run([self.args.precedent, "setup", "--agent", self.AGENT, "--data-dir", str(self.data),
                         "--server", self.server_url], repo)

    def hooks(self, wired, repo):
        """precedent hooks install (through the server) or uninstall."""
        argv = [self.args.precedent, "hooks", "install" if wired else "uninstall", "--agent", self.AGENT,
                "--data-dir", str(self.data)]
        if wired:
            argv += ["--server", self.server_url]
        return self.run(argv, repo)

    def hooks_log(self):
        path = self.data / "hooks.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def settle(self, seconds=15):
        """Waits for the background imports the hooks handed off to log
        their outcome, so that none meets a stopped server."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            text = self.hooks_log()
            handed = len(re.findall(r" (?:Stop|SessionEnd) import handed to process", text))
            done = len(re.findall(r" (?:Stop|SessionEnd) (?!import handed)", text))
            if done >= handed:
                return
            time.sleep(0.2)

    def hooks_since_turn(self):
        """hooks.log lines written since the last turn started."""
        return self.hooks_log()[self.hooks_mark:]

    def sessions(self, repo):
        done = self.run([self.args.precedent, "inspect", "--data-dir", str(self.data), "--json"], repo)
        if done.returncode != 0:
            return None, done.stderr
        return json.loads(done.stdout), done.stdout


def make_repos(work):
    """The two throwaway repositories: the one the sessions work in, and
    another one."""
    inventory = make_repo(work / "inventory", {
        "inventory/__init__.py": "",
        "inventory/stock.py": STOCK_PY,
        "README.md": "# inventory\n\nStock keeping for a small shop.\n",
    }, "Initial import")
    weather = make_repo(work / "weather", {
        "weather/readings.py": WEATHER_PY,
        "README.md": "# weather\n\nA station's readings.\n",
    }, "Initial import")
    return inventory, weather


def wait_recorded(rig, repo, session_id, event="Stop"):
    """Waits for the background imports of the last turn to store messages
    and for the store to list that session (`session_id`, as the agent named
    it) with inventory/stock.py changed; checks both. `event`'s import may
    find the turn stored already by SessionEnd's, which `claude -p` sends
    right after Stop (Stop's import waits for the turn's last reply to reach
    the transcript): either hook's import counts."""
    deadline = time.monotonic() + 60
    stop = None
    while stop is None and time.monotonic() < deadline:
        stop = re.search(rf" (?:{event}|SessionEnd) imported ([1-9]\d*) message", rig.hooks_since_turn())
        time.sleep(0.2)
    recorded, raw = None, ""
    deadline = time.monotonic() + 30
    while recorded is None and time.monotonic() < deadline:
        listing, raw = rig.sessions(repo)
        for session in (listing or {}).get("data", []):
            if (session.get("session_id", "").endswith(":" + session_id)
                    and any(f.endswith("inventory/stock.py") for f in session.get("files_changed", []))):
                recorded = session
        time.sleep(0.2)
    check(stop is not None, f"session 1's {event} (or SessionEnd) hook imported its messages",
          f"hooks.log of session 1:\n{rig.hooks_since_turn()}")
    check(recorded is not None,
          "session 1 is recorded in precedent with its change to inventory/stock.py",
          f"session {session_id}; inspect: {raw!r:.1500}")


def carries_memory(entries):
    """The requests whose body holds precedent's heading or session 1's fix."""
    return [e for e in entries if HEADING in body_text(e) or FIX in body_text(e)]


def main(doc, rig_class, run_checks, agent_flag, agent_help):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--precedent", required=True, help="the precedent binary")
    ap.add_argument(f"--{agent_flag}", dest="agent", required=True, help=agent_help)
    ap.add_argument("--timing-turns", type=int, default=3,
                    help="turns timed with and without the hooks (figures only)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    args.precedent = str(Path(args.precedent).resolve())
    args.agent = shutil.which(args.agent) or args.agent

    work = Path(tempfile.mkdtemp(prefix="precedent-e2e-"))
    rig = rig_class(args, work)
    started = time.monotonic()
    fatal = None
    try:
        run_checks(rig)
    except (SystemExit, Exception) as error:  # a step that could not go on
        fatal = error
    finally:
        rig.settle()
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
    entries = rig.mock_entries_since(0)
    leaving = [e["path"] for e in entries if e.get("method") == "CONNECT"]
    print(f"\nmodel API calls answered by the mock: {sum(1 for e in entries if 'reply_kind' in e)}; "
          f"connections that tried to leave loopback (refused by the mock): {len(leaving)} "
          f"{sorted(set(leaving))}")
    print("\nhooks' overhead per turn (figures, not assertions):")
    for event, ms in sorted(hook_timings(rig.hooks_log()).items()):
        print(f"  {event:32} n={len(ms):2}  median {statistics.median(ms):5.0f} ms  max {max(ms):5} ms")
    if args.timing_turns <= 0:
        return
    # Turns with and without the hooks, alternated so that the machine's
    # drift falls on both alike.
    times = {True: [], False: []}
    for _ in range(args.timing_turns):
        for wired in (True, False):
            done = rig.hooks(wired, repo)
            if done.returncode != 0:
                print(f"  (hooks {'install' if wired else 'uninstall'} failed, no comparison: "
                      f"{done.stdout}{done.stderr})")
                return
            times[wired].append(rig.turn("timing", "Read inventory/stock.py.", repo)[2])
    a, b = statistics.median(times[True]), statistics.median(times[False])
    fmt = lambda ts: ", ".join(f"{t:.2f}" for t in ts)
    print(f"  {rig.AGENT} turn wall time, {args.timing_turns} each, alternated: with hooks median "
          f"{a:.2f} s ({fmt(times[True])}), without {b:.2f} s ({fmt(times[False])}); "
          f"difference {1000 * (a - b):+.0f} ms")
