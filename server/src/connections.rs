//! The connections the server holds, busy or idle. Clients keep idle keep-alive connections
//! open (SDK pools hold dozens each), and each holds a file descriptor and a place under the
//! connection limit: where the open-files limit is 1,024, a few hundred idle sockets would
//! leave new clients waiting in the backlog until some idled out. At the limit, the accept
//! loop closes the connection idle the longest instead, so a new client is served at once;
//! a client whose idle connection was closed opens another (and retries, as SDKs do, the
//! rare request that raced the close).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

/// `Conn::last` before any request ended.
const NEVER: u64 = u64::MAX;

/// One connection's activity.
#[derive(Debug)]
pub struct Conn {
    inflight: AtomicUsize,
    /// Milliseconds since the registry started, at the end of the last request.
    last: AtomicU64,
    /// Milliseconds since the registry started, when bytes last moved either way (or it
    /// opened).
    moved: AtomicU64,
    /// Signalled when the accept loop wants the connection closed.
    pub close: Notify,
}

impl Conn {
    /// A request starts on this connection.
    pub fn begin(&self) {
        self.inflight.fetch_add(1, Ordering::AcqRel);
    }

    /// A request ended (its response was sent, or abandoned) at `now_ms`.
    pub fn end(&self, now_ms: u64) {
        self.last.store(now_ms, Ordering::Release);
        self.inflight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Since when no request has been under way: the end of the last one, or `opened_ms`
    /// before any; `None` while one runs.
    pub fn quiet_since(&self, opened_ms: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Acquire);
        (self.inflight.load(Ordering::Acquire) == 0).then_some(if last == NEVER {
            opened_ms
        } else {
            last
        })
    }

    /// Bytes arrived or left at `now_ms` (see `serve::Watched`).
    pub fn note_moved(&self, now_ms: u64) {
        self.moved.store(now_ms, Ordering::Relaxed);
    }

    /// When bytes last moved, or when the connection opened.
    pub fn moved_at(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Since when the connection has been idle; `None` while a request runs, or before its
    /// first request ended (a client that just connected is about to send one; the header
    /// timeout bounds one that never does).
    fn idle_since(&self) -> Option<u64> {
        let last = self.last.load(Ordering::Acquire);
        (self.inflight.load(Ordering::Acquire) == 0 && last != NEVER).then_some(last)
    }
}

/// The server's connections.
#[derive(Debug)]
pub struct Registry {
    started: Instant,
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            next: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        }
    }
}

/// A connection's place in the [`Registry`] (see [`Registry::listed`]).
pub struct Listed {
    id: u64,
    registry: Arc<Registry>,
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

impl Registry {
    /// Milliseconds since the registry started.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Registers a new connection; returns its id and its activity.
    pub fn add(&self) -> (u64, Arc<Conn>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            inflight: AtomicUsize::new(0),
            last: AtomicU64::new(NEVER),
            moved: AtomicU64::new(self.now_ms()),
            close: Notify::new(),
        });
        if let Ok(mut m) = self.conns.lock() {
            m.insert(id, Arc::clone(&conn));
        }
        (id, conn)
    }

    /// Forgets a closed connection.
    pub fn remove(&self, id: u64) {
        if let Ok(mut m) = self.conns.lock() {
            m.remove(&id);
        }
    }

    /// Connection `id`'s place in the registry, given up when the returned value drops:
    /// when the connection ends, or when its task never started.
    pub fn listed(self: &Arc<Self>, id: u64) -> Listed {
        Listed {
            id,
            registry: Arc::clone(self),
        }
    }

    /// Asks the connection idle the longest to close; false when none is idle.
    pub fn close_oldest_idle(&self) -> bool {
        let Ok(mut m) = self.conns.lock() else {
            return false;
        };
        let oldest = m
            .iter()
            .filter_map(|(id, c)| c.idle_since().map(|t| (t, *id)))
            .min();
        match oldest.and_then(|(_, id)| m.remove(&id)) {
            Some(c) => {
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_longest_is_closed_first_and_busy_ones_never() {
        let r = Registry::default();
        let (_, a) = r.add();
        let (_, b) = r.add();
        let (_, c) = r.add();
        let (_, fresh) = r.add(); // never served a request: never closed as idle
        a.begin();
        a.end(30);
        b.begin();
        b.end(10);
        c.begin(); // busy
        assert!(r.close_oldest_idle()); // b: idle since 10
        assert!(r.close_oldest_idle()); // a
        assert!(!r.close_oldest_idle()); // c is busy
        c.end(40);
        assert!(r.close_oldest_idle());
        assert!(!r.close_oldest_idle());
        fresh.begin();
        fresh.end(50);
        assert!(r.close_oldest_idle());
    }

    #[test]
    fn a_connection_is_quiet_from_its_opening_or_its_last_request_and_never_while_busy() {
        let r = Registry::default();
        let (_, c) = r.add();
        assert_eq!(c.quiet_since(7), Some(7));
        c.begin();
        c.begin();
        assert_eq!(c.quiet_since(7), None);
        c.end(20);
        assert_eq!(c.quiet_since(7), None); // one still under way
        c.end(25);
        assert_eq!(c.quiet_since(7), Some(25));
    }

    #[test]
    fn a_connection_leaves_the_registry_when_its_place_drops_served_or_not() {
        let r = Arc::new(Registry::default());
        let (id, c) = r.add();
        c.begin();
        c.end(10);
        drop(r.listed(id)); // e.g. a task that never started
        assert!(!r.close_oldest_idle()); // nothing left to close
        let (id, c) = r.add();
        let kept = r.listed(id);
        c.begin();
        c.end(20);
        assert!(r.close_oldest_idle());
        drop(kept);
    }
}
