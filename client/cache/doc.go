// Package cache keeps a node (NodeCache) or a subtree (TreeCache) of a
// ZooKeeper-compatible server in memory, current as the server changes
// it, and reports every change with its zxid, in zxid order.
//
// Against zkraft (which announces watchFrom=1 in /zookeeper/zkraft) a
// cache follows the resumable watch of client/resumable: it reads the
// tree, then streams every change after the zxid of its first read, so
// nothing between the read and the stream is lost or doubled, and after a
// reconnection, to the same member or any other, the stream resumes from
// the last change it delivered: no gap, no duplicate, each change with
// its own zxid. If the history no longer reaches back (the cache was cut
// off longer than the server keeps history), it reads the tree again and
// reports the differences, as below.
//
// Against any other server (Apache ZooKeeper 3.6+) it uses a persistent
// recursive watch (a persistent watch for a NodeCache) on a connection of
// its own, reading each notified node on that same connection, so a read
// always reflects the change notified before it. After a reconnection it
// reads the tree again and reports the differences: the changes made
// while it was disconnected are all reflected, but several changes to one
// node collapse into its last. ZooKeeper 3.8 does not say which zxid a
// notification is for; the cache then reports a creation or data change
// at the node's Mzxid as read and a deletion at the zxid of the read that
// found it gone, never lower than the change before it. (ZooKeeper 3.9+
// and zkraft put the zxid in the notification, and the cache uses it.)
//
// The package speaks the wire protocol itself (client/internal/wire) and
// imports no zkraft package but jute and the client tree; it must never
// import the server, raftsm, znode or session.
//
// The caller must:
//
//  1. open a client/session Session for the servers and credentials; the
//     cache opens connections of its own from them;
//  2. keep OnChange short (it runs on the cache's goroutine, and the cache
//     does not read the server while it runs);
//  3. Close every cache it starts; Close waits for its goroutines.
package cache
