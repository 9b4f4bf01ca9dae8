//! kiln's error type: every failure names the op, what was wrong, and the caller's line.

use std::fmt;
use std::panic::Location;

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
#[derive(Clone, Debug)]
pub struct Error {
    /// The op that failed, as PyTorch names it.
    pub op: &'static str,
    /// The kind of failure.
    pub kind: ErrorKind,
    /// What was wrong, with the shapes, dtypes or devices involved.
    pub message: String,
    /// The user's line that called the op.
    pub location: &'static Location<'static>,
}

impl Error {
    /// A new error located at the caller (through `#[track_caller]` chains).
    #[track_caller]
    pub fn new(op: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { op, kind, message: message.into(), location: Location::caller() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (at {}:{})", self.op, self.message, self.location.file(), self.location.line())
    }
}

impl std::error::Error for Error {}

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
}
