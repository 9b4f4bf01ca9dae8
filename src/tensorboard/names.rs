//! The names torch's writer gives: an event file's
//! (`events.out.tfevents.{secs}.{host}.{pid}.{n}{suffix}`) and the default run folder
//! (`runs/{Mon}{DD}_{HH}-{MM}-{SS}_{host}{comment}`, in local time); and the wall time events
//! carry.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now (an event's `wall_time`, Python's `time.time()`).
pub(crate) fn wall_time() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The name of the next event file this process opens: torch's, whose last number counts the
/// files the process opened, so two writers of one folder never share a file.
pub(crate) fn event_file_name(suffix: &str) -> String {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    format!("events.out.tfevents.{:010}.{}.{}.{n}{suffix}", wall_time() as u64, hostname(), std::process::id())
}

/// torch's default run folder for `SummaryWriter(comment=comment)`: `runs/` and the local
/// date and time (`Dec08_14-03-59`), the host name and the comment.
pub(crate) fn default_log_dir(comment: &str) -> PathBuf {
    PathBuf::from("runs").join(format!("{}_{}{comment}", local_time_stamp(), hostname()))
}

/// The machine's host name (Python's `socket.gethostname()`), `localhost` when it has none.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, which is the size passed.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..len]) {
        name if ok && !name.is_empty() => name.into_owned(),
        _ => "localhost".to_string(),
    }
}

/// Python's `%b`: the months' abbreviations.
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// The local date and time as Python's `strftime("%b%d_%H-%M-%S")` writes it.
fn local_time_stamp() -> String {
    let now = wall_time() as libc::time_t;
    // SAFETY: `tm` is plain data for which all zeros is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers address live locals; `localtime_r` is the thread-safe form.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return "Jan01_00-00-00".to_string();
    }
    let month = MONTHS[tm.tm_mon.clamp(0, 11) as usize];
    format!("{month}{:02}_{:02}-{:02}-{:02}", tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_torch() {
        let a = event_file_name(".x");
        let b = event_file_name(".x");
        let parts: Vec<&str> = a.split('.').collect();
        assert_eq!(&parts[..3], ["events", "out", "tfevents"], "{a}");
        assert_eq!(parts[3].len(), 10, "{a}");
        assert!(a.ends_with(".x") && a != b, "{a} {b}");
        assert!(a.contains(&format!(".{}.", std::process::id())), "{a}");
        let dir = default_log_dir("_lr0.1");
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(dir.starts_with("runs") && name.ends_with(&format!("_{}_lr0.1", hostname())), "{dir:?}");
        let stamp = &name[..14];
        assert!(MONTHS.iter().any(|m| stamp.starts_with(m)), "{stamp}");
        assert_eq!((&stamp[5..6], &stamp[8..9], &stamp[11..12]), ("_", "-", "-"), "{stamp}");
    }
}
