//! Connection threads: one single-threaded async runtime per core, each serving the
//! connections the accept loop hands it for their whole life.
//!
//! Why: on tokio's work-stealing runtime a connection's task moves between workers — the one
//! that read its bytes off the socket, the one whose queue it sat in, the one that stole it —
//! and every move is a wake-up across cores. With a thread per core this machine's lean
//! benchmark served about a sixth more point reads a second for about the same server CPU
//! per read (`docs/performance.md`): the difference was time requests spent waiting for a
//! core, not work. Writes pay a little for it (about 10% more server CPU per upsert there): a
//! journal sync that ends on the blocking pool wakes each waiting writer's thread with a
//! system call, where a busy work-stealing runtime queued them without one. A request's own
//! heavy parts (scans, scripts, vector and full-text work, the journal sync) already run on
//! the blocking pool, so one connection's work does not hold its thread for long; what runs
//! inline (a transactional batch's operations, a large body's parse) delays the connections
//! on its thread, which no other thread can take over as a work-stealing worker could.
//!
//! A store a network round trip away (PostgreSQL) blocks its thread for each call: such a
//! server serves its connections on the multi-threaded runtime instead (see
//! [`crate::net`]), whose many workers cover the waits.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::runtime::Handle;

/// The connection threads of one server; dropping them stops the threads (their runtimes end
/// the tasks still on them).
pub struct Cores {
    cores: Vec<Core>,
}

struct Core {
    handle: Handle,
    /// Connections this core serves now.
    live: Arc<AtomicUsize>,
    /// Dropped to stop the thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A connection's place on a core, given back when the connection ends.
struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Cores {
    /// Starts `n` connection threads (at least one).
    pub fn start(n: usize) -> std::io::Result<Self> {
        let mut cores = Vec::with_capacity(n.max(1));
        for i in 0..n.max(1) {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let (made, handle) = std::sync::mpsc::sync_channel(1);
            // The runtime is made and dropped on its own thread: dropping one in the caller's
            // async context (a thread that failed to start) would panic.
            std::thread::Builder::new()
                .name(format!("strata-conn-{i}"))
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = made.send(Err(e));
                            return;
                        }
                    };
                    let _ = made.send(Ok(runtime.handle().clone()));
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    // Blocking-pool work of a stopped server is not waited for.
                    runtime.shutdown_background();
                })?;
            let handle = handle
                .recv()
                .map_err(|_| std::io::Error::other("a connection thread ended at its start"))??;
            cores.push(Core {
                handle,
                live: Arc::default(),
                _stop: stop,
            });
        }
        Ok(Self { cores })
    }

    /// One thread per core of this machine.
    pub fn per_core() -> std::io::Result<Self> {
        Self::start(num_cpus::get())
    }

    /// Serves `stream` on the core that serves the fewest connections: the stream is moved
    /// to that core's runtime and `serve` runs there until the connection ends.
    pub fn serve<F, Fut>(&self, stream: TcpStream, serve: F) -> std::io::Result<()>
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let core = self
            .cores
            .iter()
            .min_by_key(|c| c.live.load(Ordering::Relaxed))
            .ok_or_else(|| std::io::Error::other("no connection thread"))?;
        // Registered again with the chosen runtime's reactor, inside it.
        let stream = stream.into_std()?;
        core.live.fetch_add(1, Ordering::Relaxed);
        let seat = Seat(Arc::clone(&core.live));
        core.handle.spawn(async move {
            let _seat = seat;
            match TcpStream::from_std(stream) {
                Ok(stream) => serve(stream).await,
                Err(e) => tracing::warn!(error = %e, "a connection could not be served"),
            }
        });
        Ok(())
    }

    /// Connections each core serves now.
    #[cfg(test)]
    fn load(&self) -> Vec<usize> {
        self.cores
            .iter()
            .map(|c| c.live.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn connected(l: &tokio::net::TcpListener) -> (TcpStream, TcpStream) {
        let addr = l.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), l.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    async fn until(cores: &Cores, want: &[usize]) {
        for _ in 0..200 {
            if cores.load() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("load {:?}, expected {want:?}", cores.load());
    }

    #[tokio::test]
    async fn connections_go_to_the_least_loaded_core_and_are_served_there() {
        let cores = Cores::start(2).unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut clients = Vec::new();
        for _ in 0..3 {
            let (client, accepted) = connected(&l).await;
            // Echoes one line back, on the core's thread, then ends the connection.
            cores
                .serve(accepted, |mut s| async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut b = [0u8; 64];
                    let n = s.read(&mut b).await.unwrap_or(0);
                    let name = std::thread::current().name().unwrap_or("").to_string();
                    let _ = s.write_all(format!("{}:{name}", n).as_bytes()).await;
                })
                .unwrap();
            clients.push(client);
        }
        until(&cores, &[2, 1]).await;
        // The first connection ends: the next one goes to the core it left.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut first = clients.remove(0);
        first.write_all(b"ping").await.unwrap();
        let mut answer = String::new();
        first.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "4:strata-conn-0");
        until(&cores, &[1, 1]).await;
        let (client, accepted) = connected(&l).await;
        cores
            .serve(accepted, |s| async move {
                let _keep = s;
                std::future::pending::<()>().await
            })
            .unwrap();
        clients.push(client);
        until(&cores, &[2, 1]).await;
        // Stopping the threads ends what they serve.
        drop(cores);
        let mut c = clients.pop().unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest)).await;
        assert!(matches!(read, Ok(Ok(0))), "{read:?}");
    }
}
