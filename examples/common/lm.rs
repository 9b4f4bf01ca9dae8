//! What the character-level language-model examples (`char_lstm.rs`, `transformer_lm.rs`)
//! share: the generated corpus and its vocabulary, sampling a character from logits and the
//! SVG loss curve.

use kiln::Tensor;

/// A deterministic text from a small grammar: sentences of subjects, verbs and places.
pub fn corpus(chars: usize, seed: u64) -> String {
    const SUBJECTS: &[&str] = &["the cat", "a dog", "the old man", "my sister", "the bird", "a child", "the farmer"];
    const VERBS: &[&str] = &["sat", "slept", "sang", "waited", "walked", "ran", "read a book"];
    const PLACES: &[&str] =
        &["on the mat", "by the river", "in the garden", "under the tree", "at home", "near the hill"];
    const ENDS: &[&str] = &[".", ".", "!", " today.", " again."];
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut pick = |options: &[&'static str]| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        options[(state >> 33) as usize % options.len()]
    };
    let mut text = String::with_capacity(chars + 64);
    while text.len() < chars {
        let sentence = format!("{} {} {}{} ", pick(SUBJECTS), pick(VERBS), pick(PLACES), pick(ENDS));
        let mut letters = sentence.chars();
        let first = letters.next().map(|c| c.to_ascii_uppercase()).unwrap_or(' ');
        text.push(first);
        text.extend(letters);
    }
    text.truncate(chars);
    text
}

/// The distinct characters of `text`, sorted (a character's id is its index), and `text` as
/// ids.
pub fn vocabulary(text: &str) -> (Vec<char>, Vec<i64>) {
    let mut vocab: Vec<char> = text.chars().collect();
    vocab.sort_unstable();
    vocab.dedup();
    let ids = text.chars().map(|c| vocab.binary_search(&c).expect("in the vocabulary") as i64).collect();
    (vocab, ids)
}

/// An index drawn from `softmax(logits / temperature)` (`logits` 1-D), with the global
/// generator.
pub fn sample_index(logits: &Tensor, temperature: f64) -> usize {
    let probs = (logits / temperature).softmax(0).to_vec::<f32>();
    let u = Tensor::rand([1]).item::<f32>();
    let mut acc = 0.0;
    let next = probs.iter().position(|&p| {
        acc += p;
        acc > u
    });
    next.unwrap_or(probs.len() - 1)
}

/// Plots the training loss per step as an SVG at `path`, titled `caption`; the error names
/// `example`.
pub fn write_curve(example: &'static str, path: &str, caption: &str, curve: &[f64]) -> kiln::Result<()> {
    plot(path, caption, curve).map_err(|e| kiln::Error::new(example, kiln::ErrorKind::Io, e.to_string()))?;
    println!("wrote {path}");
    Ok(())
}

/// [`write_curve`]'s drawing.
fn plot(path: &str, caption: &str, curve: &[f64]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (600, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = curve.iter().copied().fold(0.1, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0f64..curve.len().max(2) as f64, 0f64..top * 1.05)?;
    chart.configure_mesh().x_desc("batch").draw()?;
    chart.draw_series(LineSeries::new(curve.iter().enumerate().map(|(i, &l)| (i as f64, l)), &BLUE))?;
    root.present()?;
    Ok(())
}
