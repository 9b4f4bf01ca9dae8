//! Bounded waits on NCCL: communicators are made non-blocking (`ncclConfig_t::blocking = 0`),
//! so `ncclCommInitRankConfig` and the collectives return at once (possibly with
//! `ncclInProgress`) and kiln polls `ncclCommGetAsyncError` until NCCL is done, a failure, or
//! the process group's timeout. A rank whose peers never join fails with a clear error instead
//! of hanging inside `ncclCommInitRank` (PyTorch does the same with
//! `TORCH_NCCL_USE_COMM_NONBLOCKING` and its init timeout).

use super::super::error::{CudaError, CudaErrorKind, Result};
use cudarc::nccl::sys;
use std::time::{Duration, Instant};

/// `NCCL_CONFIG_UNDEF_INT` of nccl.h: "not set, use NCCL's default".
const UNDEF_INT: i32 = i32::MIN;

/// nccl.h's magic number for a filled `ncclConfig_t`.
const CONFIG_MAGIC: u32 = 0xcafe_beef;

/// The longest sleep between two polls (they start at once and back off to this).
const MAX_POLL_SLEEP: Duration = Duration::from_millis(2);

/// `NCCL_CONFIG_INITIALIZER` with `blocking = 0`, for a library of NCCL `version` (its
/// `ncclGetVersion` code): NCCL reads the fields that version knows, all others stay unset.
pub(crate) fn non_blocking_config(version: i32) -> sys::ncclConfig_t {
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: CONFIG_MAGIC,
        version: version as u32,
        blocking: 0,
        cgaClusterSize: UNDEF_INT,
        minCTAs: UNDEF_INT,
        maxCTAs: UNDEF_INT,
        netName: std::ptr::null(),
        splitShare: UNDEF_INT,
        trafficClass: UNDEF_INT,
        commName: std::ptr::null(),
        collnetEnable: UNDEF_INT,
        CTAPolicy: UNDEF_INT,
        shrinkShare: UNDEF_INT,
        nvlsCTAs: UNDEF_INT,
        nChannelsPerNetPeer: UNDEF_INT,
        nvlinkCentricSched: UNDEF_INT,
        graphUsageMode: UNDEF_INT,
        numRmaCtx: UNDEF_INT,
        maxP2pPeers: UNDEF_INT,
    }
}

/// Polls `state` (a communicator's `ncclCommGetAsyncError`) until it is no longer
/// `ncclInProgress`: Ok on `ncclSuccess`; an error naming `what` on any other result, or
/// (kind [`CudaErrorKind::Timeout`]) when `timeout` passes first.
pub(crate) fn wait_ready(
    op: &'static str,
    what: &str,
    timeout: Duration,
    mut state: impl FnMut() -> sys::ncclResult_t,
) -> Result<()> {
    let start = Instant::now();
    let mut sleep = Duration::from_micros(10);
    loop {
        match state() {
            sys::ncclResult_t::ncclSuccess => return Ok(()),
            sys::ncclResult_t::ncclInProgress => {}
            r => {
                return Err(CudaError::new(
                    op,
                    CudaErrorKind::Driver,
                    format!("{what} failed: {}", super::comm::result_name(r)),
                ))
            }
        }
        if start.elapsed() >= timeout {
            return Err(CudaError::new(
                op,
                CudaErrorKind::Timeout,
                format!("{what} did not finish within {timeout:?}: a peer rank has not joined, has died, or cannot be reached"),
            ));
        }
        std::thread::sleep(sleep);
        sleep = (sleep * 2).min(MAX_POLL_SLEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::ncclResult_t::{ncclInProgress, ncclInternalError, ncclSuccess};

    #[test]
    fn the_config_is_non_blocking_and_leaves_the_rest_to_nccl() {
        let c = non_blocking_config(22703);
        assert_eq!(
            (c.size, c.magic, c.version, c.blocking),
            (std::mem::size_of::<sys::ncclConfig_t>(), 0xcafebeef, 22703, 0)
        );
        assert_eq!(
            [c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare, c.collnetEnable, c.nvlsCTAs, c.maxP2pPeers],
            [i32::MIN; 7]
        );
        assert!(c.netName.is_null() && c.commName.is_null());
    }

    #[test]
    fn waits_end_on_success_on_failure_and_at_the_timeout() {
        let mut calls = 0;
        let ok = wait_ready("test", "setup", Duration::from_secs(5), || {
            calls += 1;
            if calls < 4 {
                ncclInProgress
            } else {
                ncclSuccess
            }
        });
        assert_eq!((ok, calls), (Ok(()), 4));

        let e = wait_ready("test", "setup", Duration::from_secs(5), || ncclInternalError).unwrap_err();
        assert_eq!(e.kind, CudaErrorKind::Driver);
        assert!(e.message.contains("setup failed: ncclInternalError"), "{e}");

        let start = Instant::now();
        let e =
            wait_ready("test", "NCCL communicator setup", Duration::from_millis(60), || ncclInProgress).unwrap_err();
        let waited = start.elapsed();
        assert_eq!(e.kind, CudaErrorKind::Timeout);
        assert!(e.message.contains("NCCL communicator setup did not finish within 60ms"), "{e}");
        assert!(waited >= Duration::from_millis(60) && waited < Duration::from_secs(2), "{waited:?}");
    }
}
