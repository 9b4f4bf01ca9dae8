//! Extreme shapes through creation, views and ops, eager and compiled: each result is an `Ok`
//! of the right shape and values, or an `Err` naming the op, what overflowed or the memory the
//! system refused, at this file's line; never a panic inside the library, a count that wraps
//! or an abort. Expected outcomes are computed here in 128-bit arithmetic, so a debug and a
//! release build must give the same answers.
//!
//! No case asks for memory the system could actually give beyond a few KiB: a new tensor is
//! either small, refused by the shape check, or needs at least 2^48 bytes (more than the
//! 47-bit address space Linux gives a process by default, so refused whatever the overcommit
//! setting). Cases in between are skipped before the op runs. Views allocate nothing, so any
//! view shape is tried.

use kiln::{DType, Device, ErrorKind, Tensor};
use kiln_runtime::layout::MAX_NUMEL;
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Bytes a new tensor may really take in a case.
const SMALL_BYTES: u128 = 1 << 12;
/// Bytes the system refuses on any Linux machine.
const REFUSED_BYTES: u128 = 1 << 48;

/// The outcome a new tensor of some shape must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Small: made, with the shape asked for.
    Ok,
    /// More elements than a tensor holds (or a zero-size shape whose strides overflow).
    Shape,
    /// A valid shape whose bytes the system refuses.
    OutOfMemory,
    /// A valid shape of a size that might be granted: not tried.
    Skip,
}

/// The product of `max(d, 1)` over the sizes, `None` past 128 bits.
fn span(shape: &[u128]) -> Option<u128> {
    shape.iter().try_fold(1u128, |p, &d| p.checked_mul(d.max(1)))
}

/// Whether a tensor may have `shape` (kiln's rule: its nonzero sizes multiply to at most
/// `MAX_NUMEL`), and its element count when it may.
fn count(shape: &[u128]) -> Option<u128> {
    let s = span(shape).filter(|&s| s <= MAX_NUMEL as u128)?;
    Some(if shape.contains(&0) { 0 } else { s })
}

/// Whether a view of `shape` is small enough for a kernel to copy it whole (ops may, e.g. a
/// product's operands without a unit stride).
fn small(shape: &[u128]) -> bool {
    count(shape).is_some_and(|n| n <= 1024)
}

/// What making a new tensor of `shape` with elements of `elem` bytes must give.
fn expect(shape: &[u128], elem: usize) -> Expect {
    match count(shape) {
        None => Expect::Shape,
        Some(n) if n * elem as u128 <= SMALL_BYTES => Expect::Ok,
        Some(n) if n * elem as u128 >= REFUSED_BYTES => Expect::OutOfMemory,
        Some(_) => Expect::Skip,
    }
}

fn wide(shape: &[usize]) -> Vec<u128> {
    shape.iter().map(|&d| d as u128).collect()
}

/// Asserts that `r`, the result of `op`, is what `e` says: a tensor of `shape`, or an error of
/// `op` of the expected kind, located in this file.
#[track_caller]
fn check(op: &str, r: &kiln::Result<Tensor>, e: Expect, shape: &[u128]) {
    match (e, r) {
        (Expect::Ok, Ok(t)) => assert_eq!(wide(t.shape()), shape, "{op}"),
        (Expect::Shape | Expect::OutOfMemory, Err(err)) => {
            assert_eq!(err.op, op, "{err}");
            assert!(
                err.location.file().ends_with("extreme_shapes.rs"),
                "{op}: the error is located at {}",
                err.location
            );
            if e == Expect::Shape {
                assert_eq!(err.kind, ErrorKind::Shape, "{err}");
                assert!(err.message.contains("has too many elements") || err.message.contains("is too large"), "{err}");
            } else {
                assert_eq!(err.kind, ErrorKind::OutOfMemory, "{err}");
                assert!(err.message.starts_with("out of memory: the system refused to allocate"), "{err}");
            }
        }
        (e, r) => panic!("{op} over {shape:?}: expected {e:?}, got {:?}", r.as_ref().map(|t| t.shape().to_vec())),
    }
}

/// Sizes: mostly small, sometimes huge (each alone a valid or an invalid shape, and in pairs
/// products that overflow 64 bits or wrap to small counts).
fn dim() -> impl Strategy<Value = usize> {
    let huge =
        vec![1 << 31, 1 << 32, 1 << 46, 1 << 47, 1 << 59, 1 << 62, (1 << 63) + 1, MAX_NUMEL, MAX_NUMEL + 1, usize::MAX];
    prop_oneof![3 => 0..4usize, 1 => prop::sample::select(huge)]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), 0..5)
}

/// `view`/`reshape`/`expand` sizes: small, huge, -1 and other negatives.
fn signed_dim() -> impl Strategy<Value = i64> {
    let odd = vec![-1, -1, -2, i64::MIN, 1 << 31, 1 << 32, 1 << 62, i64::MAX, 0x5555_5555_5555_5556];
    prop_oneof![3 => 0..7i64, 2 => prop::sample::select(odd)]
}

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::U8, DType::Bool])
}

/// A 0-dim tensor of one broadcast to `shape` (a view: any valid shape costs nothing).
fn ones_view(shape: &[usize]) -> kiln::Result<Tensor> {
    Tensor::ones(()).try_broadcast_to(shape)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn creation_gives_the_shape_or_a_clear_error(shape in shape(), dtype in dtype()) {
        let w = wide(&shape);
        let e = expect(&w, dtype.size_in_bytes());
        prop_assume!(e != Expect::Skip);
        check("zeros", &Tensor::try_zeros_opts(&shape, dtype, Device::Cpu), e, &w);
        check("ones", &Tensor::try_ones_opts(&shape, dtype, Device::Cpu), e, &w);
        check("full", &Tensor::try_full_opts(&shape, 1, dtype, Device::Cpu), e, &w);
        check("empty", &Tensor::try_empty_opts(&shape, dtype, Device::Cpu), e, &w);
        if dtype.is_float() {
            check("rand", &Tensor::try_rand_opts(&shape, dtype, Device::Cpu), e, &w);
            check("randn", &Tensor::try_randn_opts(&shape, dtype, Device::Cpu), e, &w);
        } else if dtype != DType::Bool {
            check("randint", &Tensor::try_randint_opts(0, 2, &shape, dtype, Device::Cpu), e, &w);
        }
        // from_vec: the data of a small shape fills it; a valid but huge shape is a count
        // mismatch, an invalid one a count error (never a count that wraps to the data's).
        let n = if e == Expect::Ok { count(&w).unwrap() as usize } else { 2 };
        let r = Tensor::try_from_vec(vec![1.5f32; n], &shape);
        match e {
            Expect::Ok => prop_assert_eq!(r.unwrap().to_vec::<f32>(), vec![1.5; n]),
            _ => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Shape),
        }
        if e == Expect::Ok {
            prop_assert!(Tensor::try_zeros_opts(&shape, dtype, Device::Cpu).unwrap().to_dtype(DType::F64).to_vec::<f64>().iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn ranges_and_identities_count_without_overflow(start in any::<i64>(), end in any::<i64>(), step in prop::sample::select(vec![1i64, 2, 3, -1, -7, i64::MAX, i64::MIN]), n in dim(), m in dim()) {
        // arange: the count in 128 bits; only small or refused ones are run.
        let len = (end as i128 - start as i128 + step as i128 - step.signum() as i128) / step as i128;
        let w = [len.max(0) as u128];
        let e = expect(&w, 8);
        if (end as i128 - start as i128).signum() * step.signum() as i128 >= 0 && e != Expect::Skip {
            check("arange", &Tensor::try_arange_step(start, end, step), e, &w);
        }
        let w = [n as u128, m as u128];
        let e = expect(&w, 4);
        if e != Expect::Skip {
            check("eye", &Tensor::try_eye_rect(n, m), e, &w);
        }
        let e = expect(&[n as u128], 4);
        if e != Expect::Skip {
            check("linspace", &Tensor::try_linspace(0.0, 1.0, n), e, &[n as u128]);
        }
    }

    #[test]
    fn views_take_any_sizes_and_refuse_what_no_tensor_holds(spec in prop::collection::vec(signed_dim(), 0..5)) {
        let x = Tensor::arange(6);
        // view/reshape: at most one -1, no other negative, a product of 6 (the model keeps
        // the product in 128 bits).
        let inferred = spec.iter().filter(|&&s| s == -1).count();
        let given: Vec<u128> = spec.iter().filter(|&&s| s >= 0).map(|&s| s as u128).collect();
        let known = count(&given);
        let ok = spec.iter().all(|&s| s >= -1) && match (inferred, known) {
            (0, Some(k)) => k == 6,
            (1, Some(k)) => k != 0 && 6 % k == 0,
            _ => false,
        };
        let shape: Vec<usize> = spec.iter().map(|&s| if s == -1 { 6 / known.unwrap_or(1).max(1) as usize } else { s.max(0) as usize }).collect();
        for (op, r) in [("view", x.try_view(&spec)), ("reshape", x.try_reshape(&spec)), ("reshape", x.view([2, 3]).t().try_reshape(&spec))] {
            match r {
                Ok(t) => {
                    prop_assert!(ok, "{} of {:?} gave {:?}", op, spec, t.shape());
                    prop_assert_eq!(t.shape(), &shape[..]);
                    prop_assert_eq!(t.to_vec::<i64>().len(), 6);
                }
                Err(e) => {
                    prop_assert!(!ok, "{} of {:?}: {}", op, spec, e);
                    prop_assert_eq!((e.op, e.kind), (op, ErrorKind::Shape));
                }
            }
        }
        // expand of a [1, 1] tensor: -1 keeps one of its dims; other sizes must be tensor sizes.
        let lead = spec.len().saturating_sub(2);
        let target: Option<Vec<u128>> = (spec.len() >= 2).then(|| {
            spec.iter().enumerate().map(|(i, &s)| if s == -1 && i >= lead { Some(1) } else if s >= 0 { Some(s as u128) } else { None }).collect()
        }).flatten();
        let ok = target.as_deref().is_some_and(|t| count(t).is_some());
        match Tensor::ones([1, 1]).try_expand(&spec) {
            Ok(t) => {
                prop_assert!(ok, "expand to {:?} gave {:?}", spec, t.shape());
                prop_assert_eq!(wide(t.shape()), target.unwrap());
            }
            Err(e) => {
                prop_assert!(!ok, "expand to {:?}: {}", spec, e);
                prop_assert_eq!((e.op, e.kind), ("expand", ErrorKind::Shape));
            }
        }
    }

    #[test]
    fn narrow_and_index_stay_inside_the_tensor(start in prop::sample::select(vec![0i64, 1, 2, 3, -1, -3, -4, i64::MIN, i64::MAX]), len in dim(), i in dim()) {
        let x = Tensor::arange(6).view([2, 3]);
        let s = if start < 0 { start as i128 + 3 } else { start as i128 };
        let ok = (0..=3).contains(&s) && len as i128 <= 3 - s;
        match x.try_narrow(1, start, len) {
            Ok(t) => {
                prop_assert!(ok);
                prop_assert_eq!(t.shape(), &[2, len][..]);
                let want: Vec<i64> = (0..2).flat_map(|r| (0..len as i64).map(move |c| r * 3 + s as i64 + c)).collect();
                prop_assert_eq!(t.to_vec::<i64>(), want);
            }
            Err(e) => prop_assert!(!ok && e.op == "narrow", "{}", e),
        }
        match x.try_i((.., i)) {
            Ok(t) => prop_assert!(i < 3 && t.to_vec::<i64>() == vec![i as i64, 3 + i as i64]),
            Err(e) => prop_assert!(i >= 3 && e.kind == ErrorKind::Index, "{}", e),
        }
    }

    #[test]
    fn elementwise_ops_broadcast_to_the_shape_or_a_clear_error(m in dim(), n in dim(), lead in dim()) {
        // [lead, m, 1] + [1, n]: each operand a valid view, the result maybe too large.
        let (Ok(a), Ok(b)) = (ones_view(&[lead, m, 1]), ones_view(&[1, n])) else { return Ok(()) };
        let w = [lead as u128, m as u128, n as u128];
        let e = expect(&w, 4);
        prop_assume!(e != Expect::Skip);
        for (op, r) in [("add", a.try_add(&b)), ("mul", a.try_mul(&b)), ("maximum", a.try_maximum(&b))] {
            check(op, &r, e, &w);
            if let Ok(t) = r {
                let want = if op == "add" { 2.0 } else { 1.0 };
                prop_assert!(t.to_vec::<f32>().iter().all(|&v| v == want));
            }
        }
        if expect(&w, 1) != Expect::Skip {
            check("eq", &a.try_eq(&b), expect(&w, 1), &w);
        }
    }

    #[test]
    fn unary_ops_and_casts_of_huge_views_are_refused_not_aborted(shape in shape(), dtype in prop::sample::select(vec![DType::F64, DType::I64, DType::F16])) {
        let Ok(x) = ones_view(&shape) else { return Ok(()) };
        let w = wide(&shape);
        prop_assume!([2, 4, 8].iter().all(|&b| expect(&w, b) != Expect::Skip));
        // Unary ops have no try_ form: a refusal is a panic naming the op, bytes and line.
        match expect(&w, 4) {
            Expect::Ok => prop_assert_eq!(wide(x.exp().shape()), w.clone()),
            _ => {
                let msg = panic_message(|| drop(x.exp()));
                prop_assert!(msg.starts_with("exp: out of memory: the system refused to allocate") && msg.contains(file!()), "{}", msg);
            }
        }
        check("to", &x.try_to_dtype(dtype), expect(&w, dtype.size_in_bytes()), &w);
    }

    #[test]
    fn matmul_cat_and_index_select_grow_shapes_checked(m in dim(), n in dim(), k in 0..3usize, s in prop::collection::vec(dim(), 1..4)) {
        // matmul: [m, k] @ [k, n] of ones is k everywhere. The operands may be copied whole when
        // the product runs: a small result of large operands (m or n zero) is not run.
        if let (Ok(a), Ok(b)) = (ones_view(&[m, k]), ones_view(&[k, n])) {
            let w = [m as u128, n as u128];
            let e = expect(&w, 4);
            let operands_small = small(&[m as u128, k as u128]) && small(&[k as u128, n as u128]);
            if e != Expect::Skip && (e != Expect::Ok || operands_small) {
                let r = a.try_matmul(&b);
                check("matmul", &r, e, &w);
                if let Ok(t) = r {
                    prop_assert!(t.to_vec::<f32>().iter().all(|&v| v == k as f32));
                }
            }
        }
        // cat of [s_i, 2] pieces along dim 0: the sizes add up in 128 bits.
        let pieces: Vec<Tensor> = s.iter().filter_map(|&d| ones_view(&[d, 2]).ok()).collect();
        if !pieces.is_empty() {
            let total: u128 = pieces.iter().map(|p| p.shape()[0] as u128).sum();
            let w = [total, 2];
            let e = expect(&w, 4);
            if e != Expect::Skip {
                check("cat", &Tensor::try_cat(&pieces, 0), e, &w);
                let st = [pieces.len() as u128, pieces[0].shape()[0] as u128, 2];
                let same: Vec<&Tensor> = std::iter::repeat_n(&pieces[0], pieces.len()).collect();
                let e = expect(&st, 4);
                if e != Expect::Skip {
                    check("stack", &Tensor::try_stack(&same, 0), e, &st);
                }
            }
        }
        // index_select of k zeros along dim 1 of [m, n]: [m, k]; index 0 is in range iff n > 0
        // (with no row to read, m = 0, an index out of range is not looked at).
        if let Ok(x) = ones_view(&[m, n]) {
            let w = [m as u128, k as u128];
            let e = expect(&w, 4);
            if e != Expect::Skip && (e != Expect::Ok || small(&[m as u128, n as u128])) {
                let r = x.try_index_select(1, &Tensor::zeros_opts([k], DType::I64, Device::Cpu));
                match e {
                    _ if n == 0 && k > 0 && m == 0 => {}
                    Expect::Ok if n == 0 && k > 0 => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Index),
                    _ => check("index_select", &r, e, &w),
                }
            }
        }
    }

    #[test]
    fn reductions_and_one_hot_of_extreme_sizes(m in dim(), n in dim(), class in prop::sample::select(vec![0i64, 3, 1 << 40, 1 << 46, 1 << 60, i64::MAX])) {
        // Reductions read every element: only small views are summed.
        if let Ok(x) = ones_view(&[m, n]) {
            let e = expect(&[m as u128], 4);
            if count(&[m as u128, n as u128]).is_some_and(|c| c <= 1024) && e != Expect::Skip {
                let r = x.try_sum_dim(1);
                check("sum", &r, e, &[m as u128]);
                if let Ok(t) = r {
                    prop_assert!(t.to_vec::<f32>().iter().all(|&v| v == n as f32));
                }
            }
        }
        // one_hot of one value: [1, value + 1] int64.
        let w = [1u128, class as u128 + 1];
        let e = expect(&w, 8);
        if e != Expect::Skip {
            check("one_hot", &Tensor::from_slice(&[class]).try_one_hot(-1), e, &w);
        }
    }
}

proptest! {
    // Each new shape builds a plan: fewer cases.
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn compiled_steps_check_shapes_as_eager_does(m in dim(), n in dim(), spec in prop::collection::vec(signed_dim(), 0..4)) {
        let (Ok(a), Ok(b)) = (ones_view(&[m, 1]), ones_view(&[1, n])) else { return Ok(()) };
        let w = [m as u128, n as u128];
        let e = expect(&w, 4);
        // Compiled plans allocate when they run: only shapes that are small (operands too) or
        // refused by the shape check are run compiled.
        if e == Expect::Shape || (e == Expect::Ok && small(&[m as u128]) && small(&[n as u128])) {
            let mut step = kiln::compile(|(a, b): (&Tensor, &Tensor)| a.try_add(b).map(|t| t * 2.0));
            let r = step.call((&a, &b));
            check("add", &r, e, &w);
            if let Ok(t) = r {
                prop_assert!(t.to_vec::<f32>().iter().all(|&v| v == 4.0));
            }
        }
        let x = Tensor::arange(6).to_dtype(DType::F32);
        let eager = x.try_view(&spec).map(|t| t.shape().to_vec());
        let mut step = kiln::compile(|x: &Tensor| x.try_view(&spec).map(|t| t.exp()));
        match (step.call(&x), eager) {
            (Ok(t), Ok(shape)) => prop_assert_eq!(t.shape(), &shape[..]),
            (Err(c), Err(e)) => prop_assert_eq!((c.op, c.kind, c.message), (e.op, e.kind, e.message)),
            (c, e) => prop_assert!(false, "compiled {:?} but eager {:?}", c.map(|t| t.shape().to_vec()), e),
        }
    }
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn a_shape_whose_count_wraps_is_refused_at_the_callers_line() {
    // (2^63 + 1) * 2 wraps to 2 in 64 bits: this made a 2-element tensor in release builds.
    let line = line!() + 1;
    let e = Tensor::try_zeros([(1usize << 63) + 1, 2]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "zeros: shape [9223372036854775809, 2] has too many elements (the count overflows 64 bits) (at {}:{line})",
            file!()
        )
    );
    let msg = panic_message(|| drop(Tensor::zeros([(1usize << 63) + 1, 2])));
    assert!(msg.starts_with("zeros: shape [9223372036854775809, 2] has too many elements"), "{msg}");
    assert!(msg.contains(file!()), "{msg}");
    let e = Tensor::try_from_vec(vec![1.0f32, 2.0], [(1usize << 63) + 1, 2]).unwrap_err();
    assert_eq!(e.message, "shape [9223372036854775809, 2] has too many elements (the count overflows 64 bits)");
}

#[test]
fn a_view_whose_count_wraps_to_the_inputs_is_refused() {
    // 3 * 0x5555555555555556 = 2^64 + 2: a product that wraps to the 2 elements of the input.
    let x = Tensor::zeros([2]);
    let e = x.try_view([3i64, 0x5555_5555_5555_5556]).unwrap_err();
    assert_eq!((e.op, e.kind), ("view", ErrorKind::Shape));
    assert!(e.message.contains("the count overflows 64 bits"), "{e}");
    assert!(x.try_reshape([-1, 1i64 << 62, 1i64 << 62]).is_err());
    // An empty input: a product that wraps to 0 (2^62 * 4), or sizes past the limit beside a 0.
    let empty = Tensor::zeros([0]);
    assert!(empty.try_view([1i64 << 62, 4]).is_err());
    let e = empty.try_view([0, 1i64 << 62, 1i64 << 62]).unwrap_err();
    assert!(e.message.contains("is too large"), "{e}");
    assert_eq!(empty.view([0, 1 << 29, 1 << 30]).shape(), &[0, 1 << 29, 1 << 30]);
}

#[test]
fn expand_and_broadcasting_past_the_limit_are_errors() {
    // [2^32, 2^32] has 2^64 elements: its count wrapped to 0.
    let e = Tensor::ones([1, 1]).try_expand([1i64 << 32, 1i64 << 32]).unwrap_err();
    assert_eq!(
        e.to_string().split(" (at ").next().unwrap(),
        "expand: shape [4294967296, 4294967296] has too many elements (the count overflows 64 bits)"
    );
    // Two valid views whose broadcast has 2^66 elements.
    let a = Tensor::ones([1, 1]).expand([1i64 << 33, 1]);
    let b = Tensor::ones([1, 1]).expand([1, 1i64 << 33]);
    let e = a.try_add(&b).unwrap_err();
    assert_eq!(
        e.message,
        "shapes [8589934592, 1] and [1, 8589934592] broadcast to [8589934592, 8589934592], which has too many elements (the count overflows 64 bits)"
    );
    assert!(panic_message(|| drop(&a * &b)).contains(file!()));
    // A product of two valid views: [2^32, 1] @ [1, 2^32].
    let (p, q) = (Tensor::ones([1, 1]).expand([1i64 << 32, 1]), Tensor::ones([1, 1]).expand([1, 1i64 << 32]));
    let e = p.try_matmul(&q).unwrap_err();
    assert_eq!((e.op, e.kind), ("matmul", ErrorKind::Shape));
    assert!(e.message.starts_with("shapes [4294967296, 1] and [1, 4294967296] cannot be multiplied: the shape [4294967296, 4294967296] has too many elements"), "{e}");
}

#[test]
fn cat_and_one_hot_sizes_are_added_without_overflow() {
    let half = Tensor::ones([1, 1]).expand([1i64 << 59, 1]);
    let e = Tensor::try_cat(&[&half, &half], 0).unwrap_err();
    assert!(e.message.starts_with("shape [1152921504606846976, 1] has too many elements"), "{e}");
    // i64::MAX + 1 classes: the count overflowed (a panic in debug builds).
    let e = Tensor::from_slice(&[i64::MAX]).try_one_hot(-1).unwrap_err();
    assert_eq!((e.op, e.kind), ("one_hot", ErrorKind::Shape));
}

#[test]
fn narrow_split_and_indices_past_i64_stay_inside_the_tensor() {
    let x = Tensor::arange(4);
    // A length past i64::MAX wrapped negative and passed the range check: a view past the end.
    assert_eq!(x.try_narrow(0, 1, usize::MAX).unwrap_err().kind, ErrorKind::Index);
    assert_eq!(x.try_narrow(0, 1, 1 << 63).unwrap_err().kind, ErrorKind::Index);
    // A usize index past i64::MAX wrapped to -1: the last element.
    assert_eq!(x.try_i(usize::MAX).unwrap_err().kind, ErrorKind::Index);
    assert_eq!(x.try_i(1usize..usize::MAX).unwrap().to_vec::<i64>(), vec![1, 2, 3]);
    assert_eq!(x.try_i(..=i64::MAX).unwrap().to_vec::<i64>(), vec![0, 1, 2, 3]);
    // Split sizes that wrap to the dim's size.
    let msg = panic_message(|| drop(x.split_with_sizes(&[usize::MAX, 5], 0)));
    assert!(msg.starts_with("split_with_sizes: split sizes [18446744073709551615, 5] must sum to the size of dim 0 (4), but sum to a count that overflows 64 bits"), "{msg}");
}

#[test]
fn ranges_and_identities_of_huge_counts_are_errors() {
    let e = Tensor::try_arange_step(i64::MIN, i64::MAX, 1).unwrap_err();
    assert_eq!((e.op, e.kind), ("arange", ErrorKind::Shape));
    assert_eq!(Tensor::try_arange_step(0.0, f64::INFINITY, 1.0).unwrap_err().kind, ErrorKind::Value);
    assert_eq!(Tensor::try_arange_step(0.0, 1e300, 1e-300).unwrap_err().kind, ErrorKind::Shape);
    assert_eq!(Tensor::try_eye_rect(1 << 32, 1 << 32).unwrap_err().kind, ErrorKind::Shape);
    let e = Tensor::try_rand_opts([1i64 << 62, 1i64 << 62], DType::F32, Device::Cpu).unwrap_err();
    assert_eq!((e.op, e.kind), ("rand", ErrorKind::Shape));
}

#[test]
fn convolution_and_pooling_sizes_near_usize_max_are_errors() {
    use kiln::nn::functional::{self as F, Conv2dOpts, MaxPool2dOpts, Padding};
    let x = Tensor::ones([1, 1, 4, 4]);
    let w = Tensor::ones([1, 1, 2, 2]);
    let opts = Conv2dOpts { padding: Padding::Explicit([usize::MAX, 0]), ..Default::default() };
    let e = F::try_conv2d(&x, &w, None, &opts).unwrap_err();
    assert_eq!((e.op, e.kind), ("conv2d", ErrorKind::Shape));
    let opts = Conv2dOpts { dilation: [usize::MAX, 1], ..Default::default() };
    assert_eq!(F::try_conv2d(&x, &w, None, &opts).unwrap_err().kind, ErrorKind::Shape);
    // A window past isize::MAX wrapped negative and gave an output larger than the input.
    let opts = MaxPool2dOpts::new([usize::MAX, 1]);
    let e = F::try_max_pool2d_opts(&x, &opts).unwrap_err();
    assert!(e.message.contains("output size is too small"), "{e}");
}

#[test]
fn memory_the_system_refuses_is_an_error_from_try_forms_and_a_panic_from_the_others() {
    // 2^48 f32 = 2^50 bytes (1 PiB): refused on any Linux machine. This aborted the process.
    let line = line!() + 1;
    let e = Tensor::try_zeros([1 << 24, 1 << 24]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfMemory);
    assert_eq!(
        e.to_string(),
        format!("zeros: out of memory: the system refused to allocate 1125899906842624 bytes (1.0 PiB) for a tensor of shape [16777216, 16777216] and dtype float32 (at {}:{line})", file!())
    );
    let msg = panic_message(|| drop(Tensor::ones([1i64 << 48])));
    assert!(
        msg.starts_with("ones: out of memory: the system refused to allocate 1125899906842624 bytes")
            && msg.contains(file!()),
        "{msg}"
    );
    // Through ops on a valid view: an elementwise result, a cast, a product, a join.
    let big = Tensor::ones([1]).expand([1i64 << 48]);
    assert!(panic_message(|| drop(big.exp())).starts_with("exp: out of memory"));
    assert_eq!(big.try_add(&big).unwrap_err().op, "add");
    assert_eq!(big.try_to_dtype(DType::F64).unwrap_err().kind, ErrorKind::OutOfMemory);
    let col = Tensor::ones([1, 1]).expand([1 << 24, 1]);
    assert_eq!(col.try_matmul(&col.t()).unwrap_err().kind, ErrorKind::OutOfMemory);
    assert_eq!(Tensor::try_cat(&[&big, &big], 0).unwrap_err().kind, ErrorKind::OutOfMemory);
    assert_eq!(Tensor::try_randn_opts([1i64 << 48], DType::F32, Device::Cpu).unwrap_err().kind, ErrorKind::OutOfMemory);
    // Nothing was kept: ordinary allocations go on.
    assert_eq!(Tensor::ones([3]).sum().item::<f32>(), 3.0);
}

#[test]
fn a_compiled_step_over_a_wrapping_view_is_an_error_not_a_segfault() {
    // The compiled kernel ran over the wrapped count's 2 elements with a huge shape.
    let x = Tensor::zeros([2]);
    let mut step = kiln::compile(|x: &Tensor| x.try_view([3i64, 0x5555_5555_5555_5556]).map(|t| t.exp() * 2.0));
    let e = step.call(&x).unwrap_err();
    assert_eq!((e.op, e.kind), ("view", ErrorKind::Shape));
    let mut step = kiln::compile(|(a, b): (&Tensor, &Tensor)| {
        a.try_expand([1i64 << 33, 1]).and_then(|a| a.try_add(b.expand([1, 1i64 << 33])))
    });
    let (a, b) = (Tensor::ones([1, 1]), Tensor::ones([1, 1]));
    assert_eq!(step.call((&a, &b)).unwrap_err().op, "add");
    // The step still runs ordinary calls afterwards.
    let mut ok = kiln::compile(|x: &Tensor| x.try_view([2, 1]).map(|t| t + 1.0));
    assert_eq!(ok.call(&x).unwrap().to_vec::<f32>(), vec![1.0, 1.0]);
}

#[test]
fn a_compiled_result_the_system_refuses_panics_with_the_bytes_instead_of_aborting() {
    let big = Tensor::ones([1]).expand([1i64 << 48]);
    let mut step = kiln::compile(|x: &Tensor| x * 2.0);
    let msg = panic_message(|| drop(step.call(&big)));
    assert!(msg.contains("out of memory: the system refused to allocate"), "{msg}");
    let small = Tensor::ones([3]);
    assert_eq!(step.call(&small).to_vec::<f32>(), vec![2.0; 3]);
}
