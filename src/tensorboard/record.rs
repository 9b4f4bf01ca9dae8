//! TensorBoard's record framing (TFRecord), both ways: each record is its data's length (`u64`,
//! little-endian), the masked CRC-32C of those 8 bytes (`u32`, little-endian), the data, and
//! the masked CRC-32C of the data. CRC-32C is Castagnoli's polynomial (`crc`'s
//! `CRC_32_ISCSI`); the mask, `((crc >> 15) | (crc << 17)) + 0xa282ead8` (wrapping), is
//! TensorFlow's, so that CRCs of data holding CRCs stay well spread. [`read_events`] checks
//! every record's two CRCs and decodes the events.

use super::proto::Event;
use crate::error::{Error, ErrorKind, Result};
use crc::{Crc, CRC_32_ISCSI};
use prost::Message;
use std::io::{self, Write};
use std::panic::Location;
use std::path::Path;

/// CRC-32C (Castagnoli, as iSCSI uses it).
const CRC32C: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);

/// The masked CRC-32C of `data`.
pub(crate) fn masked_crc(data: &[u8]) -> u32 {
    CRC32C.checksum(data).rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Writes `data` as one record.
pub(crate) fn write_record(out: &mut impl Write, data: &[u8]) -> io::Result<()> {
    let len = (data.len() as u64).to_le_bytes();
    out.write_all(&len)?;
    out.write_all(&masked_crc(&len).to_le_bytes())?;
    out.write_all(data)?;
    out.write_all(&masked_crc(data).to_le_bytes())
}

/// The data of each record in `bytes`, in order, or what is wrong with the first bad record
/// (truncated, or a CRC that does not match), naming its byte offset.
pub(crate) fn records(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().expect("4 bytes"));
        if rest.len() < 12 {
            return Err(format!("the record at byte {at} is truncated: {} bytes of its 12-byte header", rest.len()));
        }
        let (stored, computed) = (word(8), masked_crc(&rest[..8]));
        if stored != computed {
            return Err(format!(
                "the record at byte {at} has a bad length CRC: stored {stored:#010x}, computed {computed:#010x}"
            ));
        }
        let len = u64::from_le_bytes(rest[..8].try_into().expect("8 bytes"));
        let end = usize::try_from(len).ok().and_then(|l| l.checked_add(16)).filter(|&e| e <= rest.len());
        let Some(end) = end else {
            return Err(format!(
                "the record at byte {at} is truncated: {len} bytes of data announced, {} bytes left",
                rest.len() - 12
            ));
        };
        let data = &rest[12..end - 4];
        let (stored, computed) = (word(end - 4), masked_crc(data));
        if stored != computed {
            return Err(format!(
                "the record at byte {at} has a bad data CRC: stored {stored:#010x}, computed {computed:#010x}"
            ));
        }
        out.push(data);
        at += end;
    }
    Ok(out)
}

/// The events of the event file at `path`, in order (TensorFlow's `summary_iterator`), each
/// record's length and data CRCs checked: a truncated or corrupted record, or one that is not
/// an `Event`, is an error naming the file and the record's byte offset.
#[track_caller]
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>> {
    const OP: &str = "read_events";
    let at = Location::caller();
    let path = path.as_ref();
    let fail = |message: String| Error::at(OP, ErrorKind::Io, format!("{}: {message}", path.display()), at);
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")).caused_by(e))?;
    let mut offset = 0;
    let mut events = Vec::new();
    for data in records(&bytes).map_err(fail)? {
        let event = Event::decode(data)
            .map_err(|e| fail(format!("the record at byte {offset} is not an Event: {e}")).caused_by(e))?;
        events.push(event);
        offset += data.len() + 16;
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC-32C check value of the CRC catalogue ("123456789" → 0xE3069283), and its
    /// mask by TensorFlow's `crc32c::Mask`, `((crc >> 15) | (crc << 17)) + 0xa282ead8`,
    /// worked by hand.
    #[test]
    fn crc32c_matches_the_known_check_value() {
        assert_eq!(CRC32C.checksum(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
        // RFC 3720 (iSCSI), B.4: 32 bytes of zeros.
        assert_eq!(CRC32C.checksum(&[0u8; 32]), 0x8a91_36aa);
    }

    /// Records written are read back; any flipped byte, or a cut, is reported at its record.
    #[test]
    fn records_round_trip_and_corruption_is_found() {
        let mut file = Vec::new();
        write_record(&mut file, b"first").unwrap();
        write_record(&mut file, b"").unwrap();
        write_record(&mut file, b"third record").unwrap();
        assert_eq!(file.len(), 3 * 16 + 5 + 12);
        assert_eq!(records(&file).unwrap(), vec![&b"first"[..], b"", b"third record"]);
        for i in 0..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x20;
            let e = records(&bad).expect_err("a flipped byte is found");
            let record_at = if i < 21 {
                0
            } else if i < 37 {
                21
            } else {
                37
            };
            assert!(e.starts_with(&format!("the record at byte {record_at} ")), "byte {i}: {e}");
        }
        let e = records(&file[..file.len() - 1]).unwrap_err();
        assert!(e.contains("record at byte 37 is truncated"), "{e}");
    }
}
