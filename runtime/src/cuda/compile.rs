//! Compiling CUDA C with NVRTC to CUBIN (and PTX), with an in-memory and an on-disk cache.
//!
//! The cache key is a hash of the source, the kernel name, the target arch, NVRTC's version, the
//! compile options and [`CACHE_VERSION`]. The CUDA C emitter writes its own version into the
//! source's first line, so a new emitter never reuses an old binary. Disk entries live in
//! `$KILN_CACHE_DIR` (default `$XDG_CACHE_HOME/kiln/kernels`, else `~/.cache/kiln/kernels`) as
//! `<key>.cubin` next to `<key>.cu` (the source, compared on load so a hash collision is a miss).
//! A second run of a program compiles nothing. `KILN_DEBUG=kernels` prints each kernel's source
//! the first time the process asks for it.

use super::error::{CudaError, CudaErrorKind, Result};
use super::nvrtc::nvrtc;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Bumped whenever the way kernels are compiled changes (options, layout of cache entries).
pub const CACHE_VERSION: u32 = 1;

/// NVRTC options every kernel is compiled with (besides the arch).
const OPTIONS: &[&str] = &["--std=c++17", "--fmad=true"];

/// A compiled kernel: CUBIN for one arch (loadable by the driver), and PTX when NVRTC gave one.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The `extern "C"` kernel's name.
    pub kernel_name: String,
    /// The arch compiled for (90 for sm_90).
    pub arch: u32,
    /// The CUBIN image.
    pub cubin: Vec<u8>,
    /// The PTX text (empty when loaded from the disk cache, which stores CUBIN only).
    pub ptx: String,
    /// The cache key (also the file stem of the disk entry).
    pub key: String,
    /// Where the binary came from.
    pub origin: Origin,
}

/// Where [`compile`] found a kernel's binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Freshly compiled by NVRTC.
    Nvrtc,
    /// Read from the on-disk cache.
    Disk,
}

/// How often [`compile`] compiled, read the disk, or answered from memory in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// NVRTC compilations.
    pub nvrtc_compiles: u64,
    /// Disk cache hits.
    pub disk_hits: u64,
    /// In-memory cache hits.
    pub memory_hits: u64,
}

static NVRTC_COMPILES: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static MEMORY_HITS: AtomicU64 = AtomicU64::new(0);

/// The counters of [`compile`] since the process started.
pub fn compile_stats() -> CompileStats {
    CompileStats {
        nvrtc_compiles: NVRTC_COMPILES.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        memory_hits: MEMORY_HITS.load(Ordering::Relaxed),
    }
}

fn memory_cache() -> &'static Mutex<ahash::AHashMap<String, Arc<Compiled>>> {
    static CACHE: OnceLock<Mutex<ahash::AHashMap<String, Arc<Compiled>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(ahash::AHashMap::new()))
}

/// Forgets the in-memory cache (the disk cache stays): the next [`compile`] of a kernel reads
/// the disk or compiles.
pub fn clear_memory_cache() {
    memory_cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// True when `KILN_DEBUG` (a comma-separated list) contains `kernels`.
pub fn debug_kernels() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("KILN_DEBUG").map(|v| v.split(',').any(|s| s.trim() == "kernels")).unwrap_or(false)
    })
}

/// The folder of the disk cache, or `None` when no home or cache folder is known.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("KILN_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kiln").join("kernels"))
}

/// 64-bit FNV-1a, stable across runs and platforms (the disk cache's hash).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&(part.len() as u64).to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Compiles `source` for `sm_<arch>` and returns the kernel `kernel_name`'s CUBIN, from the
/// memory cache, the disk cache or NVRTC, in that order. Errors: NVRTC missing (`NoNvrtc`) or a
/// compile error (`Compile`, with NVRTC's log and the numbered source).
pub fn compile(source: &str, kernel_name: &str, arch: u32) -> Result<Arc<Compiled>> {
    let op = "cuda_compile";
    let info = nvrtc(op)?;
    let version = format!("{}.{}:{}:{}", info.version.0, info.version.1, OPTIONS.join(" "), CACHE_VERSION);
    let hash = fnv1a(&[source.as_bytes(), kernel_name.as_bytes(), &arch.to_le_bytes(), version.as_bytes()]);
    let key = format!("{kernel_name}-sm{arch}-{hash:016x}");
    if let Some(c) = memory_cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        MEMORY_HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(c.clone());
    }
    if debug_kernels() {
        eprintln!("[kiln] kernel {kernel_name} (sm_{arch}):\n{source}");
    }
    let dir = cache_dir();
    let compiled = match dir.as_ref().and_then(|d| read_disk(d, &key, source)) {
        Some(cubin) => {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            Compiled {
                kernel_name: kernel_name.into(),
                arch,
                cubin,
                ptx: String::new(),
                key: key.clone(),
                origin: Origin::Disk,
            }
        }
        None => {
            let (cubin, ptx) = nvrtc_compile(source, kernel_name, arch)?;
            NVRTC_COMPILES.fetch_add(1, Ordering::Relaxed);
            if let Some(d) = &dir {
                write_disk(d, &key, source, &cubin);
            }
            Compiled { kernel_name: kernel_name.into(), arch, cubin, ptx, key: key.clone(), origin: Origin::Nvrtc }
        }
    };
    let compiled = Arc::new(compiled);
    memory_cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, compiled.clone());
    Ok(compiled)
}

fn read_disk(dir: &std::path::Path, key: &str, source: &str) -> Option<Vec<u8>> {
    let src = std::fs::read_to_string(dir.join(format!("{key}.cu"))).ok()?;
    if src != source {
        return None;
    }
    std::fs::read(dir.join(format!("{key}.cubin"))).ok().filter(|b| !b.is_empty())
}

/// Writes an entry through a temporary file and a rename, so a reader never sees half of one.
/// A cache that cannot be written is not an error: the kernel is simply compiled again next run.
fn write_disk(dir: &std::path::Path, key: &str, source: &str, cubin: &[u8]) {
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, cubin)?;
        std::fs::rename(&tmp, dir.join(format!("{key}.cubin")))?;
        std::fs::write(&tmp, source)?;
        std::fs::rename(&tmp, dir.join(format!("{key}.cu")))
    };
    if let Err(e) = write() {
        if debug_kernels() {
            eprintln!("[kiln] kernel cache {} not written: {e}", dir.display());
        }
    }
}

/// One NVRTC compilation: (CUBIN, PTX).
fn nvrtc_compile(source: &str, kernel_name: &str, arch: u32) -> Result<(Vec<u8>, String)> {
    use cudarc::nvrtc::{result, sys};
    let op = "cuda_compile";
    let fail = |what: &str, e: cudarc::nvrtc::result::NvrtcError| {
        CudaError::new(op, CudaErrorKind::Compile, format!("{kernel_name}: {what}: {e:?}"))
    };
    let src = CString::new(source)
        .map_err(|_| CudaError::new(op, CudaErrorKind::InvalidArgument, "the source contains a NUL byte"))?;
    let name = CString::new(format!("{kernel_name}.cu")).unwrap_or_default();
    let prog = result::create_program(&src, Some(&name)).map_err(|e| fail("nvrtcCreateProgram", e))?;
    let mut options: Vec<String> = OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture=sm_{arch}"));
    // SAFETY: `prog` was created above and is destroyed once, at the end of this block; the
    // buffers handed to NVRTC have the sizes it reported.
    let out = unsafe {
        let compiled = result::compile_program(prog, &options);
        let out = match compiled {
            Err(e) => {
                let log = result::get_program_log(prog).map(|l| c_chars_to_string(&l)).unwrap_or_default();
                Err(CudaError::new(
                    op,
                    CudaErrorKind::Compile,
                    format!(
                        "NVRTC failed to compile {kernel_name} for sm_{arch} ({e:?}):\n{log}\n--- source ---\n{}",
                        numbered(source)
                    ),
                ))
            }
            Ok(()) => {
                let mut size = 0usize;
                match sys::nvrtcGetCUBINSize(prog, &mut size).result() {
                    Err(e) => Err(fail("nvrtcGetCUBINSize", e)),
                    Ok(()) => {
                        let mut cubin = vec![0u8; size];
                        match sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut std::ffi::c_char).result() {
                            Err(e) => Err(fail("nvrtcGetCUBIN", e)),
                            // Compiling for a real arch may leave no PTX behind: that is fine.
                            Ok(()) => {
                                Ok((cubin, result::get_ptx(prog).map(|p| c_chars_to_string(&p)).unwrap_or_default()))
                            }
                        }
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        out
    };
    let (cubin, ptx) = out?;
    if cubin.is_empty() {
        return Err(CudaError::new(
            op,
            CudaErrorKind::Compile,
            format!("NVRTC produced no CUBIN for {kernel_name} (sm_{arch})"),
        ));
    }
    Ok((cubin, ptx))
}

fn c_chars_to_string(v: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn numbered(source: &str) -> String {
    source.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}
