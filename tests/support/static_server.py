"""Serve a directory with a real static web server for tests: nginx (when installed) or the
standard library's ``http.server``. Both listen on 127.0.0.1 and a free port.

nginx runs as the current user (``master_process off``, ``daemon off``, everything under a temp
prefix) and serves ``simple/<name>/index.json`` as ``application/vnd.pypi.simple.v1+json`` to a
client that asks for it in ``Accept`` (PEP 691), ``index.html`` otherwise: the rule the README's
fleet recipe shows.
"""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

NGINX_RULES = r"""
    map $http_accept $simple_index {
        default index.html;
        "~application/vnd\.pypi\.simple\.v1\+json" index.json;
    }
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
        location /simple/ {
            index $simple_index;
            add_header Vary Accept;
            location ~ /index\.json$ {
                default_type application/vnd.pypi.simple.v1+json;
                types { }
                add_header Vary Accept;
            }
        }
    }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_available() -> bool:
    return shutil.which("nginx") is not None or Path("/usr/sbin/nginx").exists()


@contextmanager
def nginx(root: Path, tmp: Path) -> Iterator[str]:
    """``root`` served by nginx; yields the base URL (``http://127.0.0.1:PORT/``)."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    temps = "\n".join(f"    {k}_temp_path {tmp / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
        "events { worker_connections 64; }\n"
        f"http {{\n    access_log {tmp / 'access.log'};\n{temps}\n"
        "    types { text/html html; application/json json; }\n    default_type application/octet-stream;\n"
        + NGINX_RULES % {"port": port, "root": str(root.resolve())}
        + "}\n"
    )
    proc = subprocess.Popen([binary, "-p", str(tmp), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(port, proc)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt: str, *args: object) -> None:
        pass


@contextmanager
def stdlib_server(root: Path) -> Iterator[str]:
    """``root`` served by ``http.server`` (HTML pages only: it knows nothing of PEP 691)."""
    handler = partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _wait_for(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited ({proc.returncode}): {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start listening")
