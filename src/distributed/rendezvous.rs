//! The `env://` rendezvous (`torch.distributed.rendezvous("env://")`): rank, world size and
//! the master's address from `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`, and a
//! [`TcpStore`] the master serves, through which the processes share what they must agree on
//! (NCCL's unique id).

use super::store::TcpStore;
use crate::error::{Error, ErrorKind, Result};
use std::panic::Location;
use std::time::Duration;

/// A process's place in the job and the store it shares with the others.
pub struct EnvRendezvous {
    /// This process's rank (`RANK`).
    pub rank: usize,
    /// The number of processes (`WORLD_SIZE`).
    pub world_size: usize,
    /// The store, served by rank 0 at `MASTER_ADDR:MASTER_PORT`.
    pub store: TcpStore,
}

impl EnvRendezvous {
    /// Reads `RANK`, `WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT` from the environment and
    /// connects to the store (rank 0 serves it). `timeout` bounds reaching rank 0 and every
    /// later wait on the store.
    ///
    /// Errors: a variable missing or malformed, rank 0 not reachable within `timeout`.
    #[track_caller]
    pub fn from_env(timeout: Duration) -> Result<EnvRendezvous> {
        Self::from_vars(|k| std::env::var(k).ok(), timeout)
    }

    /// [`EnvRendezvous::from_env`] reading the variables through `var`.
    #[track_caller]
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>, timeout: Duration) -> Result<EnvRendezvous> {
        const OP: &str = "rendezvous (env://)";
        let at = Location::caller();
        let get = |name: &str, what: &str| {
            var(name).ok_or_else(|| {
                Error::at(OP, ErrorKind::Value, format!("{name} is not set: the env:// rendezvous needs {what}"), at)
            })
        };
        let number = |name: &str, what: &str| -> Result<usize> {
            let v = get(name, what)?;
            v.trim()
                .parse()
                .map_err(|_| Error::at(OP, ErrorKind::Value, format!("{name}={v:?} is not a non-negative integer"), at))
        };
        let rank = number("RANK", "this process's rank")?;
        let world_size = number("WORLD_SIZE", "the number of processes")?;
        if rank >= world_size {
            return Err(Error::new(OP, ErrorKind::Value, format!("RANK={rank} is not below WORLD_SIZE={world_size}")));
        }
        let addr = get("MASTER_ADDR", "the address of rank 0")?;
        let port = number("MASTER_PORT", "the port rank 0 listens on")?;
        let Ok(port) = u16::try_from(port) else {
            return Err(Error::new(OP, ErrorKind::Value, format!("MASTER_PORT={port} is not a TCP port")));
        };
        let store = TcpStore::new(addr.trim(), port, rank == 0, timeout).map_err(|e| Error {
            op: OP,
            message: format!("rank {rank} of {world_size}: {}", e.message),
            location: at,
            ..e
        })?;
        Ok(EnvRendezvous { rank, world_size, store })
    }

    /// Shares a blob from rank 0 with every rank under `key`: rank 0 stores `make()`, the
    /// others wait for it; then each rank reports that it has it, and rank 0 returns only once
    /// all have (so its store outlives their reads). Every rank returns the blob.
    ///
    /// Errors: a rank that does not arrive within the store's timeout (named by the key it
    /// did not set), the master gone.
    #[track_caller]
    pub fn share_from_rank0(&self, key: &str, make: impl FnOnce() -> Vec<u8>) -> Result<Vec<u8>> {
        let blob = if self.rank == 0 {
            let blob = make();
            self.store.set(key, &blob)?;
            blob
        } else {
            self.store.get(key)?
        };
        self.store.set(&format!("{key}/received/{}", self.rank), &[])?;
        if self.rank == 0 {
            let keys: Vec<String> = (0..self.world_size).map(|r| format!("{key}/received/{r}")).collect();
            self.store.wait(&keys.iter().map(String::as_str).collect::<Vec<_>>())?;
        }
        Ok(blob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A port nothing listens on right now.
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    /// The rendezvous of `rank` of `world_size` at 127.0.0.1:`port`, as its environment says.
    fn join(rank: usize, world_size: usize, port: u16, timeout: Duration) -> Result<EnvRendezvous> {
        let vars = [
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", world_size.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ];
        EnvRendezvous::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()), timeout)
    }

    #[test]
    fn ranks_share_blobs_through_rank_0() {
        const N: usize = 3;
        let port = free_port();
        // Rank 0 comes last: the others must retry until it listens.
        let threads: Vec<_> = (0..N)
            .rev()
            .map(|rank| {
                std::thread::spawn(move || -> Result<Vec<Vec<u8>>> {
                    if rank == 0 {
                        std::thread::sleep(Duration::from_millis(300));
                    }
                    let rv = join(rank, N, port, Duration::from_secs(20))?;
                    assert_eq!((rv.rank, rv.world_size, rv.store.is_master()), (rank, N, rank == 0));
                    let id = rv.share_from_rank0("nccl_id", || b"unique id of rank 0".to_vec())?;
                    assert_eq!(id, b"unique id of rank 0");
                    rv.store.set(&format!("blob/{rank}"), &vec![rank as u8; rank + 1])?;
                    let blobs = (0..N).map(|r| rv.store.get(&format!("blob/{r}"))).collect::<Result<Vec<_>>>()?;
                    // Rank 0 keeps serving until every rank has read the blobs.
                    rv.share_from_rank0("done", Vec::new)?;
                    Ok(blobs)
                })
            })
            .collect();
        for t in threads {
            let blobs = t.join().unwrap().unwrap();
            assert_eq!(blobs, (0..N).map(|r| vec![r as u8; r + 1]).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_missing_master_fails_within_the_timeout() {
        let port = free_port();
        let start = Instant::now();
        let e = join(1, 2, port, Duration::from_secs(1)).err().expect("no master, yet it connected");
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(5), "took {took:?}");
        assert_eq!(e.kind, ErrorKind::Timeout);
        let want = format!("rank 1 of 2: could not reach the store's master at 127.0.0.1:{port} within 1s");
        assert!(e.message.contains(&want), "{e}");
    }

    #[test]
    fn a_missing_worker_fails_rank_0_within_the_timeout() {
        let rv = join(0, 2, free_port(), Duration::from_secs(1)).unwrap();
        let start = Instant::now();
        let e = rv.share_from_rank0("nccl_id", || vec![1, 2]).expect_err("rank 1 never came, yet rank 0 went on");
        assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert!(e.message.contains("key \"nccl_id/received/1\" was not set within 1s"), "{e}");
    }

    #[test]
    fn missing_or_bad_variables_are_named() {
        let only = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let cases: [(&'static [(&str, &str)], &str); 4] = [
            (&[("WORLD_SIZE", "2")], "RANK is not set: the env:// rendezvous needs this process's rank"),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")], "RANK=0 is not below WORLD_SIZE=0"),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")],
                "MASTER_ADDR is not set: the env:// rendezvous needs the address of rank 0",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "70000")],
                "MASTER_PORT=70000 is not a TCP port",
            ),
        ];
        for (vars, want) in cases {
            let e = EnvRendezvous::from_vars(only(vars), Duration::from_secs(1)).err().expect(want);
            assert!(e.message.contains(want), "{e}");
        }
    }
}
