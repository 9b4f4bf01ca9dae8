//! Finding libnccl before anything calls into it.
//!
//! cudarc opens NCCL by file name only (`libnccl.so`, `libnccl.so.13`, `libnccl.so.12`, …,
//! searched by the dynamic linker: `LD_LIBRARY_PATH`, the system paths) and *panics* when none
//! opens or a symbol is missing. kiln asks [`cudarc::nccl::sys::is_culib_present`] first and
//! turns absence into an error. NCCL's own file is `libnccl.so.2` (its SONAME), a name cudarc
//! does not try: a folder needs a `libnccl.so` next to it (a symlink; the CUDA toolkit's and
//! apt's `libnccl-dev` have one, PyPI's `nvidia-nccl-cu13`/`-cu12` wheels do not). When no
//! name opens, the error says where a `libnccl.so.2` was seen, so the fix is one symlink.

use super::super::error::{CudaError, CudaErrorKind, Result};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The oldest NCCL kiln uses: `ncclAvg` arrived in 2.10.
const MIN_VERSION: i32 = 21000;

/// NCCL's version as one number (`major * 10000 + minor * 100 + patch`, e.g. 22703 for
/// 2.27.3), or an error of kind [`CudaErrorKind::NoNccl`] naming `op` and what is missing.
pub fn nccl_version(op: &'static str) -> Result<i32> {
    static VERSION: OnceLock<std::result::Result<i32, String>> = OnceLock::new();
    VERSION.get_or_init(load).clone().map_err(|why| CudaError::new(op, CudaErrorKind::NoNccl, why))
}

/// Whether a usable libnccl (2.10 or newer) can be loaded.
pub fn nccl_available() -> bool {
    nccl_version("nccl_available").is_ok()
}

/// Opens libnccl by cudarc's names and reads its version.
fn load() -> std::result::Result<i32, String> {
    // SAFETY: `is_culib_present` only tries to dlopen the library by cudarc's candidate names.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err(missing_message(&found_elsewhere()));
    }
    // A library without a symbol cudarc looks up panics inside cudarc: contain it.
    let version = std::panic::catch_unwind(cudarc::nccl::result::get_nccl_version)
        .map_err(|_| "libnccl was opened but ncclGetVersion could not be called (not an NCCL library?)".to_string())?
        .map_err(|e| format!("ncclGetVersion failed: {:?}", e.0))?;
    if version < MIN_VERSION {
        return Err(format!("libnccl {} is too old: kiln needs NCCL 2.10 or newer", version_text(version)));
    }
    Ok(version)
}

/// `2.27.3` for 22703 (NCCL's numbering since 2.9).
pub fn version_text(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// The message for a libnccl cudarc cannot open, pointing at `found` files when there are.
fn missing_message(found: &[PathBuf]) -> String {
    let base = "NCCL (libnccl.so) not found on LD_LIBRARY_PATH or the system paths";
    match found.first() {
        None => format!("{base}: install it (`pip install nvidia-nccl-cu13`, or apt's libnccl2 + libnccl-dev) and put the folder holding libnccl.so on LD_LIBRARY_PATH"),
        Some(f) => {
            let dir = f.parent().map(|d| d.display().to_string()).unwrap_or_default();
            format!(
                "{base}; found {} but cudarc opens NCCL as libnccl.so (or libnccl.so.13/.12), not libnccl.so.2: \
                 `ln -s {} SOMEDIR/libnccl.so` and put SOMEDIR (and {dir}) on LD_LIBRARY_PATH",
                f.display(),
                f.display()
            )
        }
    }
}

/// `libnccl.so.2` files in the folders PyPI's NCCL wheels and distributions use.
fn found_elsewhere() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let script = "import site,sys\ntry:\n    print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))\nexcept Exception:\n    print('\\n'.join(sys.path))";
    if let Ok(out) = std::process::Command::new("python3").args(["-c", script]).stderr(std::process::Stdio::null()).output() {
        for site in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()) {
            dirs.extend(["nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"].iter().map(|sub| PathBuf::from(site).join(sub)));
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
    fn the_error_says_how_to_install_or_link() {
        let none = missing_message(&[]);
        assert!(none.contains("NCCL (libnccl.so) not found") && none.contains("pip install nvidia-nccl-cu13"), "{none}");
        let pip = missing_message(&[PathBuf::from("/venv/nvidia/nccl/lib/libnccl.so.2")]);
        assert!(pip.contains("found /venv/nvidia/nccl/lib/libnccl.so.2") && pip.contains("ln -s /venv/nvidia/nccl/lib/libnccl.so.2 SOMEDIR/libnccl.so"), "{pip}");
        assert_eq!(version_text(22703), "2.27.3");
    }

    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        // SAFETY: only tries to dlopen the candidate names.
        if unsafe { cudarc::nccl::sys::is_culib_present() } {
            return println!("libnccl is present; the missing-library error is not reachable");
        }
        let e = nccl_version("init_process_group").unwrap_err();
        assert_eq!((e.op, e.kind), ("init_process_group", CudaErrorKind::NoNccl));
        assert!(e.message.contains("NCCL (libnccl.so) not found"), "{e}");
        assert!(!nccl_available());
    }
}
