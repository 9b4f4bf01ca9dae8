//! The store's messages on the wire: a request (set a key, or get one waiting up to a time) and
//! its reply, as length-prefixed little-endian frames.

use std::io::{self, Read, Write};
use std::time::Duration;

/// The largest value the store carries (a guard against a stray connection's garbage).
const MAX_VALUE: u64 = 1 << 30;
/// The longest key.
const MAX_KEY: u32 = 1 << 16;

/// What a client asks.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Request {
    /// Store `value` under `key` (replacing an earlier one).
    Set { key: String, value: Vec<u8> },
    /// The value of `key`, waiting up to `wait` for some client to set it.
    Get { key: String, wait: Duration },
}

/// What the server answers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// The key is set.
    Done,
    /// The key's value.
    Value(Vec<u8>),
    /// The key was not set within the wait.
    Missing,
}

/// Writes one request.
pub(super) fn write_request(w: &mut impl Write, request: &Request) -> io::Result<()> {
    let mut frame = Vec::new();
    match request {
        Request::Set { key, value } => {
            frame.push(0);
            put_bytes(&mut frame, key.as_bytes());
            put_bytes(&mut frame, value);
        }
        Request::Get { key, wait } => {
            frame.push(1);
            put_bytes(&mut frame, key.as_bytes());
            frame.extend_from_slice(&(wait.as_millis().min(u64::MAX as u128) as u64).to_le_bytes());
        }
    }
    w.write_all(&frame)?;
    w.flush()
}

/// Reads one request.
pub(super) fn read_request(r: &mut impl Read) -> io::Result<Request> {
    let tag = read_u8(r)?;
    let key = String::from_utf8(get_bytes(r, MAX_KEY as u64)?).map_err(|_| invalid("a key that is not UTF-8"))?;
    match tag {
        0 => Ok(Request::Set { key, value: get_bytes(r, MAX_VALUE)? }),
        1 => Ok(Request::Get { key, wait: Duration::from_millis(read_u64(r)?) }),
        t => Err(invalid(&format!("unknown request {t}"))),
    }
}

/// Writes one reply.
pub(super) fn write_reply(w: &mut impl Write, reply: &Reply) -> io::Result<()> {
    let mut frame = Vec::new();
    match reply {
        Reply::Done => frame.push(0),
        Reply::Value(v) => {
            frame.push(1);
            put_bytes(&mut frame, v);
        }
        Reply::Missing => frame.push(2),
    }
    w.write_all(&frame)?;
    w.flush()
}

/// Reads one reply.
pub(super) fn read_reply(r: &mut impl Read) -> io::Result<Reply> {
    match read_u8(r)? {
        0 => Ok(Reply::Done),
        1 => Ok(Reply::Value(get_bytes(r, MAX_VALUE)?)),
        2 => Ok(Reply::Missing),
        t => Err(invalid(&format!("unknown reply {t}"))),
    }
}

/// Appends `bytes` with its length (u64) in front.
fn put_bytes(frame: &mut Vec<u8>, bytes: &[u8]) {
    frame.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    frame.extend_from_slice(bytes);
}

/// Reads a length-prefixed byte string of at most `max` bytes.
fn get_bytes(r: &mut impl Read, max: u64) -> io::Result<Vec<u8>> {
    let len = read_u64(r)?;
    if len > max {
        return Err(invalid(&format!("a field of {len} bytes (at most {max})")));
    }
    let mut buf = vec![0; len as usize];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// Reads one byte.
fn read_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

/// Reads a little-endian u64.
fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// An `InvalidData` error: the peer does not speak the store's protocol.
fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a kiln store message: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let requests = [
            Request::Set { key: "nccl/id".into(), value: vec![1, 2, 3] },
            Request::Get { key: "k".into(), wait: Duration::from_millis(1500) },
        ];
        for request in requests {
            let mut buf = Vec::new();
            write_request(&mut buf, &request).unwrap();
            assert_eq!(read_request(&mut buf.as_slice()).unwrap(), request);
        }
        for reply in [Reply::Done, Reply::Value(vec![9; 5]), Reply::Missing] {
            let mut buf = Vec::new();
            write_reply(&mut buf, &reply).unwrap();
            assert_eq!(read_reply(&mut buf.as_slice()).unwrap(), reply);
        }
        let e = read_request(&mut [7u8, 0, 0, 0, 0, 0, 0, 0, 0].as_slice()).unwrap_err();
        assert!(e.to_string().contains("unknown request 7"), "{e}");
        let e = read_reply(&mut [1u8, 255, 255, 255, 255, 255, 255, 255, 255].as_slice()).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }
}
