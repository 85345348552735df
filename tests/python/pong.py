"""A local HTTP server for HTTP tasks to call: every GET answers {"pong": <the path>}, and the
Authorization header each request carried is kept in `Pong.authorizations`."""

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Pong(BaseHTTPRequestHandler):
    authorizations = []

    def do_GET(self):
        Pong.authorizations.append(self.headers.get("Authorization"))
        body = json.dumps({"pong": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving():
    """The server, running on a free port: yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pong)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
