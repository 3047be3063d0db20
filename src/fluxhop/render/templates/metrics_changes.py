"""The version of the queue that moves with the job manager's journal, and
the long poll that waits for it to move (metrics.py's ``/metrics.json?after=``)."""

# ruff: noqa: UP035, UP045 - Python 3.6 has no dict[...] or X | None in hints

import contextlib
import select
import socket
import sys
import threading
import time
from typing import Any, Callable, Optional

import flux.constants  # type: ignore[import-not-found,unused-ignore]  # binds flux: flux.Flux

LISTED_TIMEOUT = 2.0  # seconds the journal's follower waits for job-list to list a job
MAX_WAITERS = 64  # long polls held at once (one per operator replica and autoscaler is the use)
WAIT_SLICE = 1.0  # seconds a long poll waits between looks at whether its client is still there
LONGEST_WAIT = 300.0  # seconds a long poll is held at most


class Changes:
    """A version of the queue that moves on each job event that can change
    what an autoscaler decides (the job manager's journal): a job waiting
    for resources, a job's resources freed, a job's urgency. A reader waits
    for it to move (``GET /metrics.json?after=VERSION&wait=SECONDS``) rather
    than asking again and again. A job that starts waiting moves it only once
    job-list, where the numbers come from, lists it as pending."""

    EVENTS = ("priority", "free", "urgency")

    def __init__(self) -> None:
        self.boot = f"{int(time.time() * 1000):x}"  # a restarted exporter: a new version
        self.count = 0
        self.following = False
        self.changed = threading.Condition()
        self.waiters = threading.BoundedSemaphore(MAX_WAITERS)

    @property
    def version(self) -> str:
        return f"{self.boot}-{self.count}"

    def ensure(self) -> None:
        """Follow the journal, if not yet: at a reader's request, since the
        exporter starts before the broker it reads (a failed start is tried
        again at the next request). Call with ``changed`` held."""
        if self.following:
            return
        try:
            from flux.job import JournalConsumer  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # a flux-core older than its journal: readers poll instead
            return
        try:
            handle = flux.Flux()
            consumer = JournalConsumer(handle, full=False).start()
        except Exception:  # the broker is not up yet: a later request tries again
            return
        self.following = True
        self.count += 1  # what happened while not following is not known: a new version
        threading.Thread(target=self._follow, args=(handle, consumer), daemon=True).start()

    def _follow(self, handle: Any, consumer: Any) -> None:
        try:
            while True:
                event = consumer.poll(timeout=-1.0)
                if event is None:
                    break
                if event.name not in self.EVENTS:
                    continue
                if event.name == "priority":  # now SCHED: once job-list has it so
                    _listed(handle, event.jobid)
                with self.changed:
                    self.count += 1
                    self.changed.notify_all()
        except Exception as error:  # say it; the next reader starts following again
            sys.stderr.write(f"following the job journal failed: {error}\n")
        with self.changed:
            self.following = False
            self.changed.notify_all()

    def wait(
        self, after: Optional[str], seconds: float, gone: Callable[[], bool] = lambda: False
    ) -> Optional[str]:
        """The version once it is not ``after`` (or ``seconds`` have passed);
        None where the journal cannot be followed (then at once). With
        MAX_WAITERS already waiting it answers at once; it stops waiting
        (and answers GONE) once ``gone()`` says the client has left."""
        seconds = max(0.0, min(seconds, LONGEST_WAIT))
        held = seconds > 0 and self.waiters.acquire(blocking=False)
        deadline = time.monotonic() + (seconds if held else 0.0)
        try:
            with self.changed:
                self.ensure()
                while self.following and after == self.version:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.changed.wait(min(left, WAIT_SLICE))
                    if gone():
                        return GONE
                return self.version if self.following else None
        finally:
            if held:
                self.waiters.release()


GONE = "\0gone"  # Changes.wait's answer for a client that left while it waited


def client_gone(connection: socket.socket) -> bool:
    """Whether the client has closed its end (readable, with nothing to read)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _listed(handle: Any, jobid: int) -> None:
    """Wait until job-list sees ``jobid`` pending or past it (job-list wakes
    a waiter on a state in its mask: a job that goes on to RUN within one of
    its updates never shows SCHED, so every later state is in the mask too)."""
    states = flux.constants
    mask = (
        states.FLUX_JOB_STATE_SCHED
        | states.FLUX_JOB_STATE_RUN
        | states.FLUX_JOB_STATE_CLEANUP
        | states.FLUX_JOB_STATE_INACTIVE
    )
    payload = {"id": int(jobid), "attrs": ["state"], "state": mask}
    with contextlib.suppress(OSError):  # gone, or slow: the next change or look has it
        handle.rpc("job-list.list-id", payload).wait_for(LISTED_TIMEOUT).get()
