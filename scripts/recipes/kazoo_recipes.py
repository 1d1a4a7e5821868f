#!/usr/bin/python3
"""Drive a ZooKeeper-compatible server with kazoo's recipes.

Usage: /usr/bin/python3 kazoo_recipes.py HOST:PORT

Needs Debian's python3-kazoo (2.8), installed for /usr/bin/python3 only.
Each check prints "ok: <name>" or "FAIL: <name>: <reason>"; the exit status
is 1 if any check failed. Every check runs under a watchdog (CHECK_TIMEOUT)
and every wait inside it is bounded, so a server that stops answering makes
the program fail, not hang.
"""
import os
import queue as queue_mod
import sys
import threading
import time
import traceback
import uuid

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent

CHECK_TIMEOUT = 60  # seconds per check

addr = sys.argv[1] if len(sys.argv) == 2 else None
base = "/kazoo-recipes-" + uuid.uuid4().hex[:8]
clients = []
failures = 0


class CheckFailed(Exception):
    pass


def require(cond, fmt, *args):
    if not cond:
        raise CheckFailed(fmt % args if args else fmt)


def new_client():
    c = KazooClient(hosts=addr, timeout=10)
    clients.append(c)
    c.start(timeout=10)
    return c


def close(c):
    try:
        c.stop()
        c.close()
    except Exception:
        pass


def wait_for(timeout, cond):
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def spawn(name, fn, *args):
    """Runs fn(*args) in a daemon thread; the thread's .error holds its exception."""
    def run():
        try:
            fn(*args)
        except BaseException as e:  # noqa: B036 - reported by the check
            t.error = e
    t = threading.Thread(target=run, name=name, daemon=True)
    t.error = None
    t.start()
    return t


def join(threads, timeout):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        require(not t.is_alive(), "%s still running after %ss", t.name, timeout)
        if t.error is not None:
            if isinstance(t.error, CheckFailed):
                raise t.error
            raise CheckFailed("%s: %r" % (t.name, t.error))


def check(name, body):
    global failures
    result = {}

    def run():
        try:
            body()
        except CheckFailed as e:
            result["err"] = str(e)
        except BaseException as e:  # noqa: B036
            tb = traceback.extract_tb(e.__traceback__)
            where = "%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno) if tb else "?"
            result["err"] = "%r at %s" % (e, where)

    start = time.monotonic()
    t = threading.Thread(target=run, name="check", daemon=True)
    t.start()
    t.join(CHECK_TIMEOUT)
    ms = int((time.monotonic() - start) * 1000)
    if t.is_alive():
        failures += 1
        print("FAIL: %s: timed out after %ss" % (name, CHECK_TIMEOUT), flush=True)
    elif "err" in result:
        failures += 1
        print("FAIL: %s: %s" % (name, result["err"].replace("\n", " ")), flush=True)
    else:
        print("ok: %s (%d ms)" % (name, ms), flush=True)


# ---------------------------------------------------------------------------
# Lock

def lock_exclusion():
    path = base + "/lock"
    a, b = new_client(), new_client()
    try:
        per_client = 10
        state = {"holders": 0, "max": 0, "counter": 0}
        mu = threading.Lock()
        acquired = [0, 0]

        def worker(i, client):
            lock = client.Lock(path, "w%d" % i)
            for k in range(per_client):
                require(lock.acquire(timeout=15), "client %d could not acquire within 15s (acquisition %d)", i, k)
                try:
                    with mu:
                        state["holders"] += 1
                        state["max"] = max(state["max"], state["holders"])
                    v = state["counter"]  # protected only by the ZooKeeper lock
                    time.sleep(0.01)
                    state["counter"] = v + 1
                    acquired[i] += 1
                    with mu:
                        state["holders"] -= 1
                finally:
                    lock.release()
                time.sleep(0.005)

        join([spawn("lock-0", worker, 0, a), spawn("lock-1", worker, 1, b)], 45)
        require(state["max"] == 1, "%d clients held the lock at once", state["max"])
        require(state["counter"] == 2 * per_client, "shared counter is %d after %d locked increments",
                state["counter"], 2 * per_client)
        require(acquired == [per_client, per_client], "acquisitions per client: %s", acquired)
        left = a.get_children(path)
        require(not left, "lock nodes left after all releases: %s", left)
    finally:
        close(a)
        close(b)


def lock_session_close():
    path = base + "/lock-session"
    a, b = new_client(), new_client()
    try:
        la = a.Lock(path, "a")
        require(la.acquire(timeout=10), "first client could not acquire a free lock within 10s")
        got = threading.Event()

        def waiter():
            lb = b.Lock(path, "b")
            if lb.acquire(timeout=20):
                got.set()
                lb.release()

        t = spawn("lock-waiter", waiter)
        require(not got.wait(1.5), "second client acquired a lock that the first holds")
        contenders = la.contenders()
        require(contenders == ["a", "b"], "contenders %s, want ['a', 'b']", contenders)
        a.stop()  # closes the session: its ephemeral lock node must go
        require(got.wait(15), "second client did not get the lock within 15s after the holder's session closed")
        join([t], 5)
    finally:
        close(a)
        close(b)


# ---------------------------------------------------------------------------
# Election

def election():
    path = base + "/election"
    cs = [new_client() for _ in range(3)]
    try:
        mu = threading.Lock()
        leading = []      # ids currently leading
        history = []      # ids in the order they became leader
        overlap = []
        release = {i: threading.Event() for i in range(3)}

        def lead(i):
            with mu:
                leading.append(i)
                history.append(i)
                if len(leading) > 1:
                    overlap.append(list(leading))
            release[i].wait(20)
            with mu:
                leading.remove(i)

        elections = [cs[i].Election(path, "e%d" % i) for i in range(3)]
        threads = [spawn("election-%d" % i, elections[i].run, lead, i) for i in range(3)]

        require(wait_for(10, lambda: len(history) >= 1), "no leader within 10s")
        time.sleep(1)
        require(len(history) == 1 and not overlap, "more than one leader: %s", history)
        first = history[0]
        cont = elections[0].contenders()
        require(len(cont) == 3 and cont[0] == "e%d" % first, "contenders %s, leader e%d", cont, first)

        release[first].set()  # the leader's function returns: it leaves the election
        require(wait_for(10, lambda: len(history) >= 2), "no new leader within 10s after e%d left", first)
        time.sleep(1)
        require(len(history) == 2 and not overlap, "leaders after e%d left: %s (overlap %s)", first, history, overlap)
        second = history[1]
        require(second != first, "e%d led twice", first)
        cont = elections[0].contenders()
        require(len(cont) == 2 and cont[0] == "e%d" % second, "contenders %s, leader e%d", cont, second)

        for e in release.values():
            e.set()
        join(threads, 15)
        require(len(history) == 3 and sorted(history) == [0, 1, 2] and not overlap,
                "leaders %s, overlap %s", history, overlap)
    finally:
        for c in cs:
            close(c)


# ---------------------------------------------------------------------------
# Barriers

def barrier():
    path = base + "/barrier"
    a, b = new_client(), new_client()
    try:
        ba = a.Barrier(path)
        ba.create()
        bb = b.Barrier(path)
        require(bb.wait(0.5) is False, "wait on a standing barrier returned True")
        res = {}
        t = spawn("barrier-wait", lambda: res.setdefault("v", bb.wait(15)))
        time.sleep(1)
        require("v" not in res, "waiter passed a standing barrier")
        ba.remove()
        join([t], 10)
        require(res.get("v") is True, "wait returned %s after the barrier was removed", res.get("v"))
        require(bb.wait(0.5) is True, "wait on a removed barrier returned False")
    finally:
        close(a)
        close(b)


def double_barrier():
    path = base + "/double-barrier"
    cs = [new_client() for _ in range(3)]
    try:
        bars = [cs[i].DoubleBarrier(path, 3, "d%d" % i) for i in range(3)]
        entered = [None] * 3
        left = [None] * 3
        go_leave = [threading.Event() for _ in range(3)]

        def member(i):
            bars[i].enter()
            require(bars[i].participating, "d%d: enter failed", i)
            entered[i] = time.monotonic()
            require(go_leave[i].wait(20), "d%d: not told to leave", i)
            bars[i].leave()
            left[i] = time.monotonic()

        threads = [spawn("dbarrier-0", member, 0), spawn("dbarrier-1", member, 1)]
        time.sleep(1)
        require(entered[0] is None and entered[1] is None, "entered with 2 of 3 members: %s", entered)
        threads.append(spawn("dbarrier-2", member, 2))
        require(wait_for(10, lambda: None not in entered), "not all entered within 10s of the 3rd joining: %s", entered)

        go_leave[0].set()
        go_leave[1].set()
        time.sleep(1)
        require(left[0] is None and left[1] is None, "left while d2 was still in: %s", left)
        go_leave[2].set()
        join(threads, 15)
        require(None not in left, "not all left: %s", left)
        kids = cs[0].get_children(path)
        require(not kids, "barrier nodes left: %s", kids)
    finally:
        for c in cs:
            close(c)


# ---------------------------------------------------------------------------
# Counter

def counter():
    path = base + "/counter"
    a, b = new_client(), new_client()
    try:
        per_client = 50

        def inc(client):
            c = client.Counter(path)
            for _ in range(per_client):
                c += 1

        join([spawn("counter-0", inc, a), spawn("counter-1", inc, b)], 45)
        v = a.Counter(path).value
        require(v == 2 * per_client, "counter is %s after %d increments", v, 2 * per_client)
        c = b.Counter(path)
        c -= 5
        require(a.Counter(path).value == 2 * per_client - 5, "counter is %s after -5", a.Counter(path).value)
    finally:
        close(a)
        close(b)


# ---------------------------------------------------------------------------
# Queues

def queue():
    path = base + "/queue"
    a, b = new_client(), new_client()
    try:
        qa, qb = a.Queue(path), b.Queue(path)
        items = [("item-%02d" % i).encode() for i in range(10)]
        for it in items:
            qa.put(it)
        qa.put(b"urgent", priority=1)
        require(len(qb) == 11, "queue length %d, want 11", len(qb))
        got = [qb.get() for _ in range(11)]
        require(got == [b"urgent"] + items, "order %s", got)
        require(qb.get() is None, "get on an empty queue did not return None")
    finally:
        close(a)
        close(b)


def locking_queue():
    path = base + "/locking-queue"
    a, b, c = new_client(), new_client(), new_client()
    try:
        qa, qb, qc = a.LockingQueue(path), b.LockingQueue(path), c.LockingQueue(path)
        items = [("job-%02d" % i).encode() for i in range(6)]
        qa.put(items[0])
        qa.put_all(items[1:])
        require(len(qa) == 6, "queue length %d, want 6", len(qa))
        # b takes the head; c, while b holds it, gets the next one.
        x = qb.get(timeout=5)
        require(x == items[0], "b got %s, want %s", x, items[0])
        require(qb.holds_lock(), "b does not hold the lock on its entry")
        y = qc.get(timeout=5)
        require(y == items[1], "c got %s while b holds %s, want %s", y, x, items[1])
        # c releases without consuming: the entry goes back to the queue head.
        require(qc.release(), "c could not release its entry")
        require(qb.consume(), "b could not consume its entry")
        got = []
        for _ in range(5):
            v = qc.get(timeout=5)
            require(v is not None, "get timed out after %s", got)
            got.append(v)
            require(qc.consume(), "c could not consume %s", v)
        require(got == items[1:], "order %s, want %s", got, items[1:])
        require(qc.get(timeout=0.5) is None, "get on an empty queue did not time out")
        require(len(qa) == 0, "queue length %d after consuming all", len(qa))
    finally:
        close(a)
        close(b)
        close(c)


# ---------------------------------------------------------------------------
# TreeCache

def tree_cache():
    root = base + "/tree"
    a, w = new_client(), new_client()
    cache = None
    try:
        a.create(root, b"root")
        events = queue_mod.Queue()
        names = {TreeEvent.NODE_ADDED: "added", TreeEvent.NODE_UPDATED: "updated",
                 TreeEvent.NODE_REMOVED: "removed", TreeEvent.INITIALIZED: "initialized",
                 TreeEvent.CONNECTION_SUSPENDED: "suspended", TreeEvent.CONNECTION_RECONNECTED: "reconnected",
                 TreeEvent.CONNECTION_LOST: "lost"}

        def listener(ev):
            d = ev.event_data
            if d is None:
                events.put(names[ev.event_type])
            else:
                events.put("%s %s %s" % (names[ev.event_type], d.path, d.data.decode() if d.data is not None else None))

        cache = TreeCache(a, root)
        cache.listen(listener)
        faults = []
        cache.listen_fault(lambda e: faults.append(e))
        cache.start()

        def expect(want):
            try:
                got = events.get(timeout=10)
            except queue_mod.Empty:
                raise CheckFailed("no event within 10s, want %r" % want)
            require(got == want, "got event %r, want %r", got, want)

        expect("added %s root" % root)
        expect("initialized")
        child, grand = root + "/child", root + "/child/grand"
        w.create(child, b"c1")
        expect("added %s c1" % child)
        w.create(grand, b"g1")
        expect("added %s g1" % grand)
        w.set(child, b"c2")
        expect("updated %s c2" % child)
        w.set(grand, b"g2")
        expect("updated %s g2" % grand)
        w.delete(grand)
        expect("removed %s g2" % grand)
        w.delete(child)
        expect("removed %s c2" % child)
        time.sleep(0.3)
        require(events.empty(), "unexpected extra event %r", None if events.empty() else events.get())
        require(cache.get_children(root) == frozenset(), "cached children of root: %s", cache.get_children(root))
        require(not faults, "cache faults: %s", faults)
    finally:
        if cache is not None:
            cache.close()
        close(a)
        close(w)


# ---------------------------------------------------------------------------

def main():
    if addr is None:
        print("usage: kazoo_recipes.py HOST:PORT", file=sys.stderr)
        os._exit(2)
    start = time.monotonic()
    try:
        admin = new_client()
        admin.create(base)
    except Exception as e:
        print("FAIL: connect: %r" % e, flush=True)
        os._exit(1)

    check("Lock: mutual exclusion over 20 acquisitions by 2 clients", lock_exclusion)
    check("Lock: lock of a closed session passes to the waiter", lock_session_close)
    check("Election: one leader of 3 at a time, next after it leaves", election)
    check("Barrier: waiters blocked until removed", barrier)
    check("DoubleBarrier: enter waits for all 3, leave waits for all", double_barrier)
    check("Counter: concurrent increments from 2 clients add up", counter)
    check("Queue: FIFO order (and priority)", queue)
    check("LockingQueue: FIFO order, locked entries skipped, release/consume", locking_queue)
    check("TreeCache: create/update/delete incl. nested observed", tree_cache)

    try:
        admin.delete(base, recursive=True)
    except Exception as e:
        print("cleanup of %s: %r" % (base, e), file=sys.stderr)
    for c in clients:
        close(c)
    print("kazoo: %d check(s) failed, %.1fs" % (failures, time.monotonic() - start), flush=True)
    # os._exit: a check that timed out may have left a thread blocked in kazoo.
    os._exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
