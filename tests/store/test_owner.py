"""One writer per store (`store.owner`): claims inside a process share the lock, the last
release drops it, and a finalizer never waits for the guard a claim on its own thread
holds (the garbage collector may run it there)."""

from __future__ import annotations

import fcntl
import gc
import os
import threading
from pathlib import Path

from demarkus.service import Service
from demarkus.store import owner


def lockable(root: Path) -> bool:
    """Whether another open file description could take the store's lock now, as another
    process would."""
    fd = os.open(root / owner.LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_claims_in_one_process_share_the_lock_and_the_last_release_drops_it(tmp_path: Path):
    first, second = owner.claim(tmp_path), owner.claim(tmp_path)
    assert not lockable(tmp_path)
    first.release()
    first.release()  # once only
    assert not lockable(tmp_path)
    second.release()
    assert lockable(tmp_path)


def test_a_finalizer_run_while_this_thread_holds_the_guard_returns_and_releases_after(tmp_path: Path):
    first, second = owner.claim(tmp_path), owner.claim(tmp_path)
    first.release()
    done = threading.Event()

    def in_claim() -> None:
        with owner._guarded():  # as inside `claim`, where the garbage collector may run it
            second.collected()  # waiting for the guard here would never end
            assert not lockable(tmp_path)
        done.set()

    worker = threading.Thread(target=in_claim, daemon=True)
    worker.start()
    worker.join(5)
    assert done.is_set(), "a finalizer waited for the guard its own thread holds"
    assert lockable(tmp_path)  # released as the guard was let go


def test_a_service_dropped_without_close_gives_its_claim_back_and_close_gives_it_at_once(tmp_path: Path):
    service = Service.open(tmp_path)
    assert not lockable(tmp_path)
    del service
    gc.collect()
    assert lockable(tmp_path)
    service = Service.open(tmp_path)
    service.close()
    assert lockable(tmp_path)
