"""The worker pipe's framing and its adaptive poll-before-block (worker_main)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from harness.runtime import wire
from harness.runtime.wire import HEADER, SPIN_S, read_frame
from harness.runtime.wire import Pipe as _Pipe


def frame(tag: int, body: bytes) -> bytes:
    return HEADER.pack(len(body), tag) + body


def test_frames_split_and_joined_arrive_whole() -> None:
    r, w = os.pipe()
    pipe = _Pipe(r, w)
    try:
        os.write(w, frame(1, b"ab") + frame(2, b"cde"))
        assert read_frame(pipe, r, EOFError) == (1, b"ab")
        assert read_frame(pipe, r, EOFError) == (2, b"cde")
        big = os.urandom(300_000)
        t = threading.Thread(target=lambda: os.write(w, frame(3, big)))
        t.start()
        assert read_frame(pipe, r, EOFError) == (3, big)
        t.join()
    finally:
        os.close(r)
        os.close(w)


def test_a_long_wait_stops_the_polling_and_a_short_one_resumes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire, "spare_cpu", lambda: True)  # an idle machine
    r, w = os.pipe()
    pipe = _Pipe(r, w)
    try:
        assert pipe.spin
        # The answer comes well after the poll window: the pipe stops polling.
        timer = threading.Timer(SPIN_S * 20, lambda: os.write(w, frame(1, b"late")))
        timer.start()
        assert read_frame(pipe, r, EOFError) == (1, b"late")
        assert not pipe.spin
        # A long wait while not polling keeps it that way...
        timer = threading.Timer(SPIN_S * 20, lambda: os.write(w, frame(2, b"late")))
        timer.start()
        assert read_frame(pipe, r, EOFError) == (2, b"late")
        assert not pipe.spin
        # ...and an answer that is already there turns polling back on.
        os.write(w, frame(3, b"now"))
        time.sleep(0.001)
        assert read_frame(pipe, r, EOFError) == (3, b"now")
        assert pipe.spin
    finally:
        os.close(r)
        os.close(w)


def test_eof_is_reported() -> None:
    r, w = os.pipe()
    pipe = _Pipe(r, w)
    os.close(w)
    try:
        read_frame(pipe, r, EOFError)
    except EOFError:
        pass
    else:
        raise AssertionError("EOF not reported")
    finally:
        os.close(r)


def test_spare_cpu_follows_the_load_average_checked_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire, "_CPUS", 2)
    monkeypatch.setattr(wire._Spare, "checked", -wire.LOAD_CHECK_S)
    load = [0.3]
    monkeypatch.setattr(wire.os, "getloadavg", lambda: (load[0], 0.0, 0.0))
    assert wire.spare_cpu()
    load[0] = 1.9
    assert wire.spare_cpu()  # still the value checked less than a second ago
    monkeypatch.setattr(wire._Spare, "checked", -wire.LOAD_CHECK_S)
    assert not wire.spare_cpu()


def test_a_busy_machine_never_polls_before_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "spare_cpu", lambda: False)

    def spin(fd: int) -> bool:
        raise AssertionError("polled on a busy machine")

    monkeypatch.setattr(wire, "_spin_until_readable", spin)
    r, w = os.pipe()
    pipe = _Pipe(r, w)
    try:
        assert pipe.spin
        threading.Timer(SPIN_S * 5, lambda: os.write(w, frame(1, b"x"))).start()
        assert read_frame(pipe, r, EOFError) == (1, b"x")
    finally:
        os.close(r)
        os.close(w)
