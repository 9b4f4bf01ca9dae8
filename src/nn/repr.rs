//! Python-style formatting for module printing, so `println!("{net}")` reads like PyTorch's
//! `print(net)`.

/// A float as Python's `repr` writes it: `0.1`, `1.0`, `1e-05`, `1e+20`.
pub(crate) fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Rust's shortest round-trip digits, with Python's exponent (sign, at least 2 digits).
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').expect("`{:e}` has an exponent");
        let exp: i32 = exp.parse().expect("integer exponent");
        return format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    if x == x.trunc() {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// `True` / `False`.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// A Python tuple of integers: `(3, 3)`, `(10,)`.
pub(crate) fn py_tuple(items: &[usize]) -> String {
    match items {
        [one] => format!("({one},)"),
        _ => format!("({})", items.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// Integers the way PyTorch echoes a size argument: `2` when every value is the same (as
/// given by one integer), else the tuple `(2, 3)`.
pub(crate) fn py_uniform(items: &[usize]) -> String {
    match items {
        [first, rest @ ..] if rest.iter().all(|x| x == first) => first.to_string(),
        _ => py_tuple(items),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        for (x, want) in [
            (0.1, "0.1"),
            (1.0, "1.0"),
            (1e-5, "1e-05"),
            (0.25, "0.25"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (-2.5e-7, "-2.5e-07"),
        ] {
            assert_eq!(py_float(x), want);
        }
        assert_eq!(py_tuple(&[10]), "(10,)");
        assert_eq!(py_tuple(&[3, 3]), "(3, 3)");
    }
}
