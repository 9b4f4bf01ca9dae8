//! Property tests: views against an independent model of what they select, ops on views
//! against the same ops on contiguous copies, `reshape` against `contiguous().view()`, and
//! broadcasting against NumPy's rule and an explicit loop.

mod common;

use common::{read_values, same_values, Values};
use kiln::{DType, Tensor};
use proptest::prelude::*;

/// A view step with raw parameters, made valid for the current shape when applied (`None`
/// when it cannot apply, e.g. `select` on a 0-dim tensor).
#[derive(Clone, Debug)]
enum Step {
    Transpose(usize, usize),
    Permute(Vec<usize>),
    Narrow(usize, usize, usize),
    Select(usize, usize),
    Unsqueeze(usize),
    Expand(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..4usize, 0..4usize).prop_map(|(a, b)| Step::Transpose(a, b)),
        proptest::collection::vec(any::<usize>(), 4).prop_map(Step::Permute),
        (0..4usize, 0..4usize, 0..4usize).prop_map(|(d, s, l)| Step::Narrow(d, s, l)),
        (0..4usize, 0..4usize).prop_map(|(d, i)| Step::Select(d, i)),
        (0..5usize).prop_map(Step::Unsqueeze),
        (0..4usize, 1..4usize).prop_map(|(d, n)| Step::Expand(d, n)),
    ]
}

/// The model of a view: its shape and, for each element in row-major order, the flat index
/// into the contiguous base it reads.
#[derive(Clone, Debug)]
struct Model {
    shape: Vec<usize>,
    index: Vec<usize>,
}

/// Row-major multi-indices of `shape`.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut f| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = f % shape[d];
                f /= shape[d];
            }
            idx
        })
        .collect()
}

/// The flat row-major position of `idx` in `shape`.
fn flat(shape: &[usize], idx: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (i, s)| acc * s + i)
}

impl Model {
    fn contiguous(shape: &[usize]) -> Model {
        Model { shape: shape.to_vec(), index: (0..shape.iter().product()).collect() }
    }

    /// A new view of `shape` whose element at `out` reads this model's element at `src(out)`.
    fn remap(&self, shape: Vec<usize>, src: impl Fn(&[usize]) -> Vec<usize>) -> Model {
        let index = indices(&shape).iter().map(|o| self.index[flat(&self.shape, &src(o))]).collect();
        Model { shape, index }
    }
}

/// Applies `step` to both the kiln tensor and the model, or `None` when it does not apply.
fn apply(t: &Tensor, m: &Model, step: &Step) -> Option<(Tensor, Model)> {
    let nd = m.shape.len();
    Some(match *step {
        Step::Transpose(a, b) => {
            if nd == 0 {
                return None;
            }
            let (a, b) = (a % nd, b % nd);
            let mut shape = m.shape.clone();
            shape.swap(a, b);
            (
                t.transpose(a as i64, b as i64),
                m.remap(shape, |o| {
                    let mut i = o.to_vec();
                    i.swap(a, b);
                    i
                }),
            )
        }
        Step::Permute(ref keys) => {
            let mut perm: Vec<usize> = (0..nd).collect();
            perm.sort_by_key(|&d| keys[d]);
            let shape: Vec<usize> = perm.iter().map(|&p| m.shape[p]).collect();
            let dims: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
            (
                t.permute(&dims),
                m.remap(shape, |o| {
                    let mut i = vec![0; nd];
                    for (k, &p) in perm.iter().enumerate() {
                        i[p] = o[k];
                    }
                    i
                }),
            )
        }
        Step::Narrow(d, s, l) => {
            if nd == 0 {
                return None;
            }
            let d = d % nd;
            let size = m.shape[d];
            let start = s % (size + 1);
            let len = l % (size - start + 1);
            let mut shape = m.shape.clone();
            shape[d] = len;
            (
                t.narrow(d as i64, start as i64, len),
                m.remap(shape, |o| {
                    let mut i = o.to_vec();
                    i[d] += start;
                    i
                }),
            )
        }
        Step::Select(d, i) => {
            if nd == 0 || m.shape[d % nd] == 0 {
                return None;
            }
            let d = d % nd;
            let i = i % m.shape[d];
            let mut shape = m.shape.clone();
            shape.remove(d);
            (
                t.select(d as i64, i as i64),
                m.remap(shape, |o| {
                    let mut idx = o.to_vec();
                    idx.insert(d, i);
                    idx
                }),
            )
        }
        Step::Unsqueeze(d) => {
            if nd >= 4 {
                return None;
            }
            let d = d % (nd + 1);
            let mut shape = m.shape.clone();
            shape.insert(d, 1);
            (
                t.unsqueeze(d as i64),
                m.remap(shape, |o| {
                    let mut i = o.to_vec();
                    i.remove(d);
                    i
                }),
            )
        }
        Step::Expand(d, n) => {
            // Expands a size-1 dim to n, or adds a leading dim of size n.
            let ones: Vec<usize> = (0..nd).filter(|&k| m.shape[k] == 1).collect();
            let (shape, lead) = if ones.is_empty() || d % 2 == 0 {
                if nd >= 4 {
                    return None;
                }
                ([vec![n], m.shape.clone()].concat(), 1)
            } else {
                let mut s = m.shape.clone();
                s[ones[d % ones.len()]] = n;
                (s, 0)
            };
            let spec: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
            let base_shape = m.shape.clone();
            (
                t.expand(&spec),
                m.remap(shape, |o| {
                    o[lead..].iter().zip(&base_shape).map(|(&i, &s)| if s == 1 { 0 } else { i }).collect()
                }),
            )
        }
    })
}

/// A contiguous base of `shape` and `dtype` with small varied values (quarters for floats,
/// exact in every float dtype), and its values.
fn base(shape: &[usize], dtype: DType) -> (Tensor, Values) {
    let n: usize = shape.iter().product();
    let scale = if dtype.is_float() { 0.25 } else { 1.0 };
    let raw: Vec<f64> = (0..n).map(|i| (((i * 7) % 23) as f64 - 11.0) * scale).collect();
    let t = Tensor::from_vec(raw, shape).to_dtype(dtype);
    let v = read_values(&t);
    (t, v)
}

/// The model's view of `base`'s values.
fn gather(base: &Values, index: &[usize]) -> Values {
    match base {
        Values::Float(v) => Values::Float(index.iter().map(|&i| v[i]).collect()),
        Values::Int(v) => Values::Int(index.iter().map(|&i| v[i]).collect()),
    }
}

fn shape_strategy(max_dims: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(prop_oneof![4 => 1..5usize, 1 => Just(0usize)], 0..=max_dims)
}

fn dtype_strategy() -> impl Strategy<Value = DType> {
    prop_oneof![
        Just(DType::F32),
        Just(DType::F64),
        Just(DType::F16),
        Just(DType::I64),
        Just(DType::I32),
        Just(DType::U8)
    ]
}

/// Builds the view chain on a fresh base.
fn viewed(shape: &[usize], dtype: DType, steps: &[Step]) -> (Tensor, Model, Values) {
    let (t, vals) = base(shape, dtype);
    let (mut t, mut m) = (t, Model::contiguous(shape));
    for s in steps {
        if let Some((t2, m2)) = apply(&t, &m, s) {
            (t, m) = (t2, m2);
        }
    }
    (t, m, vals)
}

/// An op that is defined on every dtype in `dtype_strategy`, exact so results compare equal.
fn affine(x: &Tensor) -> Tensor {
    x.mul(3).add(1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A chain of views selects what the model says, and ops on it equal ops on its
    /// contiguous copy.
    #[test]
    fn views_match_model_and_contiguous(shape in shape_strategy(4), dtype in dtype_strategy(), steps in proptest::collection::vec(step(), 0..5)) {
        let (v, m, vals) = viewed(&shape, dtype, &steps);
        prop_assert_eq!(v.shape(), m.shape.as_slice());
        prop_assert_eq!(read_values(&v), gather(&vals, &m.index));
        let c = v.contiguous();
        prop_assert!(c.is_contiguous());
        prop_assert!(same_values(&affine(&v), &affine(&c)));
        if dtype.is_float() {
            prop_assert!(same_values(&v.exp(), &c.exp()), "exp");
            prop_assert!(same_values(&v.tanh(), &c.tanh()), "tanh");
            prop_assert!(same_values(&v.sigmoid(), &c.sigmoid()), "sigmoid");
        }
        prop_assert!(same_values(&v.abs(), &c.abs()));
        prop_assert!(same_values(&v.lt(2), &c.lt(2)));
        // A binary op of the view with another layout of the same shape.
        if v.dim() >= 2 {
            let other = affine(&c).transpose(0, 1).contiguous().transpose(0, 1);
            prop_assert!(same_values(&v.sub(&other), &c.sub(other.contiguous())));
            prop_assert!(same_values(&Tensor::where_cond(&v.gt(0), &v, &other), &Tensor::where_cond(&c.gt(0), &c, other.contiguous())));
        }
    }

    /// In place through a view writes exactly the viewed elements of the base.
    #[test]
    fn inplace_through_views(shape in shape_strategy(4), dtype in dtype_strategy(), steps in proptest::collection::vec(step(), 0..5)) {
        let steps: Vec<Step> = steps.into_iter().filter(|s| !matches!(s, Step::Expand(..))).collect();
        let (b, _) = base(&shape, dtype);
        let (mut v, mut m) = (b.clone(), Model::contiguous(&shape));
        for s in &steps {
            if let Some((t2, m2)) = apply(&v, &m, s) {
                (v, m) = (t2, m2);
            }
        }
        let before = read_values(&b);
        v.mul_(3).add_(1);
        let expected = match before {
            Values::Float(mut x) => {
                m.index.iter().for_each(|&i| x[i] = x[i] * 3.0 + 1.0);
                Values::Float(x)
            }
            Values::Int(mut x) => {
                m.index.iter().for_each(|&i| x[i] = x[i] * 3 + 1);
                Values::Int(x)
            }
        };
        let expected = common::tensor_from_values(&expected, dtype, &shape);
        prop_assert!(same_values(&b, &expected), "base after the write: {:?}", read_values(&b));
    }

    /// `reshape` equals `contiguous().view()`, and a `view` that succeeds shares storage.
    #[test]
    fn reshape_is_contiguous_view(shape in shape_strategy(4), steps in proptest::collection::vec(step(), 0..4), split in 1..5usize) {
        let (v, _, _) = viewed(&shape, DType::F32, &steps);
        let n = v.numel() as i64;
        let d = (1..=split as i64).rev().find(|d| n % d == 0).unwrap_or(1);
        for target in [vec![-1], vec![d, -1], vec![-1, d, 1]] {
            if n == 0 && target.len() > 1 {
                continue; // -1 is ambiguous for zero elements, as in PyTorch
            }
            let r = v.reshape(&target);
            let c = v.contiguous().view(&target);
            prop_assert_eq!(r.shape(), c.shape());
            prop_assert!(same_values(&r, &c));
            if let Ok(w) = v.try_view(&target) {
                prop_assert!(w.shares_storage_with(&v));
                prop_assert!(same_values(&w, &c));
            }
        }
    }

    /// Broadcasting two compatible shapes gives NumPy's shape and the explicit loop's values;
    /// incompatible shapes are an error.
    #[test]
    fn broadcasting_follows_numpy(out in proptest::collection::vec(1..5usize, 0..=4), drop_a in 0..5usize, drop_b in 0..5usize, ones_a in any::<u8>(), ones_b in any::<u8>(), float in any::<bool>()) {
        let derive = |drop: usize, ones: u8| -> Vec<usize> {
            out[drop.min(out.len())..].iter().enumerate().map(|(k, &s)| if ones >> k & 1 == 1 { 1 } else { s }).collect()
        };
        let (sa, sb) = (derive(drop_a, ones_a), derive(drop_b, ones_b));
        let expected_shape = numpy_broadcast(&sa, &sb).expect("derived from one shape");
        let dtype = if float { DType::F32 } else { DType::I64 };
        let (a, va) = base(&sa, dtype);
        let b = base(&sb, dtype).0.mul(2);
        let vb = read_values(&b);
        let s = a.try_add(&b).expect("compatible shapes");
        prop_assert_eq!(s.shape(), expected_shape.as_slice());
        let at = |shape: &[usize], o: &[usize]| -> usize {
            let lead = o.len() - shape.len();
            flat(shape, &o[lead..].iter().zip(shape).map(|(&i, &n)| if n == 1 { 0 } else { i }).collect::<Vec<_>>())
        };
        let expected: Vec<f64> = indices(&expected_shape).iter().map(|o| {
            let x = match &va { Values::Float(v) => v[at(&sa, o)], Values::Int(v) => v[at(&sa, o)] as f64 };
            let y = match &vb { Values::Float(v) => v[at(&sb, o)], Values::Int(v) => v[at(&sb, o)] as f64 };
            x + y
        }).collect();
        let got: Vec<f64> = match read_values(&s) { Values::Float(v) => v, Values::Int(v) => v.into_iter().map(|x| x as f64).collect() };
        prop_assert_eq!(got, expected);
        // Make one dim incompatible: both sizes != 1 and different.
        if let Some(k) = (0..sa.len().min(sb.len())).find(|&k| sa[sa.len() - 1 - k] > 1) {
            let mut bad = sb.clone();
            let pos = sb.len() - 1 - k;
            bad[pos] = sa[sa.len() - 1 - k] + 1;
            let (c, _) = base(&bad, dtype);
            prop_assert!(a.try_add(&c).is_err());
            prop_assert!(numpy_broadcast(&sa, &bad).is_none());
        }
    }
}

/// NumPy's broadcasting rule, written out independently of kiln.
fn numpy_broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let get = |s: &[usize], k: usize| if k < n - s.len() { 1 } else { s[k - (n - s.len())] };
    (0..n)
        .map(|k| match (get(a, k), get(b, k)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Zero-size views may start past the end of their storage, as in PyTorch.
#[test]
fn zero_size_views_with_offsets() {
    let x = Tensor::zeros([0, 2, 1]);
    assert_eq!(x.select(1, 1).shape(), &[0, 1]);
    let y = Tensor::zeros([0, 1]).narrow(1, 1, 0);
    assert_eq!((y.shape(), y.exp().shape()), (&[0usize, 0][..], &[0usize, 0][..]));
    assert_eq!(Tensor::zeros([2, 0]).t().narrow(0, 0, 0).add(1.0).numel(), 0);
}

/// Views of an input past the parallel threshold (> 100k elements): ops on them equal ops on
/// their contiguous copies, and broadcasting a transposed operand matches the explicit loop.
#[test]
fn large_views_take_the_parallel_path() {
    let (b, _) = base(&[400, 300], DType::F32);
    let v = b.t().narrow(0, 7, 250); // [250, 400], 100k elements, non-contiguous
    let c = v.contiguous();
    assert!(!v.is_contiguous() && v.numel() >= 100_000);
    assert!(same_values(&affine(&v), &affine(&c)), "x*3+1 on a strided view differs from its contiguous copy");
    for (name, f) in [
        ("exp", Tensor::exp as fn(&Tensor) -> Tensor),
        ("tanh", Tensor::tanh),
        ("sigmoid", Tensor::sigmoid),
        ("sin", Tensor::sin),
    ] {
        assert!(same_values(&f(&v), &f(&c)), "{name} on a strided view differs from {name} on its contiguous copy");
    }
    let row = Tensor::arange(400).to_dtype(DType::F32);
    let s = v.add(&row);
    let (Values::Float(sv), Values::Float(cv)) = (read_values(&s), read_values(&c)) else { panic!("f32") };
    for (k, (x, y)) in sv.iter().zip(&cv).enumerate() {
        assert_eq!(*x, y + (k % 400) as f64, "element {k}");
    }
    let e = Tensor::from_vec((0..250).map(|i| i as f32).collect(), [250, 1]).expand([250, 400]);
    assert!(same_values(&v.mul(&e), &c.mul(e.contiguous())));
}
