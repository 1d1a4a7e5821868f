// CuratorRecipes drives a ZooKeeper-compatible server with Apache Curator's
// recipes (Curator 5, the Debian jars in /usr/share/java) and checks that they
// behave as they do against Apache ZooKeeper.
//
// Usage: java -cp <curator, zookeeper jars>:<dir> CuratorRecipes HOST:PORT
//
// Each check prints "ok: <name>" or "FAIL: <name>: <reason>"; the program
// exits with status 1 if any check failed. Every wait is bounded, and every
// check runs under a watchdog (CHECK_TIMEOUT_S), so a server that never
// answers makes the program fail, not hang.
//
// The TTL and container checks need a server with extended types enabled
// (ZooKeeper: -Dzookeeper.extendedTypesEnabled=true) whose container/TTL reaper
// runs often (ZooKeeper: -Dznode.container.checkIntervalMs=1000): they wait at
// most ~15 s for the nodes to go away.
//
// scripts/recipes.sh compiles and runs this file; see there for the classpath.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.api.transaction.CuratorTransactionResult;
import org.apache.curator.framework.api.transaction.OperationType;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorRecipes {
    /** Watchdog for one check, in seconds. */
    static final int CHECK_TIMEOUT_S = 60;
    /** How long to wait for the reaper to remove TTL / container nodes. */
    static final long REAP_WAIT_MS = 15_000;
    /**
     * ephemeralOwner that clients see for container and TTL nodes: ZooKeeper
     * stores a marker there (EphemeralType) but reports 0 to clients
     * (DataTree.copyStat), so the kind is not visible in a Stat; the checks
     * below tell containers and TTL nodes apart by their reaping instead.
     */
    static final long SPECIAL_OWNER_SEEN = 0;

    static String addr;
    static String base;
    static final List<CuratorFramework> allClients = Collections.synchronizedList(new ArrayList<>());
    static int failures = 0;

    /** A failed expectation; its message is the reason printed after FAIL. */
    static final class CheckFailed extends Exception {
        private static final long serialVersionUID = 1L;

        CheckFailed(String msg) {
            super(msg);
        }
    }

    interface Body {
        void run() throws Exception;
    }

    static void require(boolean cond, String fmt, Object... args) throws CheckFailed {
        if (!cond) {
            throw new CheckFailed(String.format(fmt, args));
        }
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] data) {
        return data == null ? "null" : new String(data, StandardCharsets.UTF_8);
    }

    /** A started client, connected within 10 s. Closed by the check or at exit. */
    static CuratorFramework newClient() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(addr)
                .sessionTimeoutMs(15_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new RetryNTimes(3, 300))
                .build();
        allClients.add(c);
        c.start();
        if (!c.blockUntilConnected(10, TimeUnit.SECONDS)) {
            c.close();
            throw new CheckFailed("could not connect to " + addr + " within 10s");
        }
        return c;
    }

    static void closeQuietly(AutoCloseable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (Exception e) {
            // best effort
        }
    }

    /** Runs body in its own thread with a watchdog and prints the outcome. */
    static void check(String name, Body body) {
        AtomicReference<Throwable> err = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                err.set(e);
            }
        }, "check-" + name);
        t.setDaemon(true);
        long start = System.nanoTime();
        t.start();
        try {
            t.join(TimeUnit.SECONDS.toMillis(CHECK_TIMEOUT_S));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        if (t.isAlive()) {
            t.interrupt();
            fail(name, "timed out after " + CHECK_TIMEOUT_S + "s");
            return;
        }
        Throwable e = err.get();
        if (e == null) {
            System.out.printf("ok: %s (%d ms)%n", name, ms);
        } else if (e instanceof CheckFailed) {
            fail(name, e.getMessage());
        } else {
            fail(name, e.toString());
        }
        System.out.flush();
    }

    static void fail(String name, String reason) {
        failures++;
        System.out.printf("FAIL: %s: %s%n", name, reason.replace('\n', ' '));
        System.out.flush();
    }

    /** Polls cond every 50 ms until it holds or timeoutMs passes. */
    interface Cond {
        boolean get() throws Exception;
    }

    static boolean waitFor(long timeoutMs, Cond cond) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            if (cond.get()) {
                return true;
            }
            if (System.currentTimeMillis() >= deadline) {
                return false;
            }
            Thread.sleep(50);
        }
    }

    /** Describes what is left of path (for failure messages). */
    static String describe(CuratorFramework c, String path) {
        try {
            Stat st = c.checkExists().forPath(path);
            if (st == null) {
                return path + " is gone";
            }
            List<String> kids = c.getChildren().forPath(path);
            return String.format("%s exists (ephemeralOwner=0x%x, cversion=%d, children=%s)",
                    path, st.getEphemeralOwner(), st.getCversion(), kids);
        } catch (Exception e) {
            return path + ": " + e;
        }
    }

    // ------------------------------------------------------------------
    // InterProcessMutex

    static void mutexExclusion() throws Exception {
        String path = base + "/mutex";
        CuratorFramework c1 = newClient();
        CuratorFramework c2 = newClient();
        try {
            final int perClient = 10;
            AtomicInteger holders = new AtomicInteger();
            AtomicInteger maxHolders = new AtomicInteger();
            int[] counter = {0}; // deliberately unsynchronized: only the lock protects it
            int[] acquired = new int[2];
            AtomicReference<Throwable> err = new AtomicReference<>();
            CuratorFramework[] clients = {c1, c2};
            Thread[] threads = new Thread[2];
            for (int i = 0; i < 2; i++) {
                final int id = i;
                threads[i] = new Thread(() -> {
                    InterProcessMutex m = new InterProcessMutex(clients[id], path);
                    try {
                        for (int k = 0; k < perClient; k++) {
                            if (!m.acquire(15, TimeUnit.SECONDS)) {
                                throw new CheckFailed("client " + id + " could not acquire the lock within 15s (acquisition " + k + ")");
                            }
                            try {
                                int h = holders.incrementAndGet();
                                maxHolders.accumulateAndGet(h, Math::max);
                                int v = counter[0];
                                Thread.sleep(10);
                                counter[0] = v + 1;
                                acquired[id]++;
                                holders.decrementAndGet();
                            } finally {
                                m.release();
                            }
                            Thread.sleep(5);
                        }
                    } catch (Throwable e) {
                        err.compareAndSet(null, e);
                    }
                }, "mutex-" + id);
                threads[i].setDaemon(true);
                threads[i].start();
            }
            for (Thread t : threads) {
                t.join(45_000);
                require(!t.isAlive(), "%s still running after 45s", t.getName());
            }
            if (err.get() instanceof CheckFailed) {
                throw (CheckFailed) err.get();
            } else if (err.get() != null) {
                throw new CheckFailed("worker: " + err.get());
            }
            require(maxHolders.get() == 1, "%d clients held the lock at once", maxHolders.get());
            require(counter[0] == 2 * perClient, "shared counter is %d after %d locked increments (lost updates)",
                    counter[0], 2 * perClient);
            require(acquired[0] == perClient && acquired[1] == perClient, "acquisitions per client: %d, %d",
                    acquired[0], acquired[1]);
            List<String> left = c1.getChildren().forPath(path);
            require(left.isEmpty(), "lock nodes left after all releases: %s", left);
        } finally {
            closeQuietly(c1);
            closeQuietly(c2);
        }
    }

    static void mutexSessionClose() throws Exception {
        String path = base + "/mutex-session";
        CuratorFramework a = newClient();
        CuratorFramework bc = newClient();
        try {
            InterProcessMutex ma = new InterProcessMutex(a, path);
            require(ma.acquire(10, TimeUnit.SECONDS), "first client could not acquire a free lock within 10s");
            CountDownLatch gotIt = new CountDownLatch(1);
            AtomicReference<Throwable> err = new AtomicReference<>();
            Thread waiter = new Thread(() -> {
                InterProcessMutex mb = new InterProcessMutex(bc, path);
                try {
                    if (mb.acquire(20, TimeUnit.SECONDS)) {
                        gotIt.countDown();
                        mb.release();
                    }
                } catch (Throwable e) {
                    err.set(e);
                }
            }, "mutex-waiter");
            waiter.setDaemon(true);
            waiter.start();
            // The second client must be blocked while the first holds the lock.
            require(!gotIt.await(1500, TimeUnit.MILLISECONDS), "second client acquired a lock that the first holds");
            require(waiter.isAlive(), "second client stopped waiting: %s", err.get());
            require(a.getChildren().forPath(path).size() == 2, "expected 2 lock nodes while contended, found %s",
                    a.getChildren().forPath(path));
            long closed = System.currentTimeMillis();
            a.close(); // closes the session: its ephemeral lock node must go
            require(gotIt.await(15, TimeUnit.SECONDS),
                    "second client did not get the lock within 15s after the holder's session was closed (%s)",
                    err.get() == null ? "still waiting" : err.get().toString());
            waiter.join(5000);
            require(err.get() == null, "second client: %s", err.get());
            long ms = System.currentTimeMillis() - closed;
            require(ms < 10_000, "lock passed over only %d ms after the session closed", ms);
        } finally {
            closeQuietly(a);
            closeQuietly(bc);
        }
    }

    // ------------------------------------------------------------------
    // Leader election

    static String leaders(LeaderLatch[] latches) {
        StringBuilder sb = new StringBuilder();
        for (LeaderLatch l : latches) {
            if (l != null && l.getState() == LeaderLatch.State.STARTED && l.hasLeadership()) {
                sb.append(sb.length() == 0 ? "" : ",").append(l.getId());
            }
        }
        return sb.toString();
    }

    static int leaderCount(LeaderLatch[] latches) {
        int n = 0;
        for (LeaderLatch l : latches) {
            if (l != null && l.getState() == LeaderLatch.State.STARTED && l.hasLeadership()) {
                n++;
            }
        }
        return n;
    }

    static void leaderLatch() throws Exception {
        String path = base + "/latch";
        CuratorFramework[] cs = new CuratorFramework[3];
        LeaderLatch[] latches = new LeaderLatch[3];
        try {
            for (int i = 0; i < 3; i++) {
                cs[i] = newClient();
                latches[i] = new LeaderLatch(cs[i], path, "p" + i);
            }
            for (LeaderLatch l : latches) {
                l.start();
            }
            // Exactly one leader, and it stays the only one.
            require(waitFor(10_000, () -> leaderCount(latches) >= 1), "no leader after 10s");
            int max = 0;
            for (int k = 0; k < 20; k++) {
                max = Math.max(max, leaderCount(latches));
                Thread.sleep(50);
            }
            require(max == 1, "%d leaders at once: %s", max, leaders(latches));
            int first = -1;
            for (int i = 0; i < 3; i++) {
                if (latches[i].hasLeadership()) {
                    first = i;
                }
            }
            String firstId = latches[first].getId();
            for (LeaderLatch l : latches) {
                String seen = l.getLeader().getId();
                require(firstId.equals(seen), "%s sees leader %s, but %s has leadership", l.getId(), seen, firstId);
            }
            require(latches[first].getParticipants().size() == 3, "participants: %s", latches[first].getParticipants());
            // The leader leaves: exactly one of the other two takes over.
            latches[first].close();
            latches[first] = null;
            require(waitFor(10_000, () -> leaderCount(latches) >= 1), "no new leader within 10s after %s closed", firstId);
            max = 0;
            for (int k = 0; k < 20; k++) {
                max = Math.max(max, leaderCount(latches));
                Thread.sleep(50);
            }
            require(max == 1, "%d leaders at once after %s closed: %s", max, firstId, leaders(latches));
            String second = leaders(latches);
            require(!second.equals(firstId), "closed latch %s still leader", firstId);
            for (LeaderLatch l : latches) {
                if (l != null) {
                    String seen = l.getLeader().getId();
                    require(second.equals(seen), "%s sees leader %s, but %s has leadership", l.getId(), seen, second);
                }
            }
        } finally {
            for (LeaderLatch l : latches) {
                closeQuietly(l);
            }
            for (CuratorFramework c : cs) {
                closeQuietly(c);
            }
        }
    }

    static void leaderSelector() throws Exception {
        String path = base + "/selector";
        final int turns = 6;
        CuratorFramework[] cs = new CuratorFramework[2];
        LeaderSelector[] sel = new LeaderSelector[2];
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger maxHolders = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(turns);
        try {
            for (int i = 0; i < 2; i++) {
                cs[i] = newClient();
            }
            for (int i = 0; i < 2; i++) {
                final String id = "s" + i;
                sel[i] = new LeaderSelector(cs[i], path, new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework client) throws Exception {
                        if (done.getCount() == 0) {
                            return; // enough turns; the check is closing the selectors
                        }
                        int h = holders.incrementAndGet();
                        maxHolders.accumulateAndGet(h, Math::max);
                        try {
                            order.add(id);
                            Thread.sleep(300);
                        } finally {
                            holders.decrementAndGet();
                            done.countDown();
                        }
                    }
                });
                sel[i].setId(id);
                sel[i].autoRequeue();
            }
            sel[0].start();
            sel[1].start();
            require(done.await(30, TimeUnit.SECONDS), "only %d leadership turns in 30s: %s", order.size(), order);
            sel[0].close();
            sel[1].close();
            List<String> seen;
            synchronized (order) {
                seen = new ArrayList<>(order);
            }
            require(maxHolders.get() == 1, "%d participants led at once; turns %s", maxHolders.get(), seen);
            for (int i = 1; i < seen.size(); i++) {
                require(!seen.get(i).equals(seen.get(i - 1)),
                        "leadership not taken in turn (requeued participant went before the waiting one): %s", seen);
            }
        } finally {
            for (LeaderSelector l : sel) {
                closeQuietly(l);
            }
            for (CuratorFramework c : cs) {
                closeQuietly(c);
            }
        }
    }

    // ------------------------------------------------------------------
    // CuratorCache (persistent recursive watch)

    static void curatorCache() throws Exception {
        String root = base + "/cache";
        CuratorFramework c = newClient();
        CuratorFramework w = newClient(); // a separate writer, as in real use
        CuratorCache cache = null;
        try {
            c.create().forPath(root, b("root"));
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            CountDownLatch initialized = new CountDownLatch(1);
            cache = CuratorCache.build(c, root);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forCreates(n -> events.add("create " + n.getPath() + " " + s(n.getData())))
                    .forChanges((o, n) -> events.add("change " + n.getPath() + " " + s(o.getData()) + "->" + s(n.getData())))
                    .forDeletes(o -> events.add("delete " + o.getPath()))
                    .forInitialized(initialized::countDown)
                    .build());
            cache.start();
            require(initialized.await(10, TimeUnit.SECONDS), "cache not initialized within 10s");
            expectEvent(events, "create " + root + " root");

            String child = root + "/child";
            String grand = child + "/grand";
            w.create().forPath(child, b("c1"));
            expectEvent(events, "create " + child + " c1");
            w.create().forPath(grand, b("g1"));
            expectEvent(events, "create " + grand + " g1");
            w.setData().forPath(child, b("c2"));
            expectEvent(events, "change " + child + " c1->c2");
            w.setData().forPath(grand, b("g2"));
            expectEvent(events, "change " + grand + " g1->g2");
            w.setData().forPath(root, b("root2"));
            expectEvent(events, "change " + root + " root->root2");
            w.delete().forPath(grand);
            expectEvent(events, "delete " + grand);
            w.delete().forPath(child);
            expectEvent(events, "delete " + child);

            String extra = events.poll(300, TimeUnit.MILLISECONDS);
            require(extra == null, "unexpected extra event: %s", extra);
            require(cache.size() == 1, "cache holds %d nodes, want 1 (the root)", cache.size());
            ChildData rd = cache.get(root).orElse(null);
            require(rd != null && s(rd.getData()).equals("root2"), "cached root data is %s",
                    rd == null ? "missing" : s(rd.getData()));
        } finally {
            closeQuietly(cache);
            closeQuietly(c);
            closeQuietly(w);
        }
    }

    static void expectEvent(BlockingQueue<String> events, String want) throws Exception {
        String got = events.poll(10, TimeUnit.SECONDS);
        require(got != null, "no event within 10s, want \"%s\"", want);
        require(got.equals(want), "got event \"%s\", want \"%s\"", got, want);
    }

    // ------------------------------------------------------------------
    // PersistentTtlNode (TTL + container nodes)

    static void persistentTtlNode() throws Exception {
        final long ttlMs = 2000;
        String path = base + "/ttl";
        String touch = path + "/touch";
        CuratorFramework c = newClient();
        CuratorFramework obs = newClient();
        PersistentTtlNode node = new PersistentTtlNode(c, path, ttlMs, b("ttl-data"));
        try {
            node.start();
            require(node.waitForInitialCreate(10, TimeUnit.SECONDS), "node not created within 10s");
            Stat st = obs.checkExists().forPath(path);
            require(st != null, "%s missing right after the initial create", path);
            require(st.getEphemeralOwner() == SPECIAL_OWNER_SEEN, "container %s shows ephemeralOwner=0x%x, ZooKeeper shows 0",
                    path, st.getEphemeralOwner());
            require(s(obs.getData().forPath(path)).equals("ttl-data"), "data of %s is %s", path,
                    s(obs.getData().forPath(path)));
            // The recipe creates the TTL child after ttl/2 and touches it every ttl/2.
            require(waitFor(ttlMs * 3, () -> obs.checkExists().forPath(touch) != null),
                    "TTL child %s not created within %d ms", touch, ttlMs * 3);
            Stat ts = obs.checkExists().forPath(touch);
            require(ts.getEphemeralOwner() == SPECIAL_OWNER_SEEN, "TTL node %s shows ephemeralOwner=0x%x, ZooKeeper shows 0",
                    touch, ts.getEphemeralOwner());
            // While the recipe runs, the nodes outlive the TTL (it keeps touching the child).
            Thread.sleep(ttlMs * 3);
            require(obs.checkExists().forPath(path) != null && obs.checkExists().forPath(touch) != null,
                    "while the recipe runs, %d ms (3 ttl) later: %s", ttlMs * 3, describe(obs, path));
        } finally {
            node.close();
            closeQuietly(c);
        }
        try {
            // After close the child expires (ttl) and then the empty container is reaped.
            long closed = System.currentTimeMillis();
            boolean gone = waitFor(REAP_WAIT_MS, () -> obs.checkExists().forPath(path) == null);
            require(gone, "%d ms after close: %s", REAP_WAIT_MS, describe(obs, path));
            // The last touch was at most ttl/2 before close, so it cannot expire sooner.
            long after = System.currentTimeMillis() - closed;
            require(after >= ttlMs / 2 - 200, "removed %d ms after close, before its ttl could pass", after);
        } finally {
            closeQuietly(obs);
        }
    }

    // PersistentTtlNode is checked above; this is the same mechanism through
    // its parts, reported separately so that a failure says which half is missing.
    static void ttlNodeExpiry() throws Exception {
        String path = base + "/ttl-plain";
        CuratorFramework c = newClient();
        try {
            c.create().withTtl(1000).withMode(org.apache.zookeeper.CreateMode.PERSISTENT_WITH_TTL).forPath(path, b("x"));
            boolean gone = waitFor(REAP_WAIT_MS, () -> c.checkExists().forPath(path) == null);
            require(gone, "%d ms after creating it with ttl 1000 ms: %s", REAP_WAIT_MS, describe(c, path));
        } finally {
            closeQuietly(c);
        }
    }

    // ------------------------------------------------------------------
    // Transactions (multi)

    static void transactionCommit() throws Exception {
        String tx = base + "/tx";
        CuratorFramework c = newClient();
        try {
            c.create().forPath(tx, b("v0"));
            c.create().forPath(tx + "/del", b("d"));
            CuratorOp create = c.transactionOp().create().forPath(tx + "/new", b("n"));
            CuratorOp set = c.transactionOp().setData().forPath(tx, b("v1"));
            CuratorOp del = c.transactionOp().delete().forPath(tx + "/del");
            CuratorOp chk = c.transactionOp().check().withVersion(1).forPath(tx);
            List<CuratorTransactionResult> res = c.transaction().forOperations(create, set, del, chk);
            require(res.size() == 4, "%d results, want 4", res.size());
            OperationType[] types = {OperationType.CREATE, OperationType.SET_DATA, OperationType.DELETE, OperationType.CHECK};
            for (int i = 0; i < 4; i++) {
                CuratorTransactionResult r = res.get(i);
                require(r.getType() == types[i] && r.getError() == 0, "result %d: type %s error %d, want %s ok",
                        i, r.getType(), r.getError(), types[i]);
            }
            require((tx + "/new").equals(res.get(0).getResultPath()), "create result path %s", res.get(0).getResultPath());
            require(res.get(1).getResultStat() != null && res.get(1).getResultStat().getVersion() == 1,
                    "setData result stat %s", res.get(1).getResultStat());
            require(s(c.getData().forPath(tx + "/new")).equals("n"), "created node has wrong data");
            Stat st = new Stat();
            require(s(c.getData().storingStatIn(st).forPath(tx)).equals("v1") && st.getVersion() == 1,
                    "%s: data %s version %d after the transaction", tx, s(c.getData().forPath(tx)), st.getVersion());
            require(c.checkExists().forPath(tx + "/del") == null, "deleted node still exists");
        } finally {
            closeQuietly(c);
        }
    }

    static void transactionAtomic() throws Exception {
        String tx = base + "/tx-fail";
        CuratorFramework c = newClient();
        try {
            c.create().forPath(tx, b("v0"));
            c.create().forPath(tx + "/keep", b("k"));
            // 1. A delete of a missing node in the middle: nothing happens, NONODE.
            try {
                c.transaction().forOperations(
                        c.transactionOp().create().forPath(tx + "/never", b("n")),
                        c.transactionOp().setData().forPath(tx, b("v1")),
                        c.transactionOp().delete().forPath(tx + "/missing"),
                        c.transactionOp().delete().forPath(tx + "/keep"));
                throw new CheckFailed("transaction with a delete of a missing node succeeded");
            } catch (KeeperException e) {
                require(e.code() == KeeperException.Code.NONODE, "error %s, want NONODE", e.code());
            }
            verifyUntouched(c, tx);
            // 2. A failing version check at the end: nothing happens, BADVERSION.
            try {
                c.transaction().forOperations(
                        c.transactionOp().create().forPath(tx + "/never", b("n")),
                        c.transactionOp().setData().forPath(tx, b("v1")),
                        c.transactionOp().delete().forPath(tx + "/keep"),
                        c.transactionOp().check().withVersion(7).forPath(tx));
                throw new CheckFailed("transaction with a failing version check succeeded");
            } catch (KeeperException e) {
                require(e.code() == KeeperException.Code.BADVERSION, "error %s, want BADVERSION", e.code());
            }
            verifyUntouched(c, tx);
        } finally {
            closeQuietly(c);
        }
    }

    static void verifyUntouched(CuratorFramework c, String tx) throws Exception {
        require(c.checkExists().forPath(tx + "/never") == null, "failed transaction created %s/never", tx);
        Stat st = new Stat();
        String data = s(c.getData().storingStatIn(st).forPath(tx));
        require(data.equals("v0") && st.getVersion() == 0, "failed transaction changed %s: data %s version %d",
                tx, data, st.getVersion());
        require(c.checkExists().forPath(tx + "/keep") != null, "failed transaction deleted %s/keep", tx);
    }

    // ------------------------------------------------------------------
    // Container parents

    static void containerParents() throws Exception {
        String top = base + "/containers";
        String leaf = top + "/a/b/c/leaf";
        CuratorFramework c = newClient();
        try {
            String got = c.create().creatingParentContainersIfNeeded().forPath(leaf, b("x"));
            require(leaf.equals(got), "created %s, want %s", got, leaf);
            for (String p : new String[] {top, top + "/a", top + "/a/b", top + "/a/b/c"}) {
                Stat st = c.checkExists().forPath(p);
                require(st != null, "parent %s missing", p);
                require(st.getEphemeralOwner() == SPECIAL_OWNER_SEEN,
                        "container parent %s shows ephemeralOwner=0x%x, ZooKeeper shows 0", p, st.getEphemeralOwner());
            }
            Stat ls = c.checkExists().forPath(leaf);
            require(ls.getEphemeralOwner() == 0, "leaf is not persistent: ephemeralOwner=0x%x", ls.getEphemeralOwner());
        } finally {
            closeQuietly(c);
        }
    }

    static void containerCleanup() throws Exception {
        String top = base + "/containers";
        String leaf = top + "/a/b/c/leaf";
        CuratorFramework c = newClient();
        try {
            require(c.checkExists().forPath(leaf) != null, "%s missing (creatingParentContainersIfNeeded failed?)", leaf);
            c.delete().forPath(leaf);
            // The reaper removes c, then b, then a, then the top, each once empty.
            boolean gone = waitFor(REAP_WAIT_MS, () -> c.checkExists().forPath(top) == null);
            require(gone, "%d ms after deleting the leaf: %s", REAP_WAIT_MS, describe(c, top));
        } finally {
            closeQuietly(c);
        }
    }

    // ------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CuratorRecipes HOST:PORT");
            System.exit(2);
        }
        addr = args[0];
        base = "/curator-recipes-" + UUID.randomUUID().toString().substring(0, 8);
        long start = System.nanoTime();

        CuratorFramework admin;
        try {
            admin = newClient();
            admin.create().forPath(base);
        } catch (Exception e) {
            fail("connect", e instanceof CheckFailed ? e.getMessage() : e.toString());
            System.exit(1);
            return;
        }

        check("InterProcessMutex: mutual exclusion over 20 acquisitions by 2 clients", CuratorRecipes::mutexExclusion);
        check("InterProcessMutex: lock of a closed session passes to the waiter", CuratorRecipes::mutexSessionClose);
        check("LeaderLatch: one leader of 3, another after it closes", CuratorRecipes::leaderLatch);
        check("LeaderSelector: 2 participants lead in turn", CuratorRecipes::leaderSelector);
        check("CuratorCache: create/update/delete incl. grandchild observed", CuratorRecipes::curatorCache);
        check("transaction: create+setData+delete+check commits", CuratorRecipes::transactionCommit);
        check("transaction: failing op applies nothing", CuratorRecipes::transactionAtomic);
        check("creatingParentContainersIfNeeded: deep path with container parents", CuratorRecipes::containerParents);
        check("containers: empty container parents reaped", CuratorRecipes::containerCleanup);
        check("TTL node: expires after its ttl", CuratorRecipes::ttlNodeExpiry);
        check("PersistentTtlNode: exists while running, gone after close + ttl", CuratorRecipes::persistentTtlNode);

        try {
            admin.delete().deletingChildrenIfNeeded().forPath(base);
        } catch (Exception e) {
            System.err.println("cleanup of " + base + ": " + e);
        }
        closeQuietly(admin);
        synchronized (allClients) {
            for (CuratorFramework c : allClients) {
                closeQuietly(c);
            }
        }
        System.out.printf("curator: %d check(s) failed, %.1fs%n", failures, (System.nanoTime() - start) / 1e9);
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }
}
