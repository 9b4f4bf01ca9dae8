//! [`TcpStore`]: a small key-value store over TCP (`torch.distributed.TCPStore`), the
//! rendezvous of processes that have no MPI to find each other: the master (rank 0) serves
//! it, every process (the master too) is a client, and values are byte strings under string
//! keys. `std::net` only.

mod server;
mod wire;

use crate::error::{Error, ErrorKind, Result};
use server::Server;
use std::io::{BufReader, BufWriter};
use std::net::{TcpStream, ToSocketAddrs};
use std::panic::Location;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wire::{read_reply, write_request, Reply, Request};

/// How long a client waits between attempts to reach a master that is not listening yet.
const RETRY: Duration = Duration::from_millis(50);
/// Extra time a reply may take over the wait the server was asked for.
const REPLY_SLACK: Duration = Duration::from_secs(5);

/// A client of the store, and on the master also its server (`TCPStore(host, port,
/// is_master=…, timeout=…)`). Every operation is bounded by the timeout: reaching the
/// master (retried until then), and waiting for a key another process has not set yet.
///
/// ```no_run
/// use kiln::distributed::TcpStore;
/// use std::time::Duration;
/// # fn main() -> kiln::Result<()> {
/// let rank0 = std::env::var("RANK").as_deref() == Ok("0");
/// let store = TcpStore::new("127.0.0.1", 29500, rank0, Duration::from_secs(30))?;
/// if rank0 {
///     store.set("greeting", b"hello")?;
/// }
/// assert_eq!(store.get("greeting")?, b"hello"); // waits until rank 0 has set it
/// # Ok(()) }
/// ```
///
/// Differences from PyTorch: no `world_size`/`wait_for_workers` (wait for keys the workers set
/// instead), and no `add`/`compare_set`/`delete_key`.
pub struct TcpStore {
    /// The master's server (kept alive as long as this store).
    server: Option<Server>,
    conn: Mutex<Conn>,
    /// `host:port`, for messages.
    addr: String,
    /// The port (the one picked when the master was given port 0).
    port: u16,
    timeout: Duration,
}

/// The connection to the server, buffered both ways.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

impl TcpStore {
    /// Connects to the store at `host:port`; with `is_master`, first starts serving it on
    /// `port` (every IPv4 interface; port 0 picks a free one, see [`TcpStore::port`]). A
    /// non-master retries until the master listens, for up to `timeout`.
    ///
    /// Errors: the port taken (master), the master not reachable within `timeout`, a host
    /// name that does not resolve.
    #[track_caller]
    pub fn new(host: &str, port: u16, is_master: bool, timeout: Duration) -> Result<TcpStore> {
        const OP: &str = "TcpStore::new";
        let at = Location::caller();
        let failed = |what: String, e: std::io::Error| {
            Error::at(OP, ErrorKind::Distributed, format!("{what}: {e}"), at).caused_by(e)
        };
        let server = if is_master {
            let s = Server::start(port).map_err(|e| failed(format!("the master cannot listen on port {port}"), e))?;
            Some(s)
        } else {
            None
        };
        let port = server.as_ref().map_or(port, Server::port);
        let addr = format!("{host}:{port}");
        let stream = connect(OP, &addr, timeout)?;
        let clone = stream.try_clone().map_err(|e| failed(addr.clone(), e))?;
        let conn = Conn { reader: BufReader::new(stream), writer: BufWriter::new(clone) };
        Ok(TcpStore { server, conn: Mutex::new(conn), addr, port, timeout })
    }

    /// The port of the store (the one picked when the master was given port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether this process serves the store.
    pub fn is_master(&self) -> bool {
        self.server.is_some()
    }

    /// The timeout of every operation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Stores `value` under `key`, replacing an earlier value; processes waiting for `key` get it.
    ///
    /// Errors: the master gone.
    #[track_caller]
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        match self.call("TcpStore::set", Request::Set { key: key.into(), value: value.to_vec() }, Duration::ZERO)? {
            Reply::Done => Ok(()),
            other => Err(self.confused("TcpStore::set", &other)),
        }
    }

    /// The value under `key`, waiting for some process to set it for up to the timeout.
    ///
    /// Errors: [`ErrorKind::Timeout`] when no process set `key` in time, the master gone.
    #[track_caller]
    pub fn get(&self, key: &str) -> Result<Vec<u8>> {
        const OP: &str = "TcpStore::get";
        match self.call(OP, Request::Get { key: key.into(), wait: self.timeout }, self.timeout)? {
            Reply::Value(v) => Ok(v),
            Reply::Missing => Err(Error::new(
                OP,
                ErrorKind::Timeout,
                format!("key {key:?} was not set within {:?} (store at {}): the process that sets it did not arrive, or failed", self.timeout, self.addr),
            )),
            other => Err(self.confused(OP, &other)),
        }
    }

    /// Waits until every key of `keys` is set, within one timeout for all of them.
    ///
    /// Errors: as [`TcpStore::get`], naming the first key missing.
    #[track_caller]
    pub fn wait(&self, keys: &[&str]) -> Result<()> {
        const OP: &str = "TcpStore::wait";
        let deadline = Instant::now() + self.timeout;
        for key in keys {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.call(OP, Request::Get { key: (*key).into(), wait: left }, left)? {
                Reply::Value(_) => {}
                Reply::Missing => {
                    return Err(Error::new(
                        OP,
                        ErrorKind::Timeout,
                        format!("key {key:?} was not set within {:?} (store at {})", self.timeout, self.addr),
                    ));
                }
                other => return Err(self.confused(OP, &other)),
            }
        }
        Ok(())
    }

    /// Sends `request` and reads the reply, allowing the server `wait` (plus slack) to answer.
    #[track_caller]
    fn call(&self, op: &'static str, request: Request, wait: Duration) -> Result<Reply> {
        let at = Location::caller();
        let lost = |e: std::io::Error| {
            Error::at(
                op,
                ErrorKind::Distributed,
                format!("lost the store at {}: {e} (did the master, rank 0, exit?)", self.addr),
                at,
            )
            .caused_by(e)
        };
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.reader.get_ref().set_read_timeout(Some(wait + REPLY_SLACK)).map_err(lost)?;
        write_request(&mut conn.writer, &request).map_err(lost)?;
        read_reply(&mut conn.reader).map_err(lost)
    }

    /// A reply that does not fit the request.
    #[track_caller]
    fn confused(&self, op: &'static str, reply: &Reply) -> Error {
        Error::new(op, ErrorKind::Distributed, format!("the store at {} answered {reply:?}", self.addr))
    }
}

/// Connects to `addr`, retrying until `timeout` while nothing listens there yet.
#[track_caller]
fn connect(op: &'static str, addr: &str, timeout: Duration) -> Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    let at = Location::caller();
    let mut last = None;
    loop {
        let targets = addr.to_socket_addrs().map_err(|e| {
            Error::at(op, ErrorKind::Distributed, format!("cannot resolve {addr}: {e}"), at).caused_by(e)
        })?;
        for target in targets {
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            match TcpStream::connect_timeout(&target, left) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        if Instant::now() >= deadline {
            let why = last.map_or("no address".to_string(), |e| e.to_string());
            return Err(Error::new(
                op,
                ErrorKind::Timeout,
                format!("could not reach the store's master at {addr} within {timeout:?} ({why}): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?"),
            ));
        }
        std::thread::sleep(RETRY.min(deadline.saturating_duration_since(Instant::now())));
    }
}
