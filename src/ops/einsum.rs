//! `Tensor::einsum` (PyTorch's `torch.einsum`): sums of products over labelled dims, lowered to
//! ops kiln has. A label repeated within one operand takes that diagonal (`diagonal`); a label
//! no later operand or the output needs is summed out first; two operands are contracted by
//! one batched matrix product (`bmm`) after a permutation and reshape each, left to right; the
//! result is permuted into the output's order. Autograd and `kiln::compile` see those ops.
//!
//! Labels are ASCII letters; an explicit output follows `->`, else it is the labels that appear
//! once, in alphabetical order (upper case first). A dim of size 1 broadcasts against the same
//! label's size elsewhere. An operand's ellipsis (`...`, at most one each) stands for its dims
//! that no letter names; the ellipses' dims broadcast against each other aligned on the right,
//! as PyTorch's. An explicit output places them where its own `...` is and sums them out when
//! it has none; an implicit output puts them first.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// An operand with one label per dim.
struct Labelled {
    t: Tensor,
    labels: Vec<char>,
}

/// One subscript of a term: a letter, or the ellipsis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sub {
    Letter(char),
    Ellipsis,
}

/// The first of the private-use characters that label the ellipsis's dims (never a letter).
const ELLIPSIS_LABELS: u32 = 0xE000;

/// The label of dim `k` (from the left) of the ellipsis's broadcast dims.
fn ellipsis_label(k: usize) -> char {
    char::from_u32(ELLIPSIS_LABELS + k as u32).expect("a private-use character")
}

/// How messages name label `c`: `subscript c`, or the ellipsis's dim.
fn describe(c: char) -> String {
    match (c as u32).checked_sub(ELLIPSIS_LABELS) {
        Some(k) => format!("dim {k} covered by the ellipsis"),
        None => format!("subscript {c}"),
    }
}

/// The subscripts of one term (`what`: `operand i` or `output`, for messages).
#[track_caller]
fn parse_term(term: &str, what: &str, equation: &str) -> Result<Vec<Sub>> {
    let mut subs = Vec::with_capacity(term.len());
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("...") {
            if subs.contains(&Sub::Ellipsis) {
                bail!(
                    "einsum",
                    Value,
                    "found '.' for {what} for which an ellipsis was already found (equation {equation:?})"
                );
            }
            subs.push(Sub::Ellipsis);
            rest = after;
            continue;
        }
        if c == '.' {
            bail!(
                "einsum",
                Value,
                "found '.' for {what} that is not part of any ellipsis (...) (equation {equation:?})"
            );
        }
        if !c.is_ascii_alphabetic() {
            bail!("einsum", Value, "invalid subscript {c:?} in equation {equation:?}: subscripts are letters");
        }
        subs.push(Sub::Letter(c));
        rest = &rest[c.len_utf8()..];
    }
    Ok(subs)
}

/// The parsed equation: each operand's subscripts and, when given after `->`, the output's.
#[track_caller]
fn parse(equation: &str, count: usize) -> Result<(Vec<Vec<Sub>>, Option<Vec<Sub>>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    // Loops, not closures: `#[track_caller]` reaches the user's line only through calls.
    let mut terms = Vec::new();
    for (i, t) in lhs.split(',').enumerate() {
        terms.push(parse_term(t, &format!("operand {i}"), equation)?);
    }
    let output = match rhs {
        Some(r) => Some(parse_term(r, "output", equation)?),
        None => None,
    };
    if terms.len() != count {
        bail!("einsum", Value, "the equation {equation:?} has {} operands but {count} tensors were given", terms.len());
    }
    Ok((terms, output))
}

/// Each operand's labels, its ellipsis (if any) replaced by labels of its dims, aligned on the
/// right of the `ell` broadcast dims of all ellipses; and `ell`.
#[track_caller]
fn label_operands(terms: &[Vec<Sub>], operands: &[&Tensor], equation: &str) -> Result<(Vec<Vec<char>>, usize)> {
    let mut covered = Vec::with_capacity(terms.len());
    for (i, (subs, t)) in terms.iter().zip(operands).enumerate() {
        let letters = subs.iter().filter(|s| **s != Sub::Ellipsis).count();
        let has_ellipsis = subs.contains(&Sub::Ellipsis);
        if t.dim() < letters || (!has_ellipsis && t.dim() != letters) {
            let need = if has_ellipsis { "at least " } else { "" };
            bail!(
                "einsum",
                Shape,
                "operand {i} has shape {:?} but subscripts {:?} need {need}{letters} dims (equation {equation:?})",
                t.shape(),
                subs.iter()
                    .map(|s| if let Sub::Letter(c) = s { c.to_string() } else { "...".into() })
                    .collect::<String>()
            );
        }
        covered.push(t.dim() - letters);
    }
    let ell = covered.iter().copied().max().unwrap_or(0);
    let labels = terms
        .iter()
        .zip(covered)
        .map(|(subs, n)| {
            subs.iter()
                .flat_map(|s| match *s {
                    Sub::Letter(c) => vec![c],
                    Sub::Ellipsis => (ell - n..ell).map(ellipsis_label).collect(),
                })
                .collect()
        })
        .collect();
    Ok((labels, ell))
}

/// The output's labels: the explicit `output` (its ellipsis replaced by the `ell` broadcast
/// dims), else the ellipsis's dims (when an operand has one) and then the letters that appear
/// once, in alphabetical order.
#[track_caller]
fn output_labels(terms: &[Vec<Sub>], output: Option<Vec<Sub>>, ell: usize, equation: &str) -> Result<Vec<char>> {
    let all = || terms.iter().flatten();
    let Some(output) = output else {
        let ellipsis = all().any(|s| *s == Sub::Ellipsis);
        let count = |c: &Sub| all().filter(|d| *d == c).count();
        let mut once: Vec<char> = all()
            .filter(|s| count(s) == 1)
            .filter_map(|s| if let Sub::Letter(c) = s { Some(*c) } else { None })
            .collect();
        once.sort_unstable();
        return Ok((0..if ellipsis { ell } else { 0 }).map(ellipsis_label).chain(once).collect());
    };
    let mut labels = Vec::with_capacity(output.len() + ell);
    for (i, s) in output.iter().enumerate() {
        match *s {
            Sub::Ellipsis => labels.extend((0..ell).map(ellipsis_label)),
            Sub::Letter(c) => {
                if output[..i].contains(s) {
                    bail!("einsum", Value, "output subscript {c} appears more than once in equation {equation:?}");
                }
                if !all().any(|d| d == s) {
                    bail!(
                        "einsum",
                        Value,
                        "output subscript {c} does not appear in any operand of equation {equation:?}"
                    );
                }
                labels.push(c);
            }
        }
    }
    Ok(labels)
}

/// `x` with each label repeated within it replaced by that diagonal (the label once, last).
#[track_caller]
fn take_diagonals(mut x: Labelled) -> Result<Labelled> {
    while let Some((p, q)) =
        (0..x.labels.len()).find_map(|q| x.labels[..q].iter().position(|&c| c == x.labels[q]).map(|p| (p, q)))
    {
        let c = x.labels[q];
        if x.t.shape()[p] != x.t.shape()[q] {
            bail!(
                "einsum",
                Shape,
                "subscript {c} repeated in one operand has sizes {} and {}",
                x.t.shape()[p],
                x.t.shape()[q]
            );
        }
        x.t = x.t.try_diagonal(0, p as i64, q as i64)?;
        x.labels.remove(q);
        x.labels.remove(p);
        x.labels.push(c);
    }
    Ok(x)
}

/// `x` with the labels that `keep` refuses summed out.
#[track_caller]
fn sum_out(x: Labelled, keep: impl Fn(char) -> bool) -> Result<Labelled> {
    let dims: Vec<i64> = (0..x.labels.len()).filter(|&i| !keep(x.labels[i])).map(|i| i as i64).collect();
    if dims.is_empty() {
        return Ok(x);
    }
    let labels = x.labels.iter().copied().filter(|&c| keep(c)).collect();
    Ok(Labelled { t: x.t.try_sum_dim(dims)?, labels })
}

/// `x` permuted to `order` (a permutation of its labels) and expanded to `sizes` of them.
#[track_caller]
fn arrange(x: &Labelled, order: &[char], size: &dyn Fn(char) -> usize) -> Result<Tensor> {
    let perm: Vec<i64> =
        order.iter().map(|c| x.labels.iter().position(|d| d == c).expect("a label of x") as i64).collect();
    let sizes: Vec<i64> = order.iter().map(|&c| size(c) as i64).collect();
    x.t.try_permute(&perm)?.try_expand(&sizes)
}

/// The contraction of `a` and `b` over their shared labels that `keep` refuses; the shared
/// labels it keeps become batch dims. The result's labels: batch, `a`'s own, `b`'s own.
#[track_caller]
fn contract(a: Labelled, b: Labelled, keep: &dyn Fn(char) -> bool, size: &dyn Fn(char) -> usize) -> Result<Labelled> {
    let shared = |c: &char| b.labels.contains(c);
    let batch: Vec<char> = a.labels.iter().copied().filter(|c| shared(c) && keep(*c)).collect();
    let summed: Vec<char> = a.labels.iter().copied().filter(|c| shared(c) && !keep(*c)).collect();
    let a_own: Vec<char> = a.labels.iter().copied().filter(|c| !shared(c)).collect();
    let b_own: Vec<char> = b.labels.iter().copied().filter(|c| !a.labels.contains(c)).collect();
    let product = |labels: &[char]| labels.iter().map(|&c| size(c) as i64).product::<i64>();
    let (nb, m, k, n) = (product(&batch), product(&a_own), product(&summed), product(&b_own));
    let a_order: Vec<char> = batch.iter().chain(&a_own).chain(&summed).copied().collect();
    let b_order: Vec<char> = batch.iter().chain(&summed).chain(&b_own).copied().collect();
    let lhs = arrange(&a, &a_order, size)?.try_reshape([nb, m, k])?;
    let rhs = arrange(&b, &b_order, size)?.try_reshape([nb, k, n])?;
    let labels: Vec<char> = batch.iter().chain(&a_own).chain(&b_own).copied().collect();
    let shape: Vec<i64> = labels.iter().map(|&c| size(c) as i64).collect();
    Ok(Labelled { t: lhs.try_bmm(&rhs)?.try_reshape(&shape)?, labels })
}

impl Tensor {
    /// Sums of products of `operands` over the labelled dims of `equation`
    /// (`torch.einsum("bij,bjk->bik", a, b)`): see the module doc for the rules.
    #[track_caller]
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Tensor {
        Tensor::try_einsum(equation, operands).or_panic()
    }

    /// [`Tensor::einsum`] returning an error for a malformed equation, operands whose dims do
    /// not match their subscripts, or sizes of one label (or ellipsis dim) that disagree.
    #[track_caller]
    pub fn try_einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let (terms, output) = parse(equation, operands.len())?;
        let (terms_labels, ell) = label_operands(&terms, operands, equation)?;
        let output = output_labels(&terms, output, ell, equation)?;
        let mut sizes: Vec<(char, usize)> = Vec::new();
        let mut labelled = Vec::with_capacity(operands.len());
        for (i, (t, labels)) in operands.iter().zip(terms_labels).enumerate() {
            for (&c, &n) in labels.iter().zip(t.shape()) {
                match sizes.iter_mut().find(|(d, _)| *d == c) {
                    Some((_, m)) if *m == 1 => *m = n,
                    Some((_, m)) if *m != n && n != 1 => bail!(
                        "einsum",
                        Shape,
                        "{} has size {n} for operand {i} which does not broadcast with the size {m} seen before (equation {equation:?})",
                        describe(c)
                    ),
                    Some(_) => {}
                    None => sizes.push((c, n)),
                }
            }
            labelled.push(take_diagonals(Labelled { t: (*t).clone(), labels })?);
        }
        let size = |c: char| sizes.iter().find(|(d, _)| *d == c).map_or(1, |&(_, n)| n);
        // Left to right: each step keeps what the output or a later operand still needs.
        let mut rest = labelled.into_iter();
        let Some(first) = rest.next() else { bail!("einsum", Value, "expected at least one operand") };
        let later: Vec<Labelled> = rest.collect();
        let needed_after = |j: usize, c: char| output.contains(&c) || later[j..].iter().any(|x| x.labels.contains(&c));
        let mut acc = sum_out(first, |c| needed_after(0, c))?;
        for (j, next) in later.iter().enumerate() {
            let next = Labelled { t: next.t.clone(), labels: next.labels.clone() };
            let keep = |c: char| needed_after(j + 1, c);
            let a = sum_out(acc, |c| keep(c) || next.labels.contains(&c))?;
            let b = sum_out(next, |c| keep(c) || a.labels.contains(&c))?;
            acc = contract(a, b, &keep, &size)?;
        }
        let acc = sum_out(acc, |c| output.contains(&c))?;
        arrange(&acc, &output, &size)
    }
}
