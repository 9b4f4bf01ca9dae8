//! How a reduction over dims is spelled: PyTorch's `x.sum(1)` is `x.sum_dim(1)`, which drops
//! the reduced dims (PyTorch's default `keepdim=False`), and `x.sum(1, keepdim=True)` is
//! `x.sum_dim_keepdim(1)`, which keeps each with size 1; each has its `try_` form returning
//! `Result`. [`keepdim_forms!`] writes those four methods from one body, for every reduction
//! over dims (`sum_dim`, `mean_dim`, `max_dim`, `var_dim`, `logsumexp`, `norm_dim`, `median_dim`,
//! `kthvalue`, `mode`, …).
//!
//! Rust has no default arguments; a second name for the rarer form reads better at the call
//! than a `bool` the reader has to look up (`x.sum_dim(1, true)`), and it is the spelling Rust
//! tensor libraries use (candle's `sum_keepdim`).

/// Defines a reduction's four methods from one body: `$name(args)` dropping the reduced dims,
/// `$keep(args)` keeping them with size 1, and their `try_` forms `$try_name` and `$try_keep`.
/// `$body` computes the `Result` with `$this` bound to `self` and `$keepdim` to the form's
/// flag; `$doc` describes the op, `$errors` completes "returning an error for …".
macro_rules! keepdim_forms {
    ($(
        #[doc = $doc:expr]
        #[errors = $errors:expr]
        $name:ident $try_name:ident $keep:ident $try_keep:ident
        ($($arg:ident : $ty:ty),*) -> $out:ty
        = |$this:ident, $keepdim:ident| $body:expr;
    )*) => {
        impl $crate::Tensor {$(
            keepdim_forms! { @form false $name $try_name ($($arg: $ty),*) -> $out = |$this, $keepdim| $body;
                try_doc = concat!("[`Tensor::", stringify!($name), "`] returning an error for ", $errors, ".");
                #[doc = $doc]
                #[doc = ""]
                #[doc = concat!("Drops the reduced dims (PyTorch's `keepdim=False`); [`Tensor::", stringify!($keep),
                    "`] keeps them.")]
            }
            keepdim_forms! { @form true $keep $try_keep ($($arg: $ty),*) -> $out = |$this, $keepdim| $body;
                try_doc = concat!("[`Tensor::", stringify!($keep), "`] returning an error for ", $errors, ".");
                #[doc = concat!("[`Tensor::", stringify!($name), "`] keeping each reduced dim with size 1 (PyTorch's ",
                    "`keepdim=True`).")]
            }
        )*}
    };
    // One form: the panicking method (documented by the docs) and its `try_` form (by
    // `try_doc`), computing `$body` with `$keepdim` bound to `$flag`.
    (@form $flag:literal $name:ident $try_name:ident ($($arg:ident : $ty:ty),*) -> $out:ty
        = |$this:ident, $keepdim:ident| $body:expr; try_doc = $try_doc:expr; $(#[doc = $doc:expr])*) => {
        $(#[doc = $doc])*
        #[track_caller]
        pub fn $name(&self, $($arg: $ty),*) -> $out {
            $crate::error::OrPanic::or_panic(self.$try_name($($arg),*))
        }

        #[doc = $try_doc]
        #[track_caller]
        pub fn $try_name(&self, $($arg: $ty),*) -> $crate::error::Result<$out> {
            let ($this, $keepdim) = (self, $flag);
            $body
        }
    };
}
pub(crate) use keepdim_forms;
