//! `Embedding`: a lookup table of learned vectors.

use super::functional as F;
use super::init::normal_;
use crate::nn::Module;
use crate::{no_grad_guard, Tensor};

/// A table of `num_embeddings` vectors of size `embedding_dim`, initialised N(0, 1); the row
/// `padding_idx`, if any, starts at zero and gets no gradient.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Embedding {
    /// The table, `(num_embeddings, embedding_dim)`.
    pub weight: Tensor,
    /// The row that stays zero and untrained.
    pub padding_idx: Option<usize>,
}

impl Embedding {
    /// `nn.Embedding(num_embeddings, embedding_dim)`.
    #[track_caller]
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Embedding {
        Embedding::with_padding(num_embeddings, embedding_dim, None)
    }

    /// `nn.Embedding(num_embeddings, embedding_dim, padding_idx)`.
    #[track_caller]
    pub fn with_padding(num_embeddings: usize, embedding_dim: usize, padding_idx: Option<usize>) -> Embedding {
        if let Some(p) = padding_idx {
            if p >= num_embeddings {
                crate::error::fail(
                    "Embedding",
                    crate::ErrorKind::Value,
                    format!("padding_idx {p} must be within num_embeddings {num_embeddings}"),
                );
            }
        }
        let weight = Tensor::empty([num_embeddings, embedding_dim]);
        normal_(&weight, 0.0, 1.0);
        if let Some(p) = padding_idx {
            let _guard = no_grad_guard();
            weight.select(0, p as i64).zero_();
        }
        Embedding { weight: weight.requires_grad_(true), padding_idx }
    }

    fn describe(&self) -> String {
        let s = self.weight.shape();
        match self.padding_idx {
            Some(p) => format!("{}, {}, padding_idx={p}", s[0], s[1]),
            None => format!("{}, {}", s[0], s[1]),
        }
    }
}

impl Module for Embedding {
    /// Looks up the rows named by the integer tensor `input`: output `(*input.shape, dim)`.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::embedding(input, &self.weight, self.padding_idx.map(|p| p as i64)))
    }
}
