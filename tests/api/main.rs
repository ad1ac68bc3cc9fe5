//! How a program holds and calls the engine, and what it refuses: the
//! README's program, ownership and borrowing in real embeddings, `?` on a
//! commit, configuration bounds, every misuse as a typed error, and the
//! crate's layering.

mod config_bounds;
mod embedding;
mod layering;
mod misuse;
mod question_mark_on_commit;
mod readme_snippet;
mod tables;
