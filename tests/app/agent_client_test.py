"""examples/agent_client.py's Client against a stdlib HTTP server that fails on purpose: what is sent again and what
is not. A span or an attempt's end (kept once by the store) is sent again after a 503 or a connection cut after the
server read it; a dequeue or a completion (each take acts) is not; and a kept-alive connection the server closed
while idle is seen before a request goes into it. Usage: agent_client_test.py SOURCE_DIR"""
import http.client
import http.server
import os
import sys
import threading
import time

os.environ.update(OPENAI_BASE_URL="http://127.0.0.1:1/v1", ARCLIGHT_STORE_URL="http://127.0.0.1:1", OPENAI_API_KEY="k")
sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
sys.dont_write_bytecode = True
import agent_client  # noqa: E402

taken = []  # the paths the server read, in order
plan = {}  # path -> what to do the next times it is read: "503", "cut" (close without an answer), then answer


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        taken.append(self.path)
        todo = plan.get(self.path, [])
        action = todo.pop(0) if todo else "ok"
        if action == "idle close":  # answered as kept alive, then closed (the server's idle timeout, say)
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        if action == "cut":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        body = b"[]" if action == "ok" else b'{"detail": "busy"}'
        self.send_response(200 if action == "ok" else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.handle_error = lambda request, address: None  # a cut connection's broken pipe is the point
threading.Thread(target=server.serve_forever, daemon=True).start()
client = agent_client.Client(f"http://127.0.0.1:{server.server_address[1]}")
failures = []


checks = 0


def expect(what, path, actions, sent, raises):
    global checks
    checks += 1
    taken.clear()
    plan[path] = list(actions)
    try:
        client.post(path, {})
        raised = False
    except Exception:
        raised = True
    if raised != raises or taken.count(path) != sent:
        failures.append(f"{what}: sent {taken.count(path)} times (want {sent}), raised {raised} (want {raises})")


expect("a span after a 503", "/v1/agl/spans", ["503"], sent=2, raises=False)
expect("a span after its connection was cut", "/v1/agl/spans", ["cut"], sent=2, raises=False)
expect("an attempt's end failing three times", "/v1/agl/rollouts/ro-1/attempts/at-1", ["503"] * 3, sent=3, raises=True)
expect("a dequeue after a 503", "/v1/agl/queues/rollouts/dequeue", ["503"], sent=1, raises=True)
expect("a dequeue whose connection was cut after it was read", "/v1/agl/queues/rollouts/dequeue", ["cut"], sent=1,
       raises=True)
expect("a completion whose connection was cut", "/rollout/ro-1/attempt/at-1/v1/completions", ["cut"], sent=1,
       raises=True)
# A kept-alive connection the server closed while idle: the dequeue goes out once, on a new connection.
expect("a span answered, its connection then closed", "/v1/agl/spans", ["idle close"], sent=1, raises=False)
time.sleep(0.3)  # idle: the server's close arrives
expect("a dequeue after the server closed the connection", "/v1/agl/queues/rollouts/dequeue", [], sent=1, raises=False)
server.shutdown()
for failure in failures:
    print("FAIL:", failure)
print(f"{checks - len(failures)} checks passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
