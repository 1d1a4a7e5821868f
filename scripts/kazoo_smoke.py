#!/usr/bin/python3
"""Smoke test with kazoo (Python ZooKeeper client) against a server address.

Holds a session with ephemerals and watches and checks what ZooKeeper
clients rely on. Usage: kazoo_smoke.py HOST:PORT. Exits non-zero on failure.
"""
import sys
import threading
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import EventType

addr = sys.argv[1]
base = "/kazoo-smoke-" + uuid.uuid4().hex[:8]


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


a = KazooClient(hosts=addr, timeout=10)
a.start(timeout=10)
b = KazooClient(hosts=addr, timeout=10)
b.start(timeout=10)

a.create(base, b"root")
st = a.exists(base)
check(st is not None and st.czxid == st.mzxid == st.pzxid, "create: czxid == mzxid == pzxid")

# Ephemerals and sequential nodes.
eph = a.create(base + "/eph", b"e", ephemeral=True)
check(a.exists(eph).ephemeralOwner == a.client_id[0], "ephemeral owned by the session")
s1 = a.create(base + "/job-", b"", sequence=True)
s2 = a.create(base + "/job-", b"", ephemeral=True, sequence=True)
check(s1.endswith("0000000001") and s2.endswith("0000000002"), "sequential suffixes %s %s" % (s1, s2))

# Watches: data watch fires once with NodeDataChanged; child watch fires.
events = []
got = threading.Event()

def on_data(ev):
    events.append(ev)
    got.set()

b.get(base, watch=on_data)
a.set(base, b"v2")
check(got.wait(5) and events[0].type == EventType.CHANGED and events[0].path == base, "data watch fired NodeDataChanged")
got.clear()
a.set(base, b"v3")
check(not got.wait(1) and len(events) == 1, "one-shot: no second event")

child_events = []
child_got = threading.Event()
b.get_children(base, watch=lambda ev: (child_events.append(ev), child_got.set()))
a.create(base + "/c")
check(child_got.wait(5) and child_events[0].type == EventType.CHILD, "child watch fired NodeChildrenChanged")

# Versions and errors.
try:
    a.set(base, b"x", version=0)
    check(False, "BadVersion")
except BadVersionError:
    check(True, "setData with a stale version gives BadVersion")
try:
    a.create(base + "/c")
    check(False, "NodeExists")
except NodeExistsError:
    check(True, "create on an existing node gives NodeExists")
try:
    a.delete(base)
    check(False, "NotEmpty")
except NotEmptyError:
    check(True, "delete of a parent gives NotEmpty")

# Transaction (multi): all or nothing.
t = a.transaction()
t.create(base + "/t1", b"1")
t.check(base, 999)
res = t.commit()
check(a.exists(base + "/t1") is None and isinstance(res[1], BadVersionError), "failed transaction applied nothing")
t = a.transaction()
t.create(base + "/t1", b"1")
t.set_data(base + "/t1", b"2")
t.delete(base + "/c")
res = t.commit()
check(res[0] == base + "/t1" and a.get(base + "/t1")[0] == b"2" and a.exists(base + "/c") is None, "transaction applied")

# Ephemerals vanish when their session closes; a watcher sees it.
gone = threading.Event()
b.exists(eph, watch=lambda ev: gone.set() if ev.type == EventType.DELETED else None)
a.stop()
a.close()
check(gone.wait(5), "ephemeral deleted on session close, watcher told")
check(b.exists(eph) is None and b.exists(s2) is None, "ephemerals gone")

b.delete(base, recursive=True)
check(b.exists(base) is None, "recursive delete")
b.stop()
b.close()
print("kazoo smoke: all passed")
