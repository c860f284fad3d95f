"""Event streams: the SSE reader on CRLF and split input, and a stream a
proxy cuts at random byte offsets, resumed with Last-Event-ID."""

from __future__ import annotations

import io
import os
import time
import unittest

from stepwise import Client, RawEvent, StepwiseError, read_events

from .proxy import CuttingProxy
from .server import Server

server: Server
client: Client


def setUpModule() -> None:
    global server, client
    server = Server(agents=["looper.yaml", "approver.yaml"]).start()
    client = Client(server.url)


def tearDownModule() -> None:
    server.stop()


class EventsTest(unittest.TestCase):
    def test_read_events(self) -> None:
        raw = b'retry: 1000\r\n\r\n: heartbeat\r\nid: 1:0\r\nevent: a\ndata: x\ndata: y\n\nid: 2:0\ndata: {"z":1}\n\n'
        self.assertEqual(list(read_events(io.BytesIO(raw))),
                         [RawEvent("1:0", "a", "x\ny"), RawEvent("2:0", "message", '{"z":1}')])
        # An event the stream cut before its blank line is not dispatched.
        self.assertEqual(list(read_events(io.BytesIO(b"id: 3:0\ndata: {\"tor"))), [])

    def test_cut_stream_delivers_every_step_once(self) -> None:
        seed = int(os.environ.get("STEPWISE_SDK_SEED") or time.time_ns() % 100000)
        proxy = CuttingProxy(server.port, seed=seed)
        try:
            via = Client(proxy.url)
            run, inv = client.start_run("sdk-looper", "count")
            ids, seqs, finished = [], [], None
            for ev in via.subscribe(run_id=run.id, attempts=1000, min_delay=0.001, max_delay=0.01):
                ids.append(ev.id)
                if ev.type == "step_completed":
                    seqs.append(ev.step.sequence)
                if ev.type == "run_finished":
                    finished = ev
            self.assertIsNotNone(finished, f"seed {seed}")
            self.assertEqual(finished.run.status, "completed")
            self.assertEqual(seqs, [s.sequence for s in client.list_steps(inv.session_id)], f"seed {seed}")
            pos = [tuple(map(int, i.split(":"))) for i in ids]
            self.assertEqual(pos, sorted(set(pos)), f"seed {seed}: positions strictly increase")
            self.assertGreater(proxy.cuts, 3, f"seed {seed}")
        finally:
            proxy.close()

    def test_session_stream_resumes_after_the_given_id(self) -> None:
        run, inv = client.start_run("sdk-looper", "count again")
        first = list(client.subscribe(run_id=run.id))
        mid = next(e for e in first if e.type == "step_completed" and e.step.sequence == 10)
        seqs = []
        gen = client.subscribe(session_id=inv.session_id, after=mid.id)
        for ev in gen:
            if ev.type == "step_completed":
                seqs.append(ev.step.sequence)
                if ev.step.sequence == 20:
                    break
        gen.close()
        self.assertEqual(seqs, list(range(11, 21)))

    def test_bad_position_is_refused(self) -> None:
        run, inv = client.start_run("sdk-approver", "What is 6*7?")
        with self.assertRaises(StepwiseError) as cm:
            next(client.subscribe(session_id=inv.session_id, after="nonsense"))
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_position"))
        client.cancel_run(run.id)


if __name__ == "__main__":
    unittest.main()
