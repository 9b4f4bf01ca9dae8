//! NCCL's C functions, opened by kiln itself from a libnccl file it finds ([`super::library`]).
//!
//! cudarc's NCCL functions open the library by file name only (`libnccl.so`, `libnccl.so.13`,
//! …) and never by NCCL's own file name `libnccl.so.2` or an absolute path, so a PyPI wheel
//! (`nvidia-nccl-cu13`/`-cu12`, which ships only `libnccl.so.2`) would need a symlink and an
//! `LD_LIBRARY_PATH` set before the process starts. kiln takes only the *types* from
//! `cudarc::nccl::sys` and loads the dozen functions it calls from whichever file
//! [`super::library`] picked, so a wheel works as installed.

use cudarc::nccl::sys::{
    cudaStream_t, ncclComm_t, ncclConfig_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};

/// The functions of one opened libnccl (nccl.h's signatures), and the library kept open for
/// as long as they may be called (the process: [`super::library`] keeps it in a `OnceLock`).
pub struct NcclApi {
    /// The file it was opened from (a name the dynamic linker searched, or an absolute path).
    pub path: PathBuf,
    _lib: libloading::Library,
    /// `ncclGetVersion(int*)`.
    pub get_version: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    /// `ncclGetErrorString(ncclResult_t)`: a static string.
    pub get_error_string: unsafe extern "C" fn(ncclResult_t) -> *const c_char,
    /// `ncclGetUniqueId(ncclUniqueId*)`.
    pub get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> ncclResult_t,
    /// `ncclCommInitRankConfig(comm*, nranks, id, rank, config*)`.
    pub comm_init_rank_config:
        unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int, *mut ncclConfig_t) -> ncclResult_t,
    /// `ncclCommGetAsyncError(comm, ncclResult_t*)`.
    pub comm_get_async_error: unsafe extern "C" fn(ncclComm_t, *mut ncclResult_t) -> ncclResult_t,
    /// `ncclCommAbort(comm)`.
    pub comm_abort: unsafe extern "C" fn(ncclComm_t) -> ncclResult_t,
    /// `ncclCommDestroy(comm)`.
    pub comm_destroy: unsafe extern "C" fn(ncclComm_t) -> ncclResult_t,
    /// `ncclAllReduce(send, recv, count, type, op, comm, stream)`.
    pub all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    /// `ncclBroadcast(send, recv, count, type, root, comm, stream)`.
    pub broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    /// `ncclAllGather(send, recv, sendcount, type, comm, stream)`.
    pub all_gather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
    /// `ncclReduceScatter(send, recv, recvcount, type, op, comm, stream)`.
    pub reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> ncclResult_t,
}

/// Reads the symbol `name` of `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the C signature the library's symbol `name` has.
unsafe fn symbol<F: Copy>(lib: &libloading::Library, path: &Path, name: &str) -> Result<F, String> {
    // SAFETY: the caller vouches for the type; the pointer is used only while `lib` stays open
    // (NcclApi owns both).
    unsafe { lib.get::<F>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{} has no {name} (not an NCCL library?): {e}", path.display()))
}

impl NcclApi {
    /// Opens `path` (a bare file name searched by the dynamic linker, or a path) and reads
    /// every function kiln calls. An error names the file and the first thing missing.
    pub fn open(path: &Path) -> Result<NcclApi, String> {
        // SAFETY: opening libnccl runs its initialisers, which only set up NCCL's own state
        // (NCCL links its CUDA runtime statically and touches no device until asked).
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: for every `symbol` call, each type is the signature nccl.h declares for that
        // name (the same signatures cudarc's generated bindings use).
        unsafe {
            Ok(NcclApi {
                get_version: symbol(&lib, path, "ncclGetVersion")?,
                get_error_string: symbol(&lib, path, "ncclGetErrorString")?,
                get_unique_id: symbol(&lib, path, "ncclGetUniqueId")?,
                comm_init_rank_config: symbol(&lib, path, "ncclCommInitRankConfig")?,
                comm_get_async_error: symbol(&lib, path, "ncclCommGetAsyncError")?,
                comm_abort: symbol(&lib, path, "ncclCommAbort")?,
                comm_destroy: symbol(&lib, path, "ncclCommDestroy")?,
                all_reduce: symbol(&lib, path, "ncclAllReduce")?,
                broadcast: symbol(&lib, path, "ncclBroadcast")?,
                all_gather: symbol(&lib, path, "ncclAllGather")?,
                reduce_scatter: symbol(&lib, path, "ncclReduceScatter")?,
                path: path.to_path_buf(),
                _lib: lib,
            })
        }
    }

    /// NCCL's version code (`major * 10000 + minor * 100 + patch`).
    pub fn version(&self) -> Result<i32, ncclResult_t> {
        let mut v: c_int = 0;
        // SAFETY: `v` is a valid out-parameter.
        match unsafe { (self.get_version)(&mut v) } {
            ncclResult_t::ncclSuccess => Ok(v),
            r => Err(r),
        }
    }
}
