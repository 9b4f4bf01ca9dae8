//! Finding and loading NVRTC, CUDA's runtime compiler.
//!
//! cudarc opens NVRTC by file name only (`libnvrtc.so`, `libnvrtc.so.13`, …, searched by the
//! dynamic linker: `LD_LIBRARY_PATH`, the system paths) and panics when none opens. kiln looks,
//! in order, at:
//!
//! 1. `KILN_NVRTC_PATH`: the library file itself, or a folder holding `libnvrtc.so*`;
//! 2. the names cudarc tries (so `LD_LIBRARY_PATH` works);
//! 3. the `lib` folders of PyPI's NVRTC wheels (`nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`,
//!    `nvidia/cu12/lib`) in the site-packages of `$VIRTUAL_ENV` and of `python3`, then
//!    `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64`.
//!
//! A library found by path is opened with `dlopen` by its absolute path and kept open; the
//! dynamic linker then answers cudarc's later `dlopen("libnvrtc.so.13")` with that same library,
//! because a loaded library matches its `SONAME`.

use super::error::{CudaError, CudaErrorKind, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The NVRTC this process uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// NVRTC's version (major, minor).
    pub version: (i32, i32),
    /// The file opened by path, or `None` when the dynamic linker found it by name.
    pub path: Option<PathBuf>,
}

/// NVRTC, loaded once; an error (kind `NoNvrtc`) saying where kiln looked when it is missing.
pub fn nvrtc(op: &'static str) -> Result<&'static NvrtcInfo> {
    static NVRTC: OnceLock<std::result::Result<NvrtcInfo, String>> = OnceLock::new();
    NVRTC.get_or_init(load).as_ref().map_err(|why| CudaError::new(op, CudaErrorKind::NoNvrtc, why.clone()))
}

/// Whether NVRTC can be loaded.
pub fn nvrtc_available() -> bool {
    nvrtc("nvrtc_available").is_ok()
}

/// For tests that compile kernels with NVRTC (no GPU needed): whether NVRTC loads here. When it
/// does not, `test` prints that it skips and this returns false, unless `KILN_REQUIRE_NVRTC=1`
/// (set by CI, which installs NVRTC) makes a missing NVRTC a failure: the compile checks never
/// pass silently where they are expected to run.
pub fn nvrtc_for_tests(test: &str) -> bool {
    match nvrtc("test") {
        Ok(_) => true,
        Err(e) if std::env::var("KILN_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => {
            panic!("{test}: NVRTC is required here (KILN_REQUIRE_NVRTC=1) but did not load: {e}")
        }
        Err(e) => {
            println!("NVRTC not found, skipping {test} ({e})");
            false
        }
    }
}

fn load() -> std::result::Result<NvrtcInfo, String> {
    let mut tried = Vec::new();
    let mut path = None;
    if let Some(p) = std::env::var_os("KILN_NVRTC_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        let file = if p.is_dir() { lib_in(&p) } else { Some(p.clone()) };
        match file.map(|f| open(&f).map(|_| f)) {
            Some(Ok(f)) => path = Some(f),
            Some(Err(e)) => return Err(format!("KILN_NVRTC_PATH={}: cannot load it ({e})", p.display())),
            None => return Err(format!("KILN_NVRTC_PATH={}: no libnvrtc.so* there", p.display())),
        }
    }
    // SAFETY: `is_culib_present` only dlopens candidate names.
    if path.is_none() && !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        tried.push("LD_LIBRARY_PATH and the system paths".to_string());
        for dir in candidate_dirs() {
            if let Some(f) = lib_in(&dir) {
                if open(&f).is_ok() {
                    path = Some(f);
                    break;
                }
            }
            tried.push(dir.display().to_string());
        }
        if path.is_none() {
            return Err(format!(
                "NVRTC (libnvrtc.so) not found; looked in {}. Install it (`pip install nvidia-cuda-nvrtc`) or set KILN_NVRTC_PATH",
                tried.join(", ")
            ));
        }
    }
    let version = std::panic::catch_unwind(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: plain out-parameters; cudarc has just been shown a loadable library.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        r.result().map(|_| (major, minor))
    });
    match version {
        Ok(Ok(v)) => Ok(NvrtcInfo { version: v, path }),
        Ok(Err(e)) => Err(format!("nvrtcVersion failed: {e:?}")),
        Err(_) => {
            Err("a libnvrtc was found but cudarc could not open it by name (is its SONAME libnvrtc.so.12/13?)".into())
        }
    }
}

/// Opens a library by absolute path and keeps it loaded for the life of the process.
fn open(file: &Path) -> std::result::Result<(), String> {
    // SAFETY: loading NVRTC runs its initializers, which have no preconditions.
    let lib = unsafe { libloading::Library::new(file) }.map_err(|e| e.to_string())?;
    std::mem::forget(lib);
    Ok(())
}

/// The NVRTC library file in `dir` (`libnvrtc.so.N` preferred over `libnvrtc.so`).
fn lib_in(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libnvrtc.so") && !name.contains("builtins") && !name.contains("alt")
        })
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.file_name().map(|n| n.len()).unwrap_or(0)));
    // The shortest versioned name (libnvrtc.so.13) is the SONAME; prefer it over longer ones.
    found.sort_by_key(|p| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        (n == "libnvrtc.so", n.len())
    });
    found.into_iter().next()
}

/// Folders where PyPI's NVRTC wheels and CUDA toolkits put the library.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut site: Vec<PathBuf> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        if let Ok(rd) = std::fs::read_dir(Path::new(&venv).join("lib")) {
            site.extend(rd.filter_map(|e| e.ok()).map(|e| e.path().join("site-packages")));
        }
    }
    let script = "import site,sys\ntry:\n    print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))\nexcept Exception:\n    print('\\n'.join(sys.path))";
    if let Ok(out) =
        std::process::Command::new("python3").args(["-c", script]).stderr(std::process::Stdio::null()).output()
    {
        site.extend(String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from));
    }
    let mut dirs = Vec::new();
    for s in site {
        for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"] {
            let d = s.join(sub);
            if d.is_dir() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    if let Some(home) = std::env::var_os("CUDA_HOME").or_else(|| std::env::var_os("CUDA_PATH")) {
        dirs.push(Path::new(&home).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs
}
