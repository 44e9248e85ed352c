"""Where a :class:`~skdp.BudgetAccountant` keeps its entries.

An accountant is a handle; its entries live in a *store*. Two stores exist:

* :class:`MemoryStore` — a list in this process (the default);
* :class:`FileStore` — an append-only file on this machine, locked with the
  operating system's advisory file locks, so that every process that opens it
  (joblib's worker processes, ``multiprocessing`` children, a second Python
  session) charges one ledger and sees the same total.

An accountant starts with a memory store and moves to a file store the first
time it is pickled (that is how joblib sends it to a worker process), so a fit
in another process on this machine reattaches to the user's ledger and the
budget refuses across processes exactly as in one.

Besides the entries a store keeps the ledger's *peak*: the largest total
epsilon reported for it so far, by any process. The accountant reports the
larger of the peak and the current composition, so a total never goes down
(see :class:`~skdp.BudgetAccountant`).

Every store offers the same five operations, which are all an accountant
needs: ``snapshot()`` (the entries, in order), ``read()`` (the entries and the
peak, read together), ``append_if(entry, accept)`` (atomically: call
``accept(entries + [entry], peak)``, which returns None to refuse or a total to
raise the peak to, and append ``entry`` unless refused), ``replace(key, event)``
(settle a reservation by the event actually released) and
``raise_peak(value)``. A store for several machines (for example one kept by a
dask scheduler) would implement these operations on a shared service; nothing
else in skdp would change.
"""

import os
import pickle
import struct
import tempfile
import threading
import weakref
from dataclasses import dataclass, replace

__all__ = ["Entry", "MemoryStore", "FileStore", "UnreachableStoreError"]


class UnreachableStoreError(OSError):
    """The file of a shared ledger no longer exists (the process that owned it has ended)."""


@dataclass(frozen=True)
class Entry:
    """One charge on a ledger.

    Attributes
    ----------
    key : str
        Unique identifier (a reservation is settled by key, possibly from another process).
    event : PrivacyEvent
        What was (or is reserved to be) released.
    delta : float
        The delta at which the caller stated the event's guarantee.

    A ledger holds events only: never data, and never the seeds of the noise
    (from which the noise of a published model could be rebuilt).
    """

    key: str
    event: object
    delta: float


class MemoryStore:
    """Entries (and the peak) in this process, guarded by a lock."""

    shared = False

    def __init__(self, entries=(), peak=0.0):
        self._entries = list(entries)
        self._peak = float(peak)
        self._lock = threading.RLock()

    def snapshot(self):
        with self._lock:
            return list(self._entries)

    def read(self):
        with self._lock:
            return list(self._entries), self._peak

    def append_if(self, entry, accept):
        with self._lock:
            total = accept(self._entries + [entry], self._peak)
            if total is None:
                return False
            self._entries.append(entry)
            self._peak = max(self._peak, float(total))
            return True

    def raise_peak(self, value):
        with self._lock:
            self._peak = max(self._peak, float(value))

    def replace(self, key, event):
        with self._lock:
            for i, entry in enumerate(self._entries):
                if entry.key == key:
                    self._entries[i] = replace(entry, event=event)
                    return
        raise KeyError(key)


_HEADER = struct.Struct("<Q")


class FileStore:
    """Entries in an append-only file, shared by every process on this machine that opens it.

    Records are length-prefixed pickles of ``("add", Entry, peak)``,
    ``("set", key, event)`` or ``("peak", value)``. Every operation takes an exclusive lock on the file
    (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) and a lock of this
    process (file locks do not exclude threads that share a descriptor), reads
    the records appended since its last visit, and appends its own.

    The file holds privacy events only (sensitivities, noise scales), never data.
    """

    shared = True

    def __init__(self, path, owner=False):
        self.path = os.fspath(path)
        self._entries = []
        self._peak = 0.0
        self._offset = 0
        self._lock = threading.RLock()
        self._pid = os.getpid()
        if owner:
            # The process that created the file removes it when the accountant is
            # collected or the interpreter exits; a forked child inherits the
            # finalizer but must not remove its parent's ledger.
            weakref.finalize(self, _remove_if_owner, self.path, os.getpid())

    @classmethod
    def create(cls, entries=(), peak=0.0):
        """A new store in a private temporary folder, holding ``entries`` and ``peak``."""
        folder = tempfile.mkdtemp(prefix="skdp-ledger-")  # mode 0700
        path = os.path.join(folder, "ledger.bin")
        with open(path, "xb") as fh:
            for entry in entries:
                fh.write(_record(("add", entry)))
            fh.write(_record(("peak", float(peak))))
        store = cls(path, owner=True)
        store._folder = folder
        return store

    def reachable(self):
        return os.path.exists(self.path)

    def cached(self):
        """The entries and the peak read so far (what this process knew when the file was last reachable)."""
        return list(self._entries), self._peak

    # -- locking and reading ------------------------------------------------------------------
    def _open(self):
        try:
            return open(self.path, "r+b")
        except FileNotFoundError:
            raise UnreachableStoreError(
                f"The shared ledger file {self.path!r} no longer exists: the process that owned "
                "this accountant has ended.") from None

    def _locked(self, fn):
        if self._pid != os.getpid():  # a forked child: fresh thread lock, same file
            self._lock = threading.RLock()
            self._pid = os.getpid()
        with self._lock:
            with self._open() as fh:
                _lock_file(fh)
                try:
                    if self._read_new(fh):
                        # A writer died in the middle of a record: its torn tail is cut off
                        # (under the lock nobody else is writing), so that the records
                        # appended next are read by every process.
                        fh.truncate(self._offset)
                    return fn(fh)
                finally:
                    _unlock_file(fh)

    def _read_new(self, fh):
        """Apply the records appended since the last visit; True when a torn tail follows them."""
        fh.seek(self._offset)
        data = fh.read()
        pos = 0
        while pos + _HEADER.size <= len(data):
            (length,) = _HEADER.unpack_from(data, pos)
            end = pos + _HEADER.size + length
            if end > len(data):
                break  # the record of a writer that died mid-write
            try:
                record = pickle.loads(data[pos + _HEADER.size:end])
            except Exception:  # noqa: BLE001 - a torn header that happens to fit: stop here
                break
            self._apply(record)
            pos = end
        self._offset += pos
        return pos < len(data)

    def _apply(self, record):
        if record[0] == "add":
            self._entries.append(record[1])
            if len(record) > 2:
                self._peak = max(self._peak, record[2])
        elif record[0] == "peak":
            self._peak = max(self._peak, record[1])
        else:
            _, key, event = record
            for i, entry in enumerate(self._entries):
                if entry.key == key:
                    self._entries[i] = replace(entry, event=event)
                    break

    def _write(self, fh, record):
        blob = _record(record)
        fh.seek(self._offset)
        try:
            fh.write(blob)
            fh.flush()  # visible to other processes through the page cache; durability is not needed
        except BaseException:
            fh.truncate(self._offset)  # never leave a torn record behind
            raise
        # This process has already applied the record; skip it on the next read.
        self._offset = fh.tell()

    # -- the store interface --------------------------------------------------------------------
    def snapshot(self):
        return self._locked(lambda fh: list(self._entries))

    def read(self):
        return self._locked(lambda fh: (list(self._entries), self._peak))

    def append_if(self, entry, accept):
        def op(fh):
            total = accept(self._entries + [entry], self._peak)
            if total is None:
                return False
            peak = max(self._peak, float(total))
            self._write(fh, ("add", entry, peak))
            self._entries.append(entry)
            self._peak = peak
            return True

        return self._locked(op)

    def raise_peak(self, value):
        def op(fh):
            if float(value) > self._peak:
                self._write(fh, ("peak", float(value)))
                self._peak = float(value)

        return self._locked(op)

    def replace(self, key, event):
        def op(fh):
            for i, entry in enumerate(self._entries):
                if entry.key == key:
                    self._write(fh, ("set", key, event))
                    self._entries[i] = replace(entry, event=event)
                    return
            raise KeyError(key)

        return self._locked(op)


def _record(record):
    blob = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(blob)) + blob


def _remove_if_owner(path, owner_pid):
    if os.getpid() != owner_pid:
        return
    for target, remove in ((path, os.remove), (os.path.dirname(path), os.rmdir)):
        try:
            remove(target)
        except OSError:
            pass


try:  # POSIX
    import fcntl

    def _lock_file(fh):
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)

    def _unlock_file(fh):
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _lock_file(fh):
        fh.seek(0)
        while True:
            try:
                msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after 10 s; keep waiting
                continue

    def _unlock_file(fh):
        fh.seek(0)
        msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
