"""A TCP proxy that cuts every connection after a random number of bytes
from the server, so that streams break at arbitrary points."""

from __future__ import annotations

import random
import socket
import threading


class CuttingProxy:
    def __init__(self, target_port: int, min_bytes: int = 200, max_bytes: int = 6000, seed: int = 1) -> None:
        self.target_port = target_port
        self.rand = random.Random(seed)
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.connections = 0
        self.cuts = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = False
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.connections += 1
                budget = self.rand.randint(self.min_bytes, self.max_bytes)
                self.open.update((down, up))
            threading.Thread(target=self._pipe, args=(down, up, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, down, budget), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, budget) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if budget is not None and len(b) >= budget:
                    dst.sendall(b[:budget])
                    with self.lock:
                        self.cuts += 1
                    break
                if budget is not None:
                    budget -= len(b)
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
