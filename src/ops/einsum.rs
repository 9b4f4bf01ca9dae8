//! `Tensor::einsum` (PyTorch's `torch.einsum`): sums of products over labelled dims, lowered to
//! ops kiln has. A label repeated within one operand takes that diagonal (`diagonal`); a label
//! no later operand or the output needs is summed out first; two operands are contracted by
//! one batched matrix product (`bmm`) after a permutation and reshape each, left to right; the
//! result is permuted into the output's order. Autograd and `kiln::compile` see those ops.
//!
//! Labels are ASCII letters; an explicit output follows `->`, else it is the labels that appear
//! once, in alphabetical order. A dim of size 1 broadcasts against the same label's size
//! elsewhere. The ellipsis (`...`) is not supported yet.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// An operand with one label per dim.
struct Labelled {
    t: Tensor,
    labels: Vec<char>,
}

/// The parsed equation: each operand's labels and the output's.
#[track_caller]
fn parse(equation: &str, count: usize) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains('.') {
        bail!("einsum", Value, "the ellipsis (...) is not supported yet (equation {equation:?})");
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let every: String = lhs.chars().chain(rhs.unwrap_or("").chars()).filter(|&c| c != ',').collect();
    if let Some(c) = every.chars().find(|c| !c.is_ascii_alphabetic()) {
        bail!("einsum", Value, "invalid subscript {c:?} in equation {equation:?}: subscripts are letters");
    }
    if terms.len() != count {
        bail!("einsum", Value, "the equation {equation:?} has {} operands but {count} tensors were given", terms.len());
    }
    let output: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let count = |c: &char| terms.iter().flatten().filter(|d| *d == c).count();
            let mut once: Vec<char> = terms.iter().flatten().copied().filter(|c| count(c) == 1).collect();
            once.sort_unstable();
            once
        }
    };
    for (i, &c) in output.iter().enumerate() {
        if output[..i].contains(&c) {
            bail!("einsum", Value, "output subscript {c} appears more than once in equation {equation:?}");
        }
        if !terms.iter().flatten().any(|&d| d == c) {
            bail!("einsum", Value, "output subscript {c} does not appear in any operand of equation {equation:?}");
        }
    }
    Ok((terms, output))
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
    Ok(Labelled { t: x.t.try_sum_dim(dims, false)?, labels })
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
    let lhs = arrange(&a, &a_order, size)?.try_reshape(&[nb, m, k])?;
    let rhs = arrange(&b, &b_order, size)?.try_reshape(&[nb, k, n])?;
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
    /// not match their subscripts, or sizes of one label that disagree.
    #[track_caller]
    pub fn try_einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let (terms, output) = parse(equation, operands.len())?;
        let mut sizes: Vec<(char, usize)> = Vec::new();
        let mut labelled = Vec::with_capacity(operands.len());
        for (i, (t, labels)) in operands.iter().zip(terms).enumerate() {
            if labels.len() != t.dim() {
                bail!(
                    "einsum",
                    Shape,
                    "operand {i} has shape {:?} but subscripts {:?} (equation {equation:?})",
                    t.shape(),
                    labels.iter().collect::<String>()
                );
            }
            for (&c, &n) in labels.iter().zip(t.shape()) {
                match sizes.iter_mut().find(|(d, _)| *d == c) {
                    Some((_, m)) if *m == 1 => *m = n,
                    Some((_, m)) if *m != n && n != 1 => bail!(
                        "einsum",
                        Shape,
                        "subscript {c} has size {n} for operand {i} which does not broadcast with the size {m} seen before (equation {equation:?})"
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
