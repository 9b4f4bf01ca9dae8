//! Grad mode: whether ops record history (`torch.no_grad`, `torch.enable_grad`,
//! `torch.set_grad_enabled`). The flag is per thread, as in PyTorch.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record history for autograd (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns recording on or off for this thread until changed again (`torch.set_grad_enabled(b)`
/// used as a function). For a scoped change use [`no_grad`], [`enable_grad`] (or their
/// guard forms) or [`grad_mode`].
pub fn set_grad_enabled(enabled: bool) {
    GRAD_ENABLED.with(|g| g.set(enabled));
}

/// Restores the grad mode it was made with when dropped.
#[must_use = "grad mode returns to its previous value when the guard is dropped"]
pub struct GradModeGuard {
    previous: bool,
    // Grad mode is per thread: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.previous);
    }
}

/// Sets the grad mode to `enabled` until the returned guard is dropped
/// (`with torch.set_grad_enabled(b):`).
pub fn grad_mode(enabled: bool) -> GradModeGuard {
    let previous = is_grad_enabled();
    set_grad_enabled(enabled);
    GradModeGuard { previous, _not_send: std::marker::PhantomData }
}

/// Runs `f` without recording history (`with torch.no_grad():`), restoring the grad mode
/// afterwards, also when `f` panics. The scope is the closure, so it cannot end early by
/// mistake (`let _ = no_grad_guard();` drops its guard at once); [`no_grad_guard`] is the
/// guard form for scopes a closure does not fit.
///
/// ```
/// let w = kiln::Tensor::ones(&[2]).requires_grad_(true);
/// let y = kiln::no_grad(|| &w * 2.0);
/// assert!(!y.requires_grad());
/// assert!((&w * 2.0).requires_grad());
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = no_grad_guard();
    f()
}

/// Stops recording history until the guard is dropped (the guard form of [`no_grad`]).
///
/// ```
/// let w = kiln::Tensor::ones(&[2]).requires_grad_(true);
/// {
///     let _guard = kiln::no_grad_guard();
///     let y = &w * 2.0;
///     assert!(!y.requires_grad());
/// }
/// assert!((&w * 2.0).requires_grad());
/// ```
pub fn no_grad_guard() -> GradModeGuard {
    grad_mode(false)
}

/// Runs `f` recording history, even inside [`no_grad`] (`with torch.enable_grad():`).
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = enable_grad_guard();
    f()
}

/// Records history until the guard is dropped, even inside [`no_grad`] (the guard form of
/// [`enable_grad`]).
pub fn enable_grad_guard() -> GradModeGuard {
    grad_mode(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closure_scopes_nest_and_restore_also_on_panic() {
        assert!(!no_grad(|| enable_grad(is_grad_enabled) && is_grad_enabled()));
        assert!(no_grad(|| enable_grad(is_grad_enabled)));
        assert!(is_grad_enabled());
        let unwound = std::panic::catch_unwind(|| no_grad(|| panic!("inside")));
        assert!(unwound.is_err());
        assert!(is_grad_enabled(), "the panic restored the grad mode");
    }

    #[test]
    fn guards_nest_and_restore() {
        assert!(is_grad_enabled());
        {
            let _a = no_grad_guard();
            assert!(!is_grad_enabled());
            {
                let _b = enable_grad_guard();
                assert!(is_grad_enabled());
            }
            assert!(!is_grad_enabled());
        }
        assert!(is_grad_enabled());
        set_grad_enabled(false);
        assert!(!is_grad_enabled());
        set_grad_enabled(true);
    }
}
