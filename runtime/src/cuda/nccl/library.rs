//! Finding and opening libnccl before anything calls into it.
//!
//! kiln opens NCCL itself ([`super::api::NcclApi`]), trying in order:
//! 1. the file `KILN_NCCL_LIBRARY` names, when that variable is set (and nothing else then);
//! 2. `libnccl.so.2` (NCCL's own file name, its SONAME) and `libnccl.so`, searched by the
//!    dynamic linker (`LD_LIBRARY_PATH`, the system paths);
//! 3. a `libnccl.so.2` in the folders PyPI's wheels and distributions use: `nvidia/nccl/lib`
//!    (and `nvidia/cu13/lib`, `nvidia/cu12/lib`) under Python's site-packages, and
//!    `/usr/lib/x86_64-linux-gnu`, `/usr/local/cuda/lib64`, `/usr/lib64`, by absolute path.
//!
//! So `pip install nvidia-nccl-cu13` is enough: no symlink, no `LD_LIBRARY_PATH`. A library that
//! is missing, lacks a function or is older than 2.10 is an error of kind
//! [`CudaErrorKind::NoNccl`], never a panic.

use super::super::error::{CudaError, CudaErrorKind, Result};
use super::api::NcclApi;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The oldest NCCL kiln uses: `ncclAvg` arrived in 2.10.
const MIN_VERSION: i32 = 21000;

/// The variable naming one libnccl file to open instead of searching.
pub const NCCL_LIBRARY_VAR: &str = "KILN_NCCL_LIBRARY";

/// The opened libnccl and its version, opened once per process.
fn loaded() -> &'static std::result::Result<(NcclApi, i32), String> {
    static LOADED: OnceLock<std::result::Result<(NcclApi, i32), String>> = OnceLock::new();
    LOADED.get_or_init(|| load(std::env::var_os(NCCL_LIBRARY_VAR).map(PathBuf::from)))
}

/// The opened libnccl's functions, or an error of kind [`CudaErrorKind::NoNccl`] naming `op`
/// and what is missing.
pub(crate) fn api(op: &'static str) -> Result<&'static NcclApi> {
    loaded().as_ref().map(|(api, _)| api).map_err(|why| CudaError::new(op, CudaErrorKind::NoNccl, why.clone()))
}

/// NCCL's version as one number (`major * 10000 + minor * 100 + patch`, e.g. 22703 for
/// 2.27.3), or an error of kind [`CudaErrorKind::NoNccl`] naming `op` and what is missing.
pub fn nccl_version(op: &'static str) -> Result<i32> {
    loaded().as_ref().map(|(_, v)| *v).map_err(|why| CudaError::new(op, CudaErrorKind::NoNccl, why.clone()))
}

/// Whether a usable libnccl (2.10 or newer) can be loaded.
pub fn nccl_available() -> bool {
    loaded().is_ok()
}

/// The file libnccl was opened from, when it was.
pub fn nccl_library_path() -> Option<PathBuf> {
    loaded().as_ref().ok().map(|(api, _)| api.path.clone())
}

/// Opens `explicit` when given, else the first of the candidates that opens, and checks its
/// version.
fn load(explicit: Option<PathBuf>) -> std::result::Result<(NcclApi, i32), String> {
    let api = match explicit {
        Some(path) => NcclApi::open(&path)
            .map_err(|e| format!("{NCCL_LIBRARY_VAR} names a library that does not open as NCCL: {e}"))?,
        None => {
            let by_name = ["libnccl.so.2", "libnccl.so"].map(PathBuf::from);
            let mut failures = Vec::new();
            let opened = by_name
                .into_iter()
                .chain(found_elsewhere())
                .find_map(|p| NcclApi::open(&p).map_err(|e| failures.push(e)).ok());
            opened.ok_or_else(|| missing_message(&failures))?
        }
    };
    let version = api.version().map_err(|r| format!("ncclGetVersion of {} failed: {r:?}", api.path.display()))?;
    if version < MIN_VERSION {
        return Err(format!(
            "{} is NCCL {}, too old: kiln needs NCCL 2.10 or newer",
            api.path.display(),
            version_text(version)
        ));
    }
    Ok((api, version))
}

/// `2.27.3` for 22703 (NCCL's numbering since 2.9).
pub fn version_text(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// The message when no candidate opened: how to install NCCL, and why each file that exists
/// failed (`failures`, one line per candidate; those that merely are not there are left out).
fn missing_message(failures: &[String]) -> String {
    let base = "NCCL (libnccl.so.2) not found on LD_LIBRARY_PATH, the system paths or Python's site-packages";
    let seen: Vec<&String> = failures.iter().filter(|f| !f.contains("No such file")).collect();
    let mut text = format!(
        "{base}: install it (`pip install nvidia-nccl-cu13`, or apt's libnccl2) or name the file in {NCCL_LIBRARY_VAR}"
    );
    for f in seen {
        text.push_str("; ");
        text.push_str(f);
    }
    text
}

/// `libnccl.so.2` files in the folders PyPI's NCCL wheels and distributions use.
fn found_elsewhere() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let script = "import site,sys\ntry:\n    print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))\nexcept Exception:\n    print('\\n'.join(sys.path))";
    if let Ok(out) =
        std::process::Command::new("python3").args(["-c", script]).stderr(std::process::Stdio::null()).output()
    {
        for site in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()) {
            dirs.extend(
                ["nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"]
                    .iter()
                    .map(|sub| PathBuf::from(site).join(sub)),
            );
        }
    }
    dirs.extend(["/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", "/usr/lib64"].iter().map(PathBuf::from));
    let mut found: Vec<PathBuf> = dirs.into_iter().map(|d| d.join("libnccl.so.2")).filter(|f| f.exists()).collect();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_says_how_to_install_and_why_a_file_failed() {
        let none = missing_message(&[]);
        assert!(
            none.contains("NCCL (libnccl.so.2) not found")
                && none.contains("pip install nvidia-nccl-cu13")
                && none.contains(NCCL_LIBRARY_VAR),
            "{none}"
        );
        let seen = missing_message(&[
            "libnccl.so: cannot open shared object file: No such file or directory".into(),
            "/x/libnccl.so.2 has no ncclGetVersion".into(),
        ]);
        assert!(seen.ends_with("; /x/libnccl.so.2 has no ncclGetVersion") && !seen.contains("No such file"), "{seen}");
        assert_eq!(version_text(22703), "2.27.3");
    }

    #[test]
    fn a_named_file_that_is_not_nccl_is_an_error_naming_it() {
        let e = load(Some(PathBuf::from("/no/such/libnccl.so.2"))).err().unwrap();
        assert!(
            e.starts_with("KILN_NCCL_LIBRARY names a library that does not open as NCCL: /no/such/libnccl.so.2"),
            "{e}"
        );
        // The C library opens, but is not NCCL: the first missing function is named.
        let e = load(Some(PathBuf::from("libc.so.6"))).err().unwrap();
        assert!(e.contains("libc.so.6 has no ncclGetVersion (not an NCCL library?)"), "{e}");
    }

    #[test]
    fn an_installed_nccl_opens_where_it_lies_or_its_absence_is_an_error() {
        match found_elsewhere().first() {
            Some(file) => {
                // A wheel's libnccl.so.2, by absolute path: no symlink, no LD_LIBRARY_PATH.
                let (api, version) = load(Some(file.clone())).unwrap();
                assert!(version >= MIN_VERSION, "{version}");
                let mut id = cudarc::nccl::sys::ncclUniqueId { internal: [0; 128] };
                // SAFETY: `id` is a valid out-parameter; ncclGetUniqueId needs no device.
                let r = unsafe { (api.get_unique_id)(&mut id) };
                assert_eq!(r, cudarc::nccl::sys::ncclResult_t::ncclSuccess);
                assert!(id.internal.iter().any(|&b| b != 0));
                // The process-wide search finds a library too (this one or another).
                assert!(nccl_version("test").unwrap() >= MIN_VERSION && nccl_library_path().is_some());
            }
            None if !nccl_available() => {
                let e = nccl_version("init_process_group").unwrap_err();
                assert_eq!((e.op, e.kind), ("init_process_group", CudaErrorKind::NoNccl));
                assert!(e.message.contains("NCCL (libnccl.so.2) not found"), "{e}");
            }
            None => println!("libnccl opens by name from {:?}; no wheel folder to test", nccl_library_path()),
        }
    }
}
