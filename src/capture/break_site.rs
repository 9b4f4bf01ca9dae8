//! Where a graph break happened, in the user's terms: the line that read a lazy tensor, or, when
//! that line is inside kiln (printing a tensor reads it in kiln's `Display` code, which
//! `#[track_caller]` cannot see past), the first function of the call stack outside kiln and
//! the standard library. Asked only under `KILN_DEBUG=breaks` (a backtrace costs microseconds).

use std::panic::Location;

/// This file's path as the compiler names kiln's sources (`src/capture/break_site.rs` when kiln
/// is the workspace built, an absolute path when it is a dependency).
const THIS_FILE: &str = file!();

/// Whether `loc` is in kiln's own sources.
fn inside_kiln(loc: &Location<'_>) -> bool {
    let root = THIS_FILE.trim_end_matches("capture/break_site.rs");
    loc.file().starts_with(root)
}

/// `loc` when it is the user's; else the user's function that led to it, `loc` in parentheses.
pub(crate) fn describe(loc: &'static Location<'static>) -> String {
    if !inside_kiln(loc) {
        return loc.to_string();
    }
    match first_user_frame(&std::backtrace::Backtrace::force_capture().to_string()) {
        Some(frame) => format!("{frame} (through {loc})"),
        None => loc.to_string(),
    }
}

/// The first frame of a printed backtrace below kiln's frames that is neither kiln's nor the
/// standard library's: `function` or `function at file:line:col` (with debug info).
fn first_user_frame(backtrace: &str) -> Option<String> {
    const INTERNAL: [&str; 14] = [
        "kiln::",
        "kiln_runtime::",
        "kiln_codegen::",
        "<kiln",
        "std::",
        "<std",
        "core::",
        "<core",
        "alloc::",
        "<alloc",
        "<&",
        "__rust",
        "rust_",
        "_start",
    ];
    let mut lines = backtrace.lines().map(str::trim).peekable();
    let mut seen_kiln = false;
    while let Some(line) = lines.next() {
        let Some((number, symbol)) = line.split_once(": ") else { continue };
        if number.parse::<usize>().is_err() {
            continue;
        }
        let internal = INTERNAL.iter().any(|p| symbol.starts_with(p));
        seen_kiln |= symbol.starts_with("kiln") || symbol.starts_with("<kiln");
        if seen_kiln && !internal {
            let symbol = strip_hash(symbol);
            return Some(match lines.peek().and_then(|l| l.strip_prefix("at ")) {
                Some(at) => format!("{symbol} at {at}"),
                None => symbol.to_string(),
            });
        }
    }
    None
}

/// A symbol without its trailing `::h0123456789abcdef` hash.
fn strip_hash(symbol: &str) -> &str {
    match symbol.rsplit_once("::h") {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => symbol,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kiln_lines_are_known_as_kilns() {
        // (A user's line is checked by tests/debug_topics.rs, outside kiln's sources.)
        let here = Location::caller();
        assert!(inside_kiln(here), "{here}");
    }

    #[test]
    fn the_first_frame_past_kiln_and_std_is_the_users() {
        let trace = "   0: std::backtrace::Backtrace::force_capture
   1: kiln::capture::break_site::describe
   2: kiln::tensor::display::<impl core::fmt::Display for kiln::tensor::Tensor>::fmt
   3: core::fmt::write
   4: std::io::stdio::_print
   5: mnist::train::h0123456789abcdef
             at ./examples/mnist.rs:88:9
   6: mnist::main
";
        assert_eq!(first_user_frame(trace).as_deref(), Some("mnist::train at ./examples/mnist.rs:88:9"));
        let no_user = "   0: kiln::a\n   1: std::rt::lang_start\n";
        assert_eq!(first_user_frame(no_user), None);
        let before_kiln = "   0: my::helper\n   1: kiln::x\n   2: <my::Net as kiln::nn::Module>::forward\n";
        assert_eq!(first_user_frame(before_kiln).as_deref(), Some("<my::Net as kiln::nn::Module>::forward"));
    }
}
