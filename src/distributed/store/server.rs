//! The store's server, run by the master (rank 0): keys and values in memory, one thread per
//! connection, a get waiting on a condition variable until its key is set or its wait ends.

use super::wire::{read_request, write_reply, Reply, Request};
use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// The keys and values, and the signal that one was set.
#[derive(Default)]
struct Table {
    values: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
}

/// A listening server; dropping it stops accepting (open connections end with their clients).
pub(super) struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on every IPv4 interface at `port` (0: a free port, see [`Server::port`]).
    pub(super) fn start(port: u16) -> io::Result<Server> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let table = Arc::new(Table::default());
        let stopping = stop.clone();
        let acceptor = std::thread::Builder::new().name("kiln-store".into()).spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let table = table.clone();
                // A client whose thread cannot start just sees its connection close.
                let _ = std::thread::Builder::new().name("kiln-store-conn".into()).spawn(move || serve(conn, &table));
            }
        })?;
        Ok(Server { port, stop, acceptor: Some(acceptor) })
    }

    /// The port it listens on.
    pub(super) fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the acceptor with a connection of our own; if that fails it is not blocked.
        if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
            if let Some(t) = self.acceptor.take() {
                let _ = t.join();
            }
        }
    }
}

/// Answers one client's requests until it disconnects (or sends garbage).
fn serve(conn: TcpStream, table: &Table) {
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else { return };
    let (mut reader, mut writer) = (BufReader::new(conn), BufWriter::new(write_half));
    while let Ok(request) = read_request(&mut reader) {
        let reply = match request {
            Request::Set { key, value } => {
                lock(table).insert(key, value);
                table.changed.notify_all();
                Reply::Done
            }
            Request::Get { key, wait } => get(table, &key, Instant::now() + wait),
        };
        if write_reply(&mut writer, &reply).is_err() {
            return;
        }
    }
}

/// `key`'s value once some client sets it, or `Missing` at `deadline`.
fn get(table: &Table, key: &str, deadline: Instant) -> Reply {
    let mut values = lock(table);
    loop {
        if let Some(v) = values.get(key) {
            return Reply::Value(v.clone());
        }
        let now = Instant::now();
        if now >= deadline {
            return Reply::Missing;
        }
        values = table.changed.wait_timeout(values, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// The table's lock (a panicked connection thread does not poison it for the others).
fn lock(table: &Table) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
    table.values.lock().unwrap_or_else(|e| e.into_inner())
}
