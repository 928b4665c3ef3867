"""nginx serving a benchmark world, with the interface of ``tests/support/server.py``'s ``IndexServer`` that
the benchmarks read (``url``, ``log``, ``bytes_sent``, ``latency``): for 0 ms figures, so the cost of
a Python server's own CPU on the shared cores is visible beside them.

The settings are the fair ones ``IndexServer`` has too: a listen backlog of 1024, HTTP/1.1 keep-alive
(up to 10,000 requests a connection), ``TCP_NODELAY``, and one worker process (a loopback server on a
2-core machine: a second would take the client's core). PEP 691: ``simple/<name>/index.json`` to a
client that asks for JSON, ``index.html`` otherwise (``tests/support/static_server.py``'s rules). nginx adds
no latency: ``latency`` must stay 0.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import TracebackType

from support.static_server import NGINX_RULES, _wait_for, free_port, nginx_available

LOG_FORMAT = "'$request_method $request_uri $status $body_bytes_sent'"


class NginxServer:
    """``with NginxServer(root, tmp) as srv: srv.url`` -> ``http://127.0.0.1:PORT/``."""

    def __init__(self, root: Path, tmp: Path) -> None:
        if not nginx_available():
            raise RuntimeError("nginx is not installed (apt-get install nginx-light)")
        self.root = Path(root)
        self.tmp = Path(tmp)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def latency(self) -> float:
        return 0.0

    @latency.setter
    def latency(self, value: float) -> None:
        if value:
            raise ValueError("nginx serves without added latency: use IndexServer for latency figures")

    @property
    def log(self) -> list[tuple[str, str, dict[str, str]]]:
        """The requests served so far, as ``IndexServer.log`` has them (no request headers)."""
        return [(method, path, {}) for method, path, _status, _sent in self._lines()]

    @property
    def bytes_sent(self) -> int:
        return sum(int(sent) for *_, sent in self._lines())

    def _lines(self) -> list[list[str]]:
        access = self.tmp / "access.log"
        text = access.read_text() if access.exists() else ""
        return [line.split(" ") for line in text.splitlines() if line.count(" ") == 3]

    def start(self) -> NginxServer:
        self.tmp.mkdir(parents=True, exist_ok=True)
        temps = "\n".join(f"    {k}_temp_path {self.tmp / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        rules = NGINX_RULES.replace("listen 127.0.0.1:%(port)d;", "listen 127.0.0.1:%(port)d backlog=1024;")
        (self.tmp / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {self.tmp / 'nginx.pid'};\nerror_log {self.tmp / 'error.log'};\n"
            "events { worker_connections 4096; }\n"
            f"http {{\n    log_format counted {LOG_FORMAT};\n    access_log {self.tmp / 'access.log'} counted;\n{temps}\n"
            "    keepalive_timeout 75s;\n    keepalive_requests 10000;\n    tcp_nodelay on;\n    sendfile on;\n"
            "    types { text/html html; application/json json; }\n    default_type application/octet-stream;\n"
            + rules % {"port": self.port, "root": str(self.root.resolve())}
            + "}\n"
        )
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([binary, "-p", str(self.tmp), "-c", str(self.tmp / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for(self.port, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> NginxServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
