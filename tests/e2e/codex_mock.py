#!/usr/bin/env python3
"""A scripted mock of the OpenAI Responses API as the Codex CLI calls it,
loopback only: `POST /v1/responses` with `"stream": true`, answered with the
SSE events Codex reads (response.created, response.output_item.done,
response.completed).

The counterpart of claude_code_mock.py (same environment, same log format):
every request is appended as one JSON line to $MOCK_LOG, tagged with the
scenario read from $MOCK_SCENARIO_FILE on each request; MOCK_PORT=0 (the
default) takes a free port, printed on stdout. The replies are stateless:
the mock counts the tool calls already in the request's `input` and plays
the scenario's next step. Python 3.11 standard library only.
"""
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ["MOCK_LOG"]
SCEN_FILE = os.environ["MOCK_SCENARIO_FILE"]
PORT = int(os.environ.get("MOCK_PORT", "0"))
lock = threading.Lock()

# Session 1's fix, through the apply_patch command Codex intercepts in a shell call.
FIX_PATCH = """apply_patch <<'PATCH'
*** Begin Patch
*** Update File: inventory/stock.py
@@
-        total += item["price"] * item["qty"]
+        total += item.get("price", 0) * item["qty"]
*** End Patch
PATCH
"""


def scenario():
    try:
        with open(SCEN_FILE) as f:
            return f.read().strip() or "default"
    except FileNotFoundError:
        return "default"


def log(entry):
    with lock:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def shell(cmd):
    return {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": cmd})}


def message(text):
    return {"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def plan(scen):
    """The scenario's steps: output items, one per model call."""
    if scen.startswith("fix"):
        return [shell(FIX_PATCH),
                message("Fixed total_value in inventory/stock.py: items without a price now count as 0 "
                        "(item.get(\"price\", 0)) instead of raising KeyError 'price'.")]
    if scen.startswith("related"):
        return [message("Noted: total_value needs the same treatment for qty.")]
    if scen.startswith("chat"):
        return [message("Nothing to do from here: no remote is configured.")]
    if scen.startswith("other"):
        return [shell("cat README.md"), message("Read the README; nothing to change.")]
    if scen.startswith("mcp"):
        # An MCP tool is offered inside a namespace tool (mcp__<server>) and
        # called by its own name with the namespace beside it.
        return [{"type": "function_call", "name": "search_memory", "namespace": "mcp__precedent",
                 "arguments": json.dumps({"query": "total_value KeyError price"})},
                message("MOCK: the memory search came back (see function_call_output).")]
    if scen.startswith("timing"):
        return [shell("cat inventory/stock.py"), message("Read the file; nothing to change.")]
    return [message("MOCK: hello from the mock.")]


def next_item(body, scen):
    calls = sum(1 for item in body.get("input", []) or []
                if isinstance(item, dict) and item.get("type") in ("function_call", "custom_tool_call"))
    steps = plan(scen)
    i = min(calls, len(steps) - 1)
    item = dict(steps[i])
    if item["type"] == "function_call":
        item["call_id"] = "call_" + uuid.uuid4().hex[:24]
        item["status"] = "completed"
    else:
        item["id"] = "msg_" + uuid.uuid4().hex[:24]
    return item, f"main:{i}"


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _hdrs(self):
        keep = ("user-agent", "originator", "content-type", "session-id", "openai-beta")
        return {k: v for k, v in self.headers.items() if k.lower() in keep}

    def _send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_CONNECT(self):  # any proxied (non-loopback) attempt lands here
        log({"t": time.time(), "scenario": scenario(), "method": "CONNECT", "path": self.path})
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()

    def do_GET(self):
        log({"t": time.time(), "scenario": scenario(), "method": "GET", "path": self.path,
             "headers": self._hdrs()})
        if self.path.split("?")[0].endswith("/models"):
            return self._send_json(200, {"object": "list", "data": [], "models": []})
        self._send_json(404, {"error": {"message": "mock: no such path", "type": "not_found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
        except Exception:
            body = {"_raw": raw[:4000].decode("utf-8", "replace")}
        scen = scenario()
        entry = {"t": time.time(), "scenario": scen, "method": "POST", "path": self.path,
                 "headers": self._hdrs(), "body": body}
        if not self.path.split("?")[0].endswith("/responses"):
            log(entry)
            return self._send_json(404, {"error": {"message": "mock: no such path", "type": "not_found"}})
        item, kind = next_item(body, scen)
        entry["reply_kind"] = kind
        entry["reply"] = item
        log(entry)
        rid = "resp_" + uuid.uuid4().hex[:24]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def ev(obj):
            self.wfile.write(f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        ev({"type": "response.created", "response": {"id": rid}})
        ev({"type": "response.output_item.done", "output_index": 0, "item": item})
        ev({"type": "response.completed", "response": {"id": rid, "usage": {
            "input_tokens": 100, "input_tokens_details": None, "output_tokens": 20,
            "output_tokens_details": None, "total_tokens": 120}}})
        self.close_connection = True


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    print(f"mock listening on http://127.0.0.1:{srv.server_address[1]}, log {LOG}", flush=True)
    srv.serve_forever()
