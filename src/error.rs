//! kiln's error type: every failure names the op, what was wrong, and the caller's line.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

/// What went wrong, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Shapes that do not fit (broadcasting, matmul, view, cat, …).
    Shape,
    /// A dtype the op does not accept, or operands of incompatible dtypes.
    DType,
    /// Tensors on different devices, or a device this build cannot use.
    Device,
    /// A dim or index out of range.
    Index,
    /// A value the op cannot take (a negative size, a zero integer divisor, …).
    Value,
    /// A feature that is not built yet or not supported.
    Unsupported,
    /// A file or I/O failure.
    Io,
    /// A process-group failure (`kiln::distributed`): not initialized, a peer that disagrees
    /// on a collective, the communication library reporting an error.
    Distributed,
    /// A collective that did not complete within the process group's timeout.
    Timeout,
    /// Memory the system refused to allocate (the message names the bytes requested).
    OutOfMemory,
}

/// An error from a kiln op: `op: message (at file:line)`.
///
/// `Debug` prints the same text as `Display` (as `anyhow` does), so a `main` returning
/// [`Result`] reports it readably; [`std::error::Error::source`] gives the cause, when a
/// lower layer (I/O, safetensors, CUDA) had one.
#[derive(Clone)]
pub struct Error {
    /// The op that failed, as PyTorch names it.
    pub op: &'static str,
    /// The kind of failure.
    pub kind: ErrorKind,
    /// What was wrong, with the shapes, dtypes or devices involved.
    pub message: String,
    /// The user's line that called the op.
    pub location: &'static Location<'static>,
    /// The lower-level error that caused this one, if any.
    pub cause: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// A new error located at the caller (through `#[track_caller]` chains).
    #[track_caller]
    pub fn new(op: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::at(op, kind, message, Location::caller())
    }

    /// A new error located at `location`: the caller's line captured at a public entry point,
    /// for errors made inside closures or deferred work, which `#[track_caller]` cannot reach.
    pub fn at(
        op: &'static str,
        kind: ErrorKind,
        message: impl Into<String>,
        location: &'static Location<'static>,
    ) -> Error {
        Error { op, kind, message: message.into(), location, cause: None }
    }

    /// This error with `cause` as its [`std::error::Error::source`].
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.cause = Some(Arc::new(cause));
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (at {}:{})", self.op, self.message, self.location.file(), self.location.line())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)?;
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            write!(f, "\n\nCaused by:\n    {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// `Result` with kiln's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a `Result` into its value or a panic carrying the error's message, for the panicking
/// forms of ops (`add` over `try_add`).
pub(crate) trait OrPanic<T> {
    /// The value, or a panic with the error's `op: message (at file:line)`.
    fn or_panic(self) -> T;
}

impl<T> OrPanic<T> for Result<T> {
    #[track_caller]
    fn or_panic(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Panics with an error of `op` located at the caller (`op: message (at file:line)`): for the
/// checks of constructors and other panicking APIs that have no `try_` form.
#[track_caller]
pub(crate) fn fail(op: &'static str, kind: ErrorKind, message: impl Into<String>) -> ! {
    panic!("{}", Error::new(op, kind, message))
}

/// Moves a `Result`'s error to the caller's line: for public entry points whose work runs in
/// closures, iterators or trait objects that `#[track_caller]` cannot reach (the error would
/// otherwise name a line inside kiln).
pub(crate) trait AtCaller<T> {
    /// The same result, an error located at the caller.
    fn at_caller(self) -> Result<T>;
}

impl<T> AtCaller<T> for Result<T> {
    #[track_caller]
    fn at_caller(self) -> Result<T> {
        let location = Location::caller();
        self.map_err(|e| Error { location, ..e })
    }
}

/// Shorthand for returning an error located at the caller.
macro_rules! bail {
    ($op:expr, $kind:ident, $($fmt:tt)*) => {
        return Err($crate::error::Error::new($op, $crate::error::ErrorKind::$kind, format!($($fmt)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_op_and_line() {
        let e = Error::new("add", ErrorKind::Shape, "shapes [2, 3] and [4] cannot broadcast");
        let s = e.to_string();
        assert!(s.starts_with("add: shapes [2, 3] and [4] cannot broadcast (at src/error.rs:"), "{s}");
    }

    #[test]
    fn debug_reads_as_the_message_and_source_keeps_the_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Error::new("load", ErrorKind::Io, "cannot read x.safetensors").caused_by(io);
        let debug = format!("{e:?}");
        assert!(debug.starts_with("load: cannot read x.safetensors (at src/error.rs:"), "{debug}");
        assert!(debug.ends_with("Caused by:\n    no such file"), "{debug}");
        let source = std::error::Error::source(&e).expect("a cause");
        assert_eq!(source.to_string(), "no such file");
        assert!(std::error::Error::source(&Error::new("add", ErrorKind::Shape, "x")).is_none());
    }
}
