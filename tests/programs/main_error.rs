//! The program `tests/error_locations.rs` runs to see what a user's `main` returning
//! `kiln::Result<()>` prints when it fails (a `[[bin]]` of the `kiln` package, so that the test
//! finds it through `CARGO_BIN_EXE_kiln-main-error`): it loads the file named by its first
//! argument, and returns the error if that fails.

fn main() -> kiln::Result<()> {
    let path = std::env::args().nth(1).expect("usage: kiln-main-error FILE");
    let state = kiln::load(&path)?;
    println!("{} tensors", state.len());
    Ok(())
}
