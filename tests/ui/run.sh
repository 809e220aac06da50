#!/usr/bin/env bash
# Checks the /ui inspection page in headless Chromium against a real server:
#   tests/ui/run.sh BINARY [SCREENSHOT_OUT]
# Starts BINARY on a free loopback port with a fresh data directory and an
# API key, loads the fixture sessions under user "fixtures", then runs
# check.mjs. Needs node (20+), python3, Chromium ($CHROMIUM, default
# /usr/bin/chromium) and `npm ci` done in tests/ui.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BINARY [SCREENSHOT_OUT]" >&2
    exit 2
fi
binary=$(realpath "$1")
screenshot=""
if [ $# -eq 2 ]; then
    screenshot=$(realpath -m "$2")
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

[ -x "$binary" ] || { echo "not an executable: $binary" >&2; exit 1; }
[ -d "$here/node_modules/playwright-core" ] || {
    echo "playwright-core is missing: run 'npm ci' in $here" >&2
    exit 1
}

workdir=$(mktemp -d /tmp/ui-check.XXXXXX)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT

key="ui-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
log="$workdir/server.log"
# Created before the server starts, so that reading it never races the
# server's own redirection.
: >"$log"
env -u PRECEDENT_API_KEY -u PRECEDENT_API_KEY_FILE \
    "$binary" serve --listen 127.0.0.1:0 --data-dir "$workdir/data" --api-key "$key" 2>"$log" &
server_pid=$!
url=""
for _ in $(seq 1 300); do
    url=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "server exited at start-up" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { cat "$log" >&2; echo "server did not start" >&2; exit 1; }
echo "server at $url"

# Loads every fixture as one Add; prints the session ids, one a line.
python3 - "$url" "$key" "$root/fixtures/sessions" >"$workdir/sessions.txt" <<'PY'
import glob, json, os, sys, urllib.error, urllib.request

url, key, folder = sys.argv[1:4]
files = sorted(glob.glob(os.path.join(folder, "*.json")))
if not files:
    sys.exit(f"no fixtures in {folder}")
for number, path in enumerate(files):
    with open(path, encoding="utf-8") as handle:
        fixture = json.load(handle)
    # Fixtures from outside the benchmark have no session id: the file's
    # name stands for it.
    session_id = fixture["source"].get("session_id") or os.path.splitext(os.path.basename(path))[0]
    body = {
        "user_id": "fixtures",
        "session_id": session_id,
        "request_id": f"ui-{number + 1:02d}",
        "messages": fixture["messages"],
    }
    request = urllib.request.Request(
        url + "/v1/add",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
    except urllib.error.HTTPError as error:
        sys.exit(f"add of {path} failed: HTTP {error.code}: {error.read().decode(errors='replace')}")
    print(session_id)
PY
echo "loaded $(wc -l <"$workdir/sessions.txt") fixture sessions"

query_fixture="$root/fixtures/sessions/resolution-rust-ripgrep-954.json"
UI_API_KEY="$key" \
UI_USER=fixtures \
UI_SESSIONS_FILE="$workdir/sessions.txt" \
UI_QUERY_FIXTURE="$query_fixture" \
UI_SCREENSHOT="$screenshot" \
    node "$here/check.mjs" "$url"
